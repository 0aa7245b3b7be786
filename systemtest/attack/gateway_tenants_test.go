package attack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// The gateway and the shared plumbing under one tenant's pressure: failed-authentication
// throttling, request ids in the audit trail, the NATS users, the audit trail's
// per-account budget.

// trailEvent is the part of a GET /api/v1/audit item these tests read.
type trailEvent struct {
	ID              string         `json:"id"`
	Time            string         `json:"time"`
	Action          string         `json:"action"`
	RequestID       *string        `json:"requestId"`
	ClientRequestID *string        `json:"clientRequestId"`
	Target          audit.Target   `json:"target"`
	Outcome         audit.Outcome  `json:"outcome"`
	Details         map[string]any `json:"details"`
}

// trail reads every event of the admin's account matching query (all pages).
func trail(t *testing.T, a *api, admin, query string) []trailEvent {
	t.Helper()
	var out []trailEvent
	after := ""
	for {
		q := "first=200&" + query
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		r := a.call("GET", "/api/v1/audit?"+q, admin, nil)
		if r.status != 200 {
			t.Fatalf("GET /api/v1/audit?%s: %s", q, r)
		}
		var pg struct {
			Items    []trailEvent `json:"items"`
			PageInfo struct {
				HasNextPage bool    `json:"hasNextPage"`
				EndCursor   *string `json:"endCursor"`
			} `json:"pageInfo"`
		}
		if err := json.Unmarshal([]byte(r.raw), &pg); err != nil {
			t.Fatal(err)
		}
		out = append(out, pg.Items...)
		if !pg.PageInfo.HasNextPage || pg.PageInfo.EndCursor == nil {
			return out
		}
		after = *pg.PageInfo.EndCursor
	}
}

// After 80 bad bearer tokens from one address, the admin's valid token from that address
// must not be 429 for a minute (an office NAT locked out by one client). The address is
// throttled only for what fails: the admin's bearer token, and an API key in use, are
// served; a bad token is still 429. From a throttled address an API key the gateway's
// caches do not hold is looked up at a bounded rate (once per key id and second); the
// poller evicts every key changed in its look-back window (the seed's, in the first
// seconds of a stack), so the key being served is waited for, not assumed.
func TestValidCredentialsAreServedFromAnAddressThrottledForBadTokens(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: []string{"AUTH_FAILURE_LIMIT=10/1m", "GATEWAY_TRUSTED_PROXIES=127.0.0.1"}})
	const throttled, office = "203.0.113.7", "203.0.113.8"
	acme := s.Seed.Accounts["acme"]
	workspace := fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID)
	key := apitest.APIKey(acme.APIKeys["admin"])
	if r := callFrom(t, s.Gateway, "GET", "/api/v1/groups", key, throttled, ""); r.Status != 200 {
		t.Fatalf("the admin's key before the flood: %d %s", r.Status, r.Body)
	}
	for i := 0; i < 11; i++ {
		callFrom(t, s.Gateway, "GET", workspace, "Bearer x", throttled, "")
	}
	if r := callFrom(t, s.Gateway, "GET", workspace, "Bearer x", throttled, ""); r.Status != 429 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("bad tokens past AUTH_FAILURE_LIMIT: %d %s, want 429 with Retry-After", r.Status, r.Body)
	}
	if r := callFrom(t, s.Gateway, "GET", workspace, apitest.Bearer(acme.Users["admin"].Bearer), throttled, ""); r.Status != 200 {
		t.Fatalf("the admin's valid bearer token from the throttled address: %d %s, want 200", r.Status, r.Body)
	}
	apitest.Eventually(t, 30*time.Second, "the admin's API key in use served from the throttled address", func() (bool, string) {
		if r := callFrom(t, s.Gateway, "GET", "/api/v1/groups", key, office, ""); r.Status != 200 {
			return false, fmt.Sprintf("from another address: %d %s", r.Status, r.Body)
		}
		r := callFrom(t, s.Gateway, "GET", "/api/v1/groups", key, throttled, "")
		return r.Status == 200, fmt.Sprintf("from the throttled address: %d %s", r.Status, r.Body)
	})
	if r := callFrom(t, s.Gateway, "GET", workspace, "Bearer x", throttled, ""); r.Status != 429 {
		t.Fatalf("a bad token from the throttled address: %d %s, want 429", r.Status, r.Body)
	}
	if r := callFrom(t, s.Gateway, "GET", workspace, "Bearer y", office, ""); r.Status != 401 {
		t.Fatalf("another bad token from another address: %d %s, want 401 (only the failing address and credential are throttled)", r.Status, r.Body)
	}
}

