package audit_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
)

func TestIDsSortAsTheirTimes(t *testing.T) {
	base := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	prev := audit.IDAt(base)
	for i := 1; i <= 100; i++ {
		id := audit.NewID(base.Add(time.Duration(i) * time.Millisecond))
		if !audit.ValidID(id) {
			t.Fatalf("NewID gave %q, not a valid id", id)
		}
		if id <= prev {
			t.Fatalf("id %q at +%dms does not sort after %q", id, i, prev)
		}
		prev = id
	}
	at := base.Add(time.Second)
	if lo, id := audit.IDAt(at), audit.NewID(at); id < lo || audit.NewID(at.Add(-time.Millisecond)) >= lo {
		t.Fatalf("IDAt(%v) = %q is not the lower bound of that millisecond's ids (%q)", at, lo, id)
	}
	for _, bad := range []string{"", "x", strings.Repeat("Z", 26), strings.ToLower(audit.NewID(base)), audit.NewID(base) + "0"} {
		if audit.ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

func TestActorOfEachCredential(t *testing.T) {
	user := &identity.User{ID: 42, Role: identity.RoleAdmin}
	cases := []struct {
		name string
		p    *identity.Principal
		want audit.Actor
	}{
		{"nil", nil, audit.Actor{Type: audit.ActorAnonymous}},
		{"public route", &identity.Principal{Credential: identity.CredentialNone}, audit.Actor{Type: audit.ActorAnonymous}},
		{"bearer", &identity.Principal{Credential: identity.CredentialBearer, User: user}, audit.Actor{Type: audit.ActorUser, ID: "42", UserID: 42}},
		{"api key", &identity.Principal{Credential: identity.CredentialAPIKey, User: user, KeyID: "0123456789abcdef"},
			audit.Actor{Type: audit.ActorAPIKey, ID: "0123456789abcdef", APIKeyID: "0123456789abcdef", UserID: 42}},
		{"external embed session", &identity.Principal{Credential: identity.CredentialEmbed, Embed: &identity.Embed{SessionID: "sid1", Subject: "ext-7", Tenant: "tenant-a"}},
			audit.Actor{Type: audit.ActorEmbedSession, ID: "sid1", EmbedTenant: "tenant-a", ExternalID: "ext-7"}},
		{"internal embed session", &identity.Principal{Credential: identity.CredentialEmbed, User: user, Embed: &identity.Embed{SessionID: "sid2", Subject: "acme-admin", Internal: true}},
			audit.Actor{Type: audit.ActorEmbedSession, ID: "sid2", UserID: 42}},
	}
	for _, c := range cases {
		if got := audit.ActorOf(c.p); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestNewTakesAccountDeploymentAndClientAddress(t *testing.T) {
	p := &identity.Principal{Credential: identity.CredentialBearer, Account: identity.Account{ID: 7}, User: &identity.User{ID: 3},
		Deployment: &identity.Deployment{ID: 11}, ClientAddr: "203.0.113.9"}
	ev := audit.New(p, "workspace.folder.create", audit.Target{Type: "folder", ID: "5"})
	if ev.AccountID != 7 || ev.DeploymentID != 11 || ev.ClientAddr != "203.0.113.9" || ev.Actor.UserID != 3 || ev.Target.ID != "5" {
		t.Fatalf("got %+v", ev)
	}
}

func TestBoundCutsClientSuppliedValues(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes
	ev := audit.Event{Target: audit.Target{Type: "folder", ID: long}, Actor: audit.Actor{ExternalID: long},
		Details: map[string]any{"name": long, "names": []string{long}, "n": 3}}
	audit.Bound(&ev)
	for name, s := range map[string]string{"target id": ev.Target.ID, "external id": ev.Actor.ExternalID,
		"detail": ev.Details["name"].(string), "detail list": ev.Details["names"].([]string)[0]} {
		if len(s) > audit.MaxStringBytes || !strings.HasPrefix(long, s) || len(s) < audit.MaxStringBytes-1 {
			t.Errorf("%s: %d bytes, want a prefix of at most %d on a rune boundary", name, len(s), audit.MaxStringBytes)
		}
	}
	if ev.Details["n"] != 3 {
		t.Errorf("a number detail changed: %v", ev.Details["n"])
	}
	big := map[string]any{}
	for i := 0; i < 20; i++ {
		big[strings.Repeat(string(rune('a'+i)), 10)] = strings.Repeat("x", 250)
	}
	ev = audit.Event{Details: big}
	audit.Bound(&ev)
	if len(ev.Details) != 1 || ev.Details["truncated"] != true {
		t.Errorf("details over %d bytes: got %v, want only truncated", audit.MaxDetailsBytes, ev.Details)
	}
	many := map[string]any{}
	for i := 0; i <= audit.MaxDetailKeys; i++ {
		many[string(rune('A'+i))] = i
	}
	ev = audit.Event{Details: many}
	audit.Bound(&ev)
	if len(ev.Details) != 1 {
		t.Errorf("%d detail keys: got %v, want only truncated", len(many), ev.Details)
	}
}

// An event records the platform's request id as requestId and the client's own id, kept
// by the gateway, apart as clientRequestId: a client cannot make its events carry the id
// of someone else's request.
func TestEventRecordsThePlatformsRequestIDAndTheClientsApart(t *testing.T) {
	m := &audit.Memory{Service: "workspace-svc"}
	ctx := logging.WithRequest(context.Background(), &logging.RequestInfo{ID: "gw-7", ClientID: "incident-4711"})
	m.Record(ctx, audit.Event{AccountID: 1, Action: "workspace.folder.create", Target: audit.Target{Type: "folder"}})
	got := m.Events()[0]
	if got.RequestID != "gw-7" || got.ClientRequestID != "incident-4711" {
		t.Fatalf("requestId %q clientRequestId %q, want gw-7 and incident-4711", got.RequestID, got.ClientRequestID)
	}
	raw, _ := json.Marshal(got)
	if !strings.Contains(string(raw), `"requestId":"gw-7"`) || !strings.Contains(string(raw), `"clientRequestId":"incident-4711"`) {
		t.Fatalf("event JSON %s", raw)
	}
}

// An event records what the caller was answered: the success status, or the status and
// code the error encoder gives the error (a named rule's code, a kind's default code).
func TestRecordTakesTheAnswersOutcome(t *testing.T) {
	m := &audit.Memory{Service: "workspace-svc"}
	p := &identity.Principal{Account: identity.Account{ID: 7}}
	tg := audit.Target{Type: "folder", ID: "3"}
	audit.Record(context.Background(), m, p, "workspace.folder.delete", tg, nil, 204, map[string]any{"name": "a"})
	audit.Record(context.Background(), m, p, "workspace.folder.delete", tg, errs.New(errs.Conflict, "not empty").WithCode(errs.CodeFolderNotEmpty), 204, nil)
	audit.Record(context.Background(), m, p, "workspace.folder.delete", tg, errs.New(errs.NotFound, "no folder 3"), 204, nil)
	want := []audit.Outcome{audit.Succeeded(204), audit.Failed(409, "folder_not_empty"), audit.Failed(404, "not_found")}
	evs := m.Events()
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, ev := range evs {
		if ev.Outcome != want[i] || ev.Action != "workspace.folder.delete" || ev.Target != tg || ev.AccountID != 7 {
			t.Errorf("event %d: %+v, want outcome %+v", i, ev, want[i])
		}
	}
	if evs[0].Details["name"] != "a" {
		t.Errorf("details: %v", evs[0].Details)
	}
}
