package faults_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// auditEvents reads the events of acme's trail matching q (as its admin).
func auditEvents(a *api, admin string, q url.Values) ([]map[string]any, reply) {
	r := a.call("GET", "/api/v1/audit?"+q.Encode(), admin, nil)
	items, _ := r.body["items"].([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, r
}

// exactlyOneEventEach waits until every target of want has exactly one event of its
// action in the trail, and fails naming those with none or more than one.
func exactlyOneEventEach(t *testing.T, a *api, admin string, want map[string]string, within time.Duration) {
	t.Helper()
	apitest.Eventually(t, within, "one audit event for each action that succeeded", func() (bool, string) {
		missing := 0
		for target, action := range want {
			evs, r := auditEvents(a, admin, url.Values{"action": {action}, "targetId": {target}})
			if r.status != 200 {
				return false, "audit: " + r.String()
			}
			switch {
			case len(evs) > 1:
				t.Fatalf("%s of %s: %d events, want exactly one", action, target, len(evs))
			case len(evs) == 0:
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d without their event", missing, len(want))
	})
}

// TestAuditWithTheStreamDown: while NATS (the AUDIT stream) is down, workspace actions
// still succeed; each one's event waits in the service's outbox and reaches the trail,
// exactly once, after NATS is back.
func TestAuditWithTheStreamDown(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	admin := apitest.Bearer(acme.Users["admin"].Bearer)
	ws := &workspace{api: a, dep: acme.Deployments[0].ID, authz: admin}

	s.NATS.Stop()
	want := map[string]string{} // target id -> action, for every action answered with success
	for i := range 8 {
		r := ws.createFolder(fmt.Sprintf("audit-outage-%d", i), 0)
		if r.status != 200 {
			t.Fatalf("create a folder with NATS down: %s", r)
		}
		id := fmt.Sprint(int64(r.body["id"].(float64)))
		want[id] = "workspace.folder.create"
		if i%2 == 0 {
			if r := ws.move("FOLDER", int64(r.body["id"].(float64)), 0); r.status != 200 {
				t.Fatalf("move with NATS down: %s", r)
			}
		}
	}
	// They went to workspace-svc's outbox (the stream was down), not to memory.
	if n := metricValue(t, s, "workspace-svc-1", `audit_events_recorded_total{via="outbox"}`); n < 12 {
		t.Fatalf("events recorded via the outbox during the outage: %v, want the 12 actions'", n)
	}
	if err := s.NATS.Restart(contextFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	exactlyOneEventEach(t, a, admin, want, 90*time.Second)
	// The moves too: one event each (a move request is one event).
	moved, r := auditEvents(a, admin, url.Values{"action": {"workspace.items.move"}, "first": {"200"}})
	if r.status != 200 || len(moved) != 4 {
		t.Fatalf("move events after the outage: %d, want 4 (%s)", len(moved), r)
	}
}

// TestAuditWithTheStoreDown: while MongoDB (the trail's store) is down, embed sessions
// minted before the outage are still exchanged (Redis); their events wait in the stream
// and are stored, exactly once each, when MongoDB is back.
func TestAuditWithTheStoreDown(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: noRateLimits})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	admin, key := apitest.Bearer(acme.Users["admin"].Bearer), apitest.APIKey(acme.APIKeys["admin"])

	type minted struct{ sessionID, publicID string }
	var sessions []minted
	for i := range 6 {
		ext := fmt.Sprintf("audit-store-%d-%d", time.Now().UnixNano()%1e6, i)
		r := a.call("POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": acme.Deployments[0].ID, "externalId": ext})
		sid, _ := r.body["sessionId"].(string)
		if r.status != 200 || sid == "" {
			t.Fatalf("mint: %s", r)
		}
		l := a.call("GET", "/api/v1/embed/sessions?externalId="+ext, key, nil)
		items, _ := l.body["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("sessions of %s: %s", ext, l)
		}
		sessions = append(sessions, minted{sid, items[0].(map[string]any)["id"].(string)})
	}

	if err := s.Mongo.Stop(); err != nil {
		t.Fatal(err)
	}
	ws := &workspace{api: a, dep: acme.Deployments[0].ID, authz: admin}
	if r := ws.createFolder("needs-mongodb", 0); r.status != 503 {
		t.Fatalf("a folder with MongoDB down: %s, want 503 (is it down?)", r)
	}
	want := map[string]string{}
	for _, m := range sessions {
		r := a.call("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": m.sessionID})
		if r.status != 200 {
			t.Fatalf("exchange with MongoDB down: %s", r)
		}
		want[m.publicID] = "embed.session.exchange"
	}
	if err := s.Mongo.Restart(contextFor(t, 60*time.Second)); err != nil {
		t.Fatal(err)
	}
	exactlyOneEventEach(t, a, admin, want, 90*time.Second)
}

// metricValue is the value of one series (name with its labels, as exposed) of a
// process's /metrics, 0 when absent.
func metricValue(t *testing.T, s *stacktest.Stack, process, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.Process(process).InternalAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
