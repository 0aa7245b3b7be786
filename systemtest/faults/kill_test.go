package faults_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// TestServiceKilledUnderLoad: four clients keep reading from all three services
// through the gateway; workspace-svc is SIGKILLed in the middle. Requests for the
// workspace then get 502 or 503 with the error body (never a hang, never a 500), the
// embed and dbt sync services keep answering 200, and after a restart the workspace
// serves again.
func TestServiceKilledUnderLoad(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	dep := acme.Deployments[0].ID
	routes := []struct {
		service, path, authz string
	}{
		{"workspace", fmt.Sprintf("/api/v1/deployments/%d/workspace", dep), apitest.Bearer(acme.Users["admin"].Bearer)},
		{"embed", "/api/v1/groups", apitest.APIKey(acme.APIKeys["admin"])},
		{"dbtsync", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), apitest.Bearer(acme.Users["developer"].Bearer)},
	}

	// Phases: 0 before the kill, 1 while the kill is under way (anything in flight may
	// be cut: 502/503 allowed for the workspace), 2 after the process is gone.
	var phase atomic.Int32
	type outcome struct {
		service string
		phase   int32
		r       reply
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
	)
	const perPhase = 25 // requests per client per phase: a few seconds of load
	var sent [3]atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rt := routes[(c+i)%len(routes)]
				p := phase.Load()
				r := a.call("GET", rt.path, rt.authz, nil)
				if p2 := phase.Load(); p2 != p {
					p = 1 // straddled the kill
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{rt.service, p, r})
				mu.Unlock()
				sent[p].Add(1)
			}
		}()
	}
	apitest.Eventually(t, 30*time.Second, "load before the kill", func() (bool, string) {
		return sent[0].Load() >= 4*perPhase, fmt.Sprint(sent[0].Load())
	})
	phase.Store(1)
	s.Kill("workspace-svc-1")
	phase.Store(2)
	apitest.Eventually(t, 30*time.Second, "load after the kill", func() (bool, string) {
		return sent[2].Load() >= 4*perPhase, fmt.Sprint(sent[2].Load())
	})
	close(stop)
	wg.Wait()

	counts := map[string]map[int]int{}
	for _, o := range outcomes {
		key := fmt.Sprintf("%s/phase-%d", o.service, o.phase)
		if counts[key] == nil {
			counts[key] = map[int]int{}
		}
		counts[key][o.r.status]++
		var ok bool
		switch {
		case o.r.err != nil:
			ok = false
		case o.service != "workspace" || o.phase == 0:
			ok = o.r.status == 200
		case o.phase == 1:
			ok = o.r.status == 200 || ((o.r.status == 502 || o.r.status == 503) && o.r.errorBody())
		default:
			ok = (o.r.status == 502 || o.r.status == 503) && o.r.errorBody()
		}
		if !ok {
			t.Errorf("%s in phase %d (0 before the kill, 1 during, 2 after): %s", o.service, o.phase, o.r)
		}
	}
	t.Logf("answers by service and phase: %v", counts)
	for _, svc := range []string{"workspace", "embed", "dbtsync"} {
		if len(counts[svc+"/phase-2"]) == 0 {
			t.Errorf("no %s request was sent after the kill", svc)
		}
	}

	s.Restart(contextFor(t, 60*time.Second), "workspace-svc-1")
	apitest.Eventually(t, 30*time.Second, "workspace serves again after the restart", func() (bool, string) {
		r := a.call("GET", routes[0].path, routes[0].authz, nil)
		return r.status == 200, r.String()
	})
}