// A client-chosen X-Request-Id must not become the audit event's requestId, or an
// attacker could give its events the id of someone else's request. The gateway answers
// with its own id, which the event records; the client's id is kept apart.
func TestClientRequestIDNeverBecomesTheAuditRequestID(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	c := apitest.New(s.Gateway)
	req, err := c.Request("POST", fmt.Sprintf("/api/v1/deployments/%d/folders", acme.Deployments[0].ID),
		apitest.Bearer(acme.Users["viewer"].Bearer), map[string]any{"name": "x"})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Request-Id", "incident-4711")
	r := c.Send(t, req)
	rid := r.Header.Get("X-Request-Id")
	if rid == "" || rid == "incident-4711" {
		t.Fatalf("answered X-Request-Id %q: want the gateway's own", rid)
	}
	admin := apitest.Bearer(acme.Users["admin"].Bearer)
	var ev trailEvent
	apitest.Eventually(t, 30*time.Second, "the viewer's folder creation in the trail", func() (bool, string) {
		for _, e := range trail(t, a, admin, "action=workspace.folder.create") {
			if e.ClientRequestID != nil && *e.ClientRequestID == "incident-4711" {
				ev = e
				return true, ""
			}
		}
		return false, "no event with the client's id"
	})
	if ev.RequestID == nil || *ev.RequestID != rid {
		t.Fatalf("requestId %v, want the gateway's %q", ev.RequestID, rid)
	}
}

// The worker's NATS credentials (the process that runs untrusted repositories) must not
// forge audit events for any account nor answer identity lookups. Its user cannot publish
// another service's audit subject nor subscribe to the lookups, and what it may publish
// on its own subject is stored only when it is its own kind of action: a forged
// workspace.folder.delete never reaches globex's trail.
func TestWorkerNATSCredentialsCannotForgeAuditOrAnswerLookups(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	globex := s.Seed.Accounts["globex"]
	var mu sync.Mutex
	var violations []string
	nc, err := nats.Connect(s.NATS.UserURL("dbtsync-worker"), nats.CustomInboxPrefix(natsx.InboxPrefix("dbtsync-worker")), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			mu.Lock()
			violations = append(violations, err.Error())
			mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	forge := func(service, action string) []byte {
		now := time.Now()
		b, _ := json.Marshal(audit.Event{ID: audit.NewID(now), Time: now, Service: service, AccountID: globex.ID, Action: action,
			Actor: audit.Actor{Type: audit.ActorUser, ID: "1"}, Target: audit.Target{Type: "folder", ID: "1"}, Outcome: audit.Succeeded(204)})
		return b
	}
	_ = nc.Publish("audit.events.workspace-svc", forge("workspace-svc", "workspace.folder.delete"))
	_, _ = nc.Subscribe("identity.lookup.*", func(m *nats.Msg) { _ = m.Respond([]byte(`{"deployment":{"id":1,"accountId":2}}`)) })
	_ = nc.Flush()
	apitest.Eventually(t, 10*time.Second, "both refused", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		pub, sub := false, false
		for _, v := range violations {
			pub = pub || strings.Contains(v, `Publish to "audit.events.workspace-svc"`)
			sub = sub || strings.Contains(v, `Subscription to "identity.lookup.*"`)
		}
		return pub && sub, fmt.Sprintf("violations %v", violations)
	})
	// On its own subject, a workspace action is dropped by the ingester; a dbt sync
	// action published after it shows the ingester got that far.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := nc.RequestWithContext(ctx, "audit.events.dbtsync-worker", forge("dbtsync-worker", "workspace.folder.delete")); err != nil {
		t.Fatalf("the worker's own subject: %v", err)
	}
	if _, err := nc.RequestWithContext(ctx, "audit.events.dbtsync-worker", forge("dbtsync-worker", "dbtsync.sync.finish")); err != nil {
		t.Fatalf("the worker's own subject: %v", err)
	}
	a := newAPI(s)
	admin := apitest.Bearer(globex.Users["admin"].Bearer)
	apitest.Eventually(t, 30*time.Second, "the worker's own action stored", func() (bool, string) {
		return len(trail(t, a, admin, "action=dbtsync.sync.finish")) > 0, "not yet"
	})
	if got := trail(t, a, admin, "action=workspace.folder.delete"); len(got) != 0 {
		t.Fatalf("globex's trail shows %d forged folder deletions: %+v", len(got), got)
	}
}

