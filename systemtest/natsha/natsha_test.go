// Package natsha_test runs the platform on a three-node JetStream cluster and loses the
// leader of the job stream, then of the audit stream, under load (make test-nats-ha).
package natsha_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// The streams whose leader the suite kills, and the load each one carries.
var victims = []struct{ stream, load string }{
	{"DBTSYNC_JOBS", "dbt sync"},
	{"AUDIT", "audited request"},
}

// TestALostStreamLeaderLosesNoJobAndNoAuditEvent: the platform, two replicas of every
// process on a three-node cluster with every stream, bucket and object store at three
// replicas, under steady dbt syncs, audited requests and identity lookups. The node
// leading the job stream is killed (SIGKILL) and restarted, then the node leading the
// audit stream. Afterwards every accepted job finished once with its model's files,
// every acknowledged request's audit event is in the trail exactly once, and every
// request not served was a 503 with Retry-After. It logs each election's downtime.
func TestALostStreamLeaderLosesNoJobAndNoAuditEvent(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{NATSNodes: 3, Replicas: 2, Workers: 2, Gateways: 2, Env: []string{
		"DBT_SYNC_JETSTREAM_REPLICAS=3", "AUDIT_STREAM_REPLICAS=3",
		"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0",
		"DBT_SYNC_MAX_QUEUED_JOBS=1000", "DBT_SYNC_MAX_RUNNING_JOBS=8",
	}})
	cluster := s.NATSCluster
	everyStreamHasThreeReplicas(t, cluster.URL())

	c := &clients{}
	for _, p := range s.Processes() {
		if p.Name == "gateway" || p.Name == "gateway-2" {
			g := apitest.New("http://" + p.Addr)
			g.HTTP.Timeout = requestTimeout
			c.gateways = append(c.gateways, g)
		}
	}
	acme := s.Seed.Accounts["acme"]
	tn := &tenant{c: c, dep: acme.Deployments[0].ID, developer: apitest.Bearer(acme.Users["developer"].Bearer),
		admin: apitest.Bearer(acme.Users["admin"].Bearer), apiKey: apitest.APIKey(acme.APIKeys["admin"])}
	l := newLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	run(&wg, stop, 300*time.Millisecond, func(n int) { tn.syncs(l, n) })
	run(&wg, stop, 100*time.Millisecond, func(n int) { tn.folders(l, n) })
	run(&wg, stop, 100*time.Millisecond, func(n int) { tn.sessions(l, n) })
	loadRuns := func(what string) {
		t.Helper()
		before := map[string]int{}
		for _, load := range []string{"dbt sync", "audited request", "identity lookup"} {
			before[load] = l.count(load)
		}
		apitest.Eventually(t, 60*time.Second, what, func() (bool, string) {
			for load, n := range before {
				if l.count(load) < n+5 {
					return false, load + " has not answered 5 more requests"
				}
			}
			return true, ""
		})
	}

	loadRuns("the load served before any node is lost")
	for _, v := range victims {
		var leader int
		apitest.Eventually(t, 30*time.Second, v.stream+" has a leader", func() (bool, string) {
			i, err := cluster.StreamLeader(context.Background(), v.stream)
			leader = i
			return err == nil && i >= 0, fmt.Sprint(i, err)
		})
		killed := time.Now()
		cluster.Kill(leader)
		apitest.Eventually(t, 60*time.Second, v.stream+" elects a new leader", func() (bool, string) {
			i, err := cluster.StreamLeader(context.Background(), v.stream)
			return err == nil && i >= 0 && i != leader, fmt.Sprint(i, err)
		})
		elected := time.Now()
		loadRuns("the load served again after " + v.stream + " lost its leader")
		served := time.Now()
		t.Logf("%s: leader %s killed; new leader after %s; longest wait for an answered %s: %s",
			v.stream, cluster.Nodes[leader].Name, elected.Sub(killed).Round(time.Millisecond), v.load,
			l.longestGap(v.load, killed, served).Round(time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := cluster.Restart(ctx, leader)
		cancel()
		if err != nil {
			t.Fatalf("restart %s: %v", cluster.Nodes[leader].Name, err)
		}
		loadRuns("the load served with " + cluster.Nodes[leader].Name + " back")
	}
	close(stop)
	wg.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	unavailable := map[string]int{}
	for _, o := range l.outages {
		unavailable[o.load]++
		if !o.acceptable() {
			t.Errorf("%s at %s: want success or 503 with Retry-After and the error body, got %s", o.load, o.at.Format(time.StampMilli), o.r)
		}
	}
	t.Logf("requests answered: %d dbt syncs accepted, %d audited requests, %d identity lookups; not served (503): %v",
		len(l.successes["dbt sync"]), len(l.successes["audited request"]), len(l.successes["identity lookup"]), unavailable)

	ids := make([]string, 0, len(l.jobs))
	for id := range l.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	jobs := tn.waitFinished(t, ids, 3*time.Minute)
	for _, id := range ids {
		tn.checkJob(t, id, l.jobs[id], jobs[id])
	}
	for action, targets := range l.events {
		var counts map[string]int
		apitest.Eventually(t, 60*time.Second, "every "+action+" event in the trail", func() (bool, string) {
			counts = tn.trail(t, action)
			missing := 0
			for target := range targets {
				if counts[target] == 0 {
					missing++
				}
			}
			return missing == 0, fmt.Sprintf("%d of %d acknowledged requests without their event", missing, len(targets))
		})
		for request := range targets {
			if counts[request] != 1 {
				t.Errorf("%s of request %s: %d events in the trail, want exactly one", action, request, counts[request])
			}
		}
	}
}

// everyStreamHasThreeReplicas: the job stream, the KV buckets, the object store and the
// audit stream were created (or moved) at the replicas the settings ask for.
func everyStreamHasThreeReplicas(t *testing.T, url string) {
	t.Helper()
	js, err := jetstream.New(devstack.NATSConnForTest(t, url))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"AUDIT", "DBTSYNC_JOBS", "KV_dbtsync_jobs", "KV_dbtsync_ledgers", "OBJ_dbtsync_manifests"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range want {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s: %d replicas, want 3", name, r)
		}
	}
}