// The lowest role must not write the audit trail without bound (each refused call is
// an event). Past AUDIT_ACCOUNT_MAX_EVENTS in a window, an account's events are
// merged into the window's one summary event, which counts them; nothing is lost from
// the count, and another account's events are stored one by one.
func TestOneAccountsAuditFloodIsMergedAndCounted(t *testing.T) {
	const budget, flood = 20, 60
	s := stacktest.Start(t, stacktest.Options{Env: []string{fmt.Sprintf("AUDIT_ACCOUNT_MAX_EVENTS=%d", budget), "AUDIT_ACCOUNT_WINDOW=1m"}})
	a := newAPI(s)
	acme, globex := s.Seed.Accounts["acme"], s.Seed.Accounts["globex"]
	path := fmt.Sprintf("/api/v1/deployments/%d/folders", acme.Deployments[0].ID)
	viewer := apitest.Bearer(acme.Users["viewer"].Bearer)
	for i := 0; i < flood; i++ {
		if r := a.call("POST", path, viewer, map[string]any{"name": fmt.Sprintf("f%d", i)}); r.status != 403 {
			t.Fatalf("a viewer's folder creation: %s, want 403", r)
		}
	}
	if r := a.call("POST", fmt.Sprintf("/api/v1/deployments/%d/folders", globex.Deployments[0].ID),
		apitest.Bearer(globex.Users["admin"].Bearer), map[string]any{"name": "g"}); r.status != 200 {
		t.Fatalf("globex's folder: %s", r)
	}
	admin := apitest.Bearer(acme.Users["admin"].Bearer)
	var single, merged int
	perWindow := map[string]int{}
	apitest.Eventually(t, 60*time.Second, "every refused creation counted", func() (bool, string) {
		single, merged = 0, 0
		clear(perWindow)
		for _, e := range trail(t, a, admin, "action=workspace.folder.create") {
			if e.Outcome.Code != "" {
				single++
				perWindow[e.Time[:16]]++ // the minute
			}
		}
		for _, e := range trail(t, a, admin, "action=audit.events.merge") {
			n, _ := e.Details["merged"].(float64)
			merged += int(n)
		}
		return single+merged == flood, fmt.Sprintf("%d stored one by one, %d merged", single, merged)
	})
	if merged == 0 {
		t.Fatalf("%d refused creations, all %d stored one by one: no budget applied", flood, single)
	}
	for minute, n := range perWindow {
		if n > budget {
			t.Errorf("window %s stored %d events one by one, budget %d", minute, n, budget)
		}
	}
	gadmin := apitest.Bearer(globex.Users["admin"].Bearer)
	apitest.Eventually(t, 30*time.Second, "globex's event stored one by one", func() (bool, string) {
		return len(trail(t, a, gadmin, "action=workspace.folder.create")) == 1, "not yet"
	})
}
