package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// auditEvent is an item of GET /api/v1/audit.
type auditEvent struct {
	ID           string `json:"id"`
	Time         string `json:"time"`
	Service      string `json:"service"`
	AccountID    int64  `json:"accountId"`
	DeploymentID *int64 `json:"deploymentId"`
	Actor        struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		UserID      int64  `json:"userId"`
		APIKeyID    string `json:"apiKeyId"`
		EmbedTenant string `json:"embedTenant"`
		ExternalID  string `json:"externalId"`
	} `json:"actor"`
	Action string `json:"action"`
	Target struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"target"`
	Outcome struct {
		Result string `json:"result"`
		Status int    `json:"status"`
		Code   string `json:"code"`
	} `json:"outcome"`
	RequestID     *string        `json:"requestId"`
	TraceID       *string        `json:"traceId"`
	ClientAddress *string        `json:"clientAddress"`
	Details       map[string]any `json:"details"`
}

type auditPage struct {
	Items    []auditEvent `json:"items"`
	PageInfo struct {
		HasNextPage bool    `json:"hasNextPage"`
		EndCursor   *string `json:"endCursor"`
	} `json:"pageInfo"`
}

const auditPath = "/api/v1/audit"

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// auditQuery reads one page of the trail with authz.
func (p *platform) auditQuery(t *testing.T, authz string, q url.Values) auditPage {
	t.Helper()
	var pg auditPage
	p.call(t, "GET", auditPath+"?"+q.Encode(), authz, nil).want(t, 200).decode(t, &pg)
	return pg
}

// awaitEvents polls acme's trail (as its admin) until n events match q, and returns them
// (events are readable about a second after the action; the wait allows for a loaded
// machine and asserts nothing about time).
func (p *platform) awaitEvents(t *testing.T, q url.Values, n int) []auditEvent {
	t.Helper()
	return p.awaitEventsOf(t, bearer(p.acme.Users["admin"]), q, n)
}

func (p *platform) awaitEventsOf(t *testing.T, authz string, q url.Values, n int) []auditEvent {
	t.Helper()
	var items []auditEvent
	eventually(t, 20*time.Second, fmt.Sprintf("%d audit events matching %v", n, q), func() bool {
		items = p.auditQuery(t, authz, q).Items
		return len(items) >= n
	})
	if len(items) != n {
		t.Fatalf("%d events match %v, want %d: %+v", len(items), q, n, items)
	}
	return items
}

// awaitEventOf polls the trail (q, as authz) until the event of the request answered
// with r appears, and returns it: for events that name no target of their own.
func (p *platform) awaitEventOf(t *testing.T, authz string, q url.Values, r response) auditEvent {
	t.Helper()
	rid := r.header.Get("X-Request-Id")
	var found *auditEvent
	eventually(t, 20*time.Second, "the audit event of request "+rid, func() bool {
		for _, ev := range p.auditQuery(t, authz, q).Items {
			if str(ev.RequestID) == rid {
				found = &ev
				return true
			}
		}
		return false
	})
	return *found
}

func (p *platform) awaitEvent(t *testing.T, action, targetID string) auditEvent {
	t.Helper()
	return p.awaitEvents(t, url.Values{"action": {action}, "targetId": {targetID}}, 1)[0]
}

// traced sends a request with a client's traceparent of a fresh trace id, which the event
// of the action must not carry (the gateway starts a trace of the platform's own), and
// returns the answer and the client's trace id.
func (p *platform) traced(t *testing.T, method, path, authz string, body any) (response, string) {
	t.Helper()
	req, err := p.api.Request(method, path, authz, body)
	if err != nil {
		t.Fatal(err)
	}
	var tid, sid [16]byte
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:8])
	trace := hex.EncodeToString(tid[:])
	req.Header.Set("traceparent", "00-"+trace+"-"+hex.EncodeToString(sid[:8])+"-01")
	return p.send(t, req), trace
}

// wantRequestFields checks what every event of a request carries: the request id it was
// answered with, a trace of the platform's own (never the client's trace), the client's
// address, the deployment.
func wantRequestFields(t *testing.T, ev auditEvent, r response, trace string, dep int64) {
	t.Helper()
	if str(ev.RequestID) == "" || str(ev.RequestID) != r.header.Get("X-Request-Id") {
		t.Errorf("requestId %q, want the answered X-Request-Id %q", str(ev.RequestID), r.header.Get("X-Request-Id"))
	}
	if trace != "" && (len(str(ev.TraceID)) != 32 || str(ev.TraceID) == trace) {
		t.Errorf("traceId %q, want the platform's own trace, not the client's %s", str(ev.TraceID), trace)
	}
	if str(ev.ClientAddress) != "127.0.0.1" {
		t.Errorf("clientAddress %q, want 127.0.0.1", str(ev.ClientAddress))
	}
	if dep != 0 && (ev.DeploymentID == nil || *ev.DeploymentID != dep) {
		t.Errorf("deploymentId %v, want %d", ev.DeploymentID, dep)
	}
}

func wantOutcome(t *testing.T, ev auditEvent, result string, status int, code string) {
	t.Helper()
	if ev.Outcome.Result != result || ev.Outcome.Status != status || ev.Outcome.Code != code {
		t.Errorf("outcome %+v, want %s %d %q", ev.Outcome, result, status, code)
	}
}

func keyID(key string) string { return strings.TrimPrefix(key, "pk_")[:16] }

func id64(n int64) string { return fmt.Sprint(n) }

// sessionPublicID is the public id (GET /api/v1/embed/sessions) of the only session of
// externalID in acme's default tenant.
func (p *platform) sessionPublicID(t *testing.T, externalID string) string {
	t.Helper()
	var pg struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	p.call(t, "GET", "/api/v1/embed/sessions?externalId="+url.QueryEscape(externalID), apiKey(p.acme.APIKeys["admin"]), nil).want(t, 200).decode(t, &pg)
	if len(pg.Items) != 1 {
		t.Fatalf("%d sessions of %s, want 1", len(pg.Items), externalID)
	}
	return pg.Items[0].ID
}

var auditRules = []rule{
	{"folder-create-is-recorded-with-request-trace-and-client", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		r, trace := p.traced(t, "POST", p.ws(p.dep1, "/folders"), bearer(admin), map[string]any{"name": p.unique("audited")})
		var f item
		r.want(t, 200).decode(t, &f)
		ev := p.awaitEvent(t, "workspace.folder.create", id64(f.ID))
		wantRequestFields(t, ev, r, trace, p.dep1)
		wantOutcome(t, ev, "success", 200, "")
		if ev.Service != "workspace-svc" || ev.AccountID != p.acme.ID || ev.Actor.Type != "user" || ev.Actor.UserID != admin.ID ||
			ev.Target.Type != "folder" || ev.Details["name"] != f.Name {
			t.Fatalf("event %+v", ev)
		}
	}},
	{"refused-folder-create-is-recorded", func(t *testing.T, p *platform) {
		viewer := p.acme.Users["viewer"]
		r := p.call(t, "POST", p.ws(p.dep1, "/folders"), bearer(viewer), map[string]any{"name": p.unique("refused")}).want(t, 403)
		ev := p.awaitEventOf(t, bearer(p.acme.Users["admin"]), url.Values{"action": {"workspace.folder.create"}, "actor": {id64(viewer.ID)}}, r)
		wantOutcome(t, ev, "failure", 403, "forbidden")
		wantRequestFields(t, ev, r, "", p.dep1)
	}},
	{"bulk-move-records-one-event-listing-its-items-with-from-and-outcome", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		src, dst := p.createFolder(t, admin, p.unique("from"), 0), p.createFolder(t, admin, p.unique("to"), 0)
		a, b := p.createWorkbook(t, admin, "a", src.ID), p.createWorkbook(t, admin, "b", src.ID)
		res := p.bulkMove(t, admin, dst.ID, wb(a), wb(b), wb(a), ref{"REPORT", 999_999_999})
		if len(res.Moved) != 2 || len(res.Failed) != 1 {
			t.Fatalf("bulk move %+v", res)
		}
		ev := p.awaitEvent(t, "workspace.items.move", id64(dst.ID))
		wantOutcome(t, ev, "success", 200, "")
		want := []any{
			map[string]any{"type": "WORKBOOK", "id": float64(a.ID), "from": float64(src.ID), "status": float64(200)},
			map[string]any{"type": "WORKBOOK", "id": float64(b.ID), "from": float64(src.ID), "status": float64(200)},
			map[string]any{"type": "REPORT", "id": float64(999_999_999), "status": float64(404), "code": "not_found"},
		}
		if ev.Target.Type != "folder" || ev.Details["to"] != float64(dst.ID) || ev.Details["bulk"] != true ||
			ev.Details["moved"] != float64(2) || ev.Details["failed"] != float64(1) || !reflect.DeepEqual(ev.Details["items"], want) {
			t.Errorf("move event details %v, want items %v", ev.Details, want)
		}
	}},
	{"single-move-is-recorded", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		w := p.createWorkbook(t, admin, p.unique("single"), 0)
		r := p.move(t, admin, nil, wb(w)).want(t, 200)
		ev := p.awaitEventOf(t, bearer(admin), url.Values{"action": {"workspace.items.move"}}, r)
		items, _ := ev.Details["items"].([]any)
		if ev.Details["bulk"] != false || ev.Details["to"] != nil || len(items) != 1 ||
			items[0].(map[string]any)["id"] != float64(w.ID) || items[0].(map[string]any)["from"] != nil {
			t.Fatalf("details %v", ev.Details)
		}
	}},
	{"rename-delete-and-permission-change-are-recorded", func(t *testing.T, p *platform) {
		admin, viewer := p.acme.Users["admin"], p.acme.Users["viewer"]
		f := p.createFolder(t, admin, p.unique("perm"), 0)
		p.call(t, "PUT", p.ws(p.dep1, fmt.Sprintf("/folders/%d/permissions", f.ID)), bearer(admin),
			map[string]any{"grants": []any{map[string]any{"userId": viewer.ID, "level": "view"}}}).want(t, 200)
		ev := p.awaitEvent(t, "workspace.folder.permissions_change", id64(f.ID))
		if ev.Details["grants"] != float64(1) {
			t.Errorf("details %v", ev.Details)
		}
		w := p.createWorkbook(t, admin, p.unique("wb"), 0)
		p.call(t, "PATCH", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), map[string]any{"name": "renamed"}).want(t, 200)
		if ev := p.awaitEvent(t, "workspace.workbook.update", id64(w.ID)); ev.Details["name"] != "renamed" {
			t.Errorf("rename details %v", ev.Details)
		}
		p.call(t, "DELETE", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), nil).want(t, 204)
		wantOutcome(t, p.awaitEvent(t, "workspace.workbook.delete", id64(w.ID)), "success", 204, "")
		p.call(t, "DELETE", p.ws(p.dep1, fmt.Sprintf("/folders/%d", f.ID)), bearer(admin), nil).want(t, 204)
		wantOutcome(t, p.awaitEvent(t, "workspace.folder.delete", id64(f.ID)), "success", 204, "")
	}},
	{"folder-rename-and-move-are-recorded", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		a, b := p.createFolder(t, admin, p.unique("fa"), 0), p.createFolder(t, admin, p.unique("fb"), 0)
		p.call(t, "PATCH", p.ws(p.dep1, fmt.Sprintf("/folders/%d", a.ID)), bearer(admin), map[string]any{"name": "renamed folder"}).want(t, 200)
		if ev := p.awaitEvent(t, "workspace.folder.update", id64(a.ID)); ev.Details["name"] != "renamed folder" {
			t.Fatalf("folder rename event %+v", ev)
		}
		p.move(t, admin, b.ID, fo(a)).want(t, 200)
		ev := p.awaitEvent(t, "workspace.items.move", id64(b.ID))
		if items, _ := ev.Details["items"].([]any); len(items) != 1 || ev.Details["to"] != float64(b.ID) ||
			!reflect.DeepEqual(items[0], map[string]any{"type": "FOLDER", "id": float64(a.ID), "from": nil, "status": float64(200)}) {
			t.Fatalf("folder move event %+v", ev)
		}
	}},
	{"workbook-and-report-lifecycle-is-recorded", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		w := p.createWorkbook(t, admin, p.unique("wb-create"), 0)
		if ev := p.awaitEvent(t, "workspace.workbook.create", id64(w.ID)); ev.Target.Type != "workbook" || ev.Details["name"] != w.Name {
			t.Fatalf("workbook create event %+v", ev)
		}
		var r item
		p.call(t, "POST", p.ws(p.dep1, "/reports"), bearer(admin), map[string]any{"name": p.unique("report")}).want(t, 200).decode(t, &r)
		p.awaitEvent(t, "workspace.report.create", id64(r.ID))
		p.call(t, "PATCH", p.ws(p.dep1, fmt.Sprintf("/reports/%d", r.ID)), bearer(admin), map[string]any{"meta": map[string]any{"k": 1}}).want(t, 200)
		if ev := p.awaitEvent(t, "workspace.report.update", id64(r.ID)); fmt.Sprint(ev.Details["changed"]) != "[meta]" {
			t.Fatalf("report update event %+v", ev)
		}
		p.call(t, "DELETE", p.ws(p.dep1, fmt.Sprintf("/reports/%d", r.ID)), bearer(admin), nil).want(t, 204)
		p.awaitEvent(t, "workspace.report.delete", id64(r.ID))
	}},
	{"favorites-are-recorded", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		w := p.createWorkbook(t, admin, p.unique("fav"), 0)
		p.call(t, "PUT", p.ws(p.dep1, fmt.Sprintf("/workspace/favorites/workbook/%d", w.ID)), bearer(admin), nil).want(t, 204)
		wantOutcome(t, p.awaitEvent(t, "workspace.favorite.add", id64(w.ID)), "success", 204, "")
		p.call(t, "DELETE", p.ws(p.dep1, fmt.Sprintf("/workspace/favorites/workbook/%d", w.ID)), bearer(admin), nil).want(t, 204)
		p.awaitEvent(t, "workspace.favorite.remove", id64(w.ID))
	}},
	{"publish-and-unpublish-are-recorded", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		w := p.createWorkbook(t, admin, p.unique("dash"), 0)
		p.call(t, "PATCH", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", w.ID)), bearer(admin), map[string]any{"dashboardDraft": map[string]any{"title": "T"}}).want(t, 200)
		p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/publish", w.ID)), bearer(admin), map[string]any{"allowEmbed": false}).want(t, 200)
		if ev := p.awaitEvent(t, "workspace.workbook.publish", id64(w.ID)); ev.Details["versionNumber"] != float64(1) || ev.Details["allowEmbed"] != false {
			t.Errorf("publish details %v", ev.Details)
		}
		p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/unpublish", w.ID)), bearer(admin), nil).want(t, 200)
		p.awaitEvent(t, "workspace.workbook.unpublish", id64(w.ID))
	}},
	{"generate-session-exchange-and-failed-exchange-are-recorded", func(t *testing.T, p *platform) {
		body := p.external(nil)
		ext := body["externalId"].(string)
		r, trace := p.traced(t, "POST", generateSession, apiKey(p.acme.APIKeys["admin"]), body)
		var minted struct{ SessionID string }
		r.want(t, 200).decode(t, &minted)
		pub := p.sessionPublicID(t, ext)
		gen := p.awaitEvent(t, "embed.session.generate", pub)
		wantRequestFields(t, gen, r, trace, p.dep1)
		wantOutcome(t, gen, "success", 200, "")
		if gen.Service != "embed-svc" || gen.Actor.Type != "api_key" || gen.Actor.APIKeyID != keyID(p.acme.APIKeys["admin"]) ||
			gen.Actor.UserID != p.acme.Users["admin"].ID || gen.Details["externalId"] != ext || gen.Details["externalUserCreated"] != true {
			t.Fatalf("generate event %+v", gen)
		}
		p.exchange(t, minted.SessionID)
		// The same id again: refused, and recorded against the session it names.
		replay := p.call(t, "POST", exchangePath, "", map[string]any{"sessionId": minted.SessionID}).want(t, 401).wantCode(t, "session_id_invalid")
		evs := p.awaitEvents(t, url.Values{"action": {"embed.session.exchange"}, "targetId": {pub}}, 2)
		failed, ok := evs[0], evs[1]
		wantOutcome(t, ok, "success", 200, "")
		wantOutcome(t, failed, "failure", 401, "session_id_invalid")
		wantRequestFields(t, failed, replay, "", p.dep1)
		for _, ev := range evs {
			if ev.Actor.Type != "embed_user" || ev.Actor.ExternalID != ext {
				t.Errorf("exchange actor %+v, want the session's external user", ev.Actor)
			}
		}
		// Never a secret: neither the session id nor the key's secret is in the trail.
		raw := p.call(t, "GET", auditPath+"?targetId="+pub, bearer(p.acme.Users["admin"]), nil).want(t, 200).body
		if strings.Contains(string(raw), minted.SessionID) || strings.Contains(string(raw), p.acme.APIKeys["admin"]) {
			t.Fatal("a session id or an API key is in the audit trail")
		}
	}},
	{"refused-generate-session-is-recorded", func(t *testing.T, p *platform) {
		// globex has no useCreatorMode: a creator-mode mint is refused, and recorded in globex's trail.
		body := map[string]any{"deploymentId": p.globex.Deployments[0].ID, "externalId": p.unique("refused"), "creatorMode": true, "embedTenantName": "tenant-x"}
		r := p.call(t, "POST", generateSession, apiKey(p.globex.APIKeys["admin"]), body).want(t, 403).wantCode(t, "creator_mode_disabled")
		ev := p.awaitEventOf(t, bearer(p.globex.Users["admin"]), url.Values{"action": {"embed.session.generate"}, "actor": {keyID(p.globex.APIKeys["admin"])}}, r)
		wantOutcome(t, ev, "failure", 403, "creator_mode_disabled")
		wantRequestFields(t, ev, r, "", p.globex.Deployments[0].ID)
		if ev.Target.ID != "" || ev.Details["externalId"] != body["externalId"] || ev.Details["creatorMode"] != true {
			t.Fatalf("refused mint event %+v", ev)
		}
	}},
	{"revokes-are-recorded", func(t *testing.T, p *platform) {
		body := p.external(nil)
		ext := body["externalId"].(string)
		id := p.mintID(t, body)
		pub := p.sessionPublicID(t, ext)
		p.call(t, "POST", revokePath, bearer(p.acme.Users["admin"]), map[string]any{"sessionId": id}).want(t, 204)
		wantOutcome(t, p.awaitEvent(t, "embed.session.revoke", pub), "success", 204, "")
		p.mintID(t, body)
		var rv struct{ Revoked int }
		p.call(t, "POST", "/api/v1/embed/sessions/revoke", apiKey(p.acme.APIKeys["admin"]), map[string]any{"externalId": ext, "tenant": p.tenant()}).want(t, 200).decode(t, &rv)
		ev := p.awaitEvent(t, "embed.sessions.revoke", ext)
		if ev.Target.Type != "external_user" || ev.Details["revoked"] != float64(rv.Revoked) || rv.Revoked != 1 {
			t.Fatalf("bulk revoke event %+v (answered %d)", ev, rv.Revoked)
		}
	}},
	{"data-token-and-ai-credentials-are-recorded", func(t *testing.T, p *platform) {
		body := p.external(nil)
		tok := p.exchange(t, p.mintID(t, body)).Token
		pub := p.sessionPublicID(t, body["externalId"].(string))
		p.call(t, "POST", p.ws(p.dep1, "/token"), "Bearer "+tok, nil).want(t, 200)
		ev := p.awaitEvent(t, "embed.data_token.issue", pub)
		if ev.Actor.Type != "embed_session" || ev.Actor.ExternalID != body["externalId"] || ev.Details["tokenId"] == nil {
			t.Fatalf("data token event %+v", ev)
		}
		p.call(t, "POST", "/api/v1/embed/session/ai-credentials", "Bearer "+tok, nil).want(t, 200)
		p.awaitEvent(t, "embed.ai_credentials.issue", pub)
	}},
	{"catalog-users-and-settings-changes-are-recorded", func(t *testing.T, p *platform) {
		admin := apiKey(p.acme.APIKeys["admin"])
		var g struct{ ID string }
		p.call(t, "POST", "/api/v1/groups", admin, map[string]any{"name": p.unique("audit-group")}).want(t, 200).decode(t, &g)
		p.awaitEvent(t, "embed.definition.create", g.ID)
		p.call(t, "DELETE", "/api/v1/groups/"+g.ID, admin, nil).want(t, 204)
		if ev := p.awaitEvent(t, "embed.definition.delete", g.ID); ev.Target.Type != "group" || ev.Details["scope"] != "account" {
			t.Fatalf("definition delete event %+v", ev)
		}
		body := p.external(nil)
		p.mintID(t, body)
		ext := body["externalId"].(string)
		p.call(t, "DELETE", "/api/v1/embed-tenants/"+p.tenant()+"/users/"+url.PathEscape(ext), admin, nil).want(t, 200)
		if ev := p.awaitEvent(t, "embed.external_user.delete", ext); ev.Details["sessionsRevoked"] != float64(1) {
			t.Fatalf("user delete event %+v", ev)
		}
		var before map[string]any
		p.call(t, "GET", "/api/v1/embed/settings", admin, nil).want(t, 200).decode(t, &before)
		p.call(t, "PUT", "/api/v1/embed/settings", admin, map[string]any{"locale": "de"}).want(t, 200)
		evs := p.awaitEvents(t, url.Values{"action": {"embed.settings.update"}, "targetType": {"account_settings"}}, 1)
		if evs[0].Details["locale"] != "de" {
			t.Fatalf("settings event %+v", evs[0])
		}
		restore := map[string]any{}
		for k, v := range before {
			if v != nil {
				restore[k] = v
			}
		}
		p.call(t, "PUT", "/api/v1/embed/settings", admin, restore).want(t, 200)
	}},
	{"dbt-sync-start-finish-and-cancel-are-recorded", func(t *testing.T, p *platform) {
		dev := p.acme.Users["developer"]
		name := "feature/" + p.unique("audit")
		r, trace := p.traced(t, "POST", p.ws(p.dep1, "/dbt-sync"), bearer(dev), map[string]any{"source": "manifest", "manifest": manifest(t), "branchName": name})
		var a accepted
		r.want(t, 202).decode(t, &a)
		start := p.awaitEvent(t, "dbtsync.sync.start", a.SyncJobID)
		wantRequestFields(t, start, r, trace, p.dep1)
		wantOutcome(t, start, "success", 202, "")
		if job := p.waitJob(t, a.SyncJobID); job["status"] != "succeeded" {
			t.Fatalf("job %v", job)
		}
		fin := p.awaitEvent(t, "dbtsync.sync.finish", a.SyncJobID)
		if fin.Service != "dbtsync-worker" || fin.Actor.Type != "system" || fin.Details["status"] != "succeeded" ||
			fin.Details["startedBy"] != float64(dev.ID) || str(fin.RequestID) != str(start.RequestID) || str(fin.TraceID) != str(start.TraceID) {
			t.Fatalf("finish event %+v (start %+v)", fin, start)
		}
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync/"+a.SyncJobID+"/cancel"), bearer(dev), nil).want(t, 409)
		wantOutcome(t, p.awaitEvent(t, "dbtsync.sync.cancel", a.SyncJobID), "failure", 409, "conflict")
		// A succeeded upload's manifest is gone: its retry is refused, and recorded so.
		p.call(t, "POST", p.ws(p.dep1, "/dbt-sync/"+a.SyncJobID+"/retry"), bearer(dev), nil).want(t, 409)
		retry := p.awaitEvents(t, url.Values{"action": {"dbtsync.sync.retry"}, "actor": {id64(dev.ID)}, "from": {start.Time}}, 1)[0]
		if retry.Details["retryOf"] != a.SyncJobID {
			t.Fatalf("retry event %+v", retry)
		}
		p.call(t, "POST", p.branch(name, "/open"), bearer(dev), nil).want(t, 200)
		p.awaitEvent(t, "dbtsync.branch.open", name)
		p.call(t, "PUT", p.branch(name, "/staging"), bearer(dev), map[string]any{"enabled": true}).want(t, 200)
		if ev := p.awaitEvent(t, "dbtsync.branch.staging_update", name); ev.Details["enabled"] != true {
			t.Fatalf("staging event %+v", ev)
		}
	}},
	{"dbt-git-integration-change-is-recorded-without-credentials", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		p.call(t, "PUT", p.ws(p.dep2, "/dbt-git-integration"), bearer(admin), map[string]any{"repoUrl": "https://git.example.com/acme/audit.git",
			"branch": "main", "projectPath": ".", "credentials": map[string]any{"token": "audit-secret-token"}}).want(t, 200)
		var evs []auditEvent
		eventually(t, 20*time.Second, "the integration's event", func() bool {
			evs = p.auditQuery(t, bearer(admin), url.Values{"action": {"dbtsync.integration.update"}, "deploymentId": {id64(p.dep2)}}).Items
			return len(evs) > 0 && evs[0].Details["repoUrl"] == "https://git.example.com/acme/audit.git"
		})
		if evs[0].Details["hasCredentials"] != true || evs[0].Details["repoUrl"] != "https://git.example.com/acme/audit.git" {
			t.Fatalf("integration event %+v", evs[0])
		}
		raw := p.call(t, "GET", auditPath+"?deploymentId="+id64(p.dep2), bearer(admin), nil).want(t, 200).body
		if strings.Contains(string(raw), "audit-secret-token") {
			t.Fatal("a git credential is in the audit trail")
		}
	}},
	{"api-key-create-and-revoke-with-platformctl-are-recorded", func(t *testing.T, p *platform) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		env := []string{"PLATFORMCTL_OPERATOR=e2e-operator"}
		out, errOut, err := p.s.Platformctl(ctx, env, "keys", "create", "--user", id64(p.acme.Users["developer"].ID), "--kind", "personal")
		if err != nil {
			t.Fatalf("keys create: %v\n%s", err, errOut)
		}
		var k struct{ ID, Key string }
		if err := json.Unmarshal(out, &k); err != nil || k.ID == "" {
			t.Fatalf("keys create output %s: %v", out, err)
		}
		ev := p.awaitEvent(t, "platform.api_key.create", k.ID)
		if ev.Service != "platformctl" || ev.Actor.Type != "operator" || ev.Actor.ID != "e2e-operator" || ev.Details["kind"] != "personal" {
			t.Fatalf("key create event %+v", ev)
		}
		if _, errOut, err := p.s.Platformctl(ctx, env, "keys", "revoke", "--id", k.ID); err != nil {
			t.Fatalf("keys revoke: %v\n%s", err, errOut)
		}
		p.awaitEvent(t, "platform.api_key.revoke", k.ID)
		if raw, _ := json.Marshal(p.auditQuery(t, bearer(p.acme.Users["admin"]), url.Values{"targetId": {k.ID}})); strings.Contains(string(raw), k.Key) {
			t.Fatal("the API key's secret is in the audit trail")
		}
	}},
	{"api-key-create-rotate-and-revoke-over-the-api-are-recorded", func(t *testing.T, p *platform) {
		admin := bearer(p.acme.Users["admin"])
		r, trace := p.traced(t, "POST", "/api/v1/api-keys", admin, map[string]any{"name": "e2e-audited", "kind": "account", "scope": []int64{p.dep1}})
		var k struct{ ID, Token string }
		r.want(t, 201).decode(t, &k)
		ev := p.awaitEvent(t, "platform.api_key.create", k.ID)
		if ev.Service != "gateway" || ev.Actor.Type != "user" || ev.Actor.UserID != p.acme.Users["admin"].ID || ev.Details["name"] != "e2e-audited" {
			t.Fatalf("key create event %+v", ev)
		}
		wantOutcome(t, ev, "success", 201, "")
		wantRequestFields(t, ev, r, trace, 0)
		// The key works at once, through the gateway, on a route of its scope.
		p.call(t, "GET", "/api/v1/groups", apiKey(k.Token), nil).want(t, 200)
		var rot struct{ Token string }
		p.call(t, "POST", "/api/v1/api-keys/"+k.ID+"/rotate", admin, nil).want(t, 200).decode(t, &rot)
		wantOutcome(t, p.awaitEvent(t, "platform.api_key.rotate", k.ID), "success", 200, "")
		p.call(t, "GET", "/api/v1/groups", apiKey(rot.Token), nil).want(t, 200)
		p.call(t, "DELETE", "/api/v1/api-keys/"+k.ID, admin, nil).want(t, 200)
		wantOutcome(t, p.awaitEvent(t, "platform.api_key.revoke", k.ID), "success", 200, "")
		eventually(t, 5*time.Second, "the revoked key refused", func() bool {
			return p.call(t, "GET", "/api/v1/groups", apiKey(rot.Token), nil).status == 401
		})
		// A refused create is recorded too, and no secret is ever in the trail.
		bad := p.call(t, "POST", "/api/v1/api-keys", admin, map[string]any{"name": "e2e-refused", "kind": "root"}).want(t, 400)
		ev = p.awaitEventOf(t, admin, url.Values{"action": {"platform.api_key.create"}}, bad)
		wantOutcome(t, ev, "failure", 400, "invalid_request")
		raw, _ := json.Marshal(p.auditQuery(t, admin, url.Values{"targetId": {k.ID}}))
		for _, secret := range []string{k.Token, rot.Token} {
			if strings.Contains(string(raw), secret[20:]) {
				t.Fatal("an API key's secret is in the audit trail")
			}
		}
	}},
	{"every-event-is-one-log-line", func(t *testing.T, p *platform) {
		f := p.createFolder(t, p.acme.Users["admin"], p.unique("logged"), 0)
		ev := p.awaitEvent(t, "workspace.folder.create", id64(f.ID))
		eventually(t, 10*time.Second, "the event's log line", func() bool { return strings.Count(p.s.Logs(), `"id":"`+ev.ID+`"`) == 1 })
	}},
	{"only-admins-read-the-trail", func(t *testing.T, p *platform) {
		p.call(t, "GET", auditPath, bearer(p.acme.Users["developer"]), nil).want(t, 403).wantCode(t, "forbidden")
		p.call(t, "GET", auditPath, bearer(p.acme.Users["viewer"]), nil).want(t, 403)
		p.call(t, "GET", auditPath, "", nil).want(t, 401)
		p.call(t, "GET", auditPath, apiKey(p.acme.APIKeys["personal"]), nil).want(t, 200)
	}},
	{"newest-first-and-cursor-pages", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		parent := p.createFolder(t, admin, p.unique("pages"), 0)
		for i := 0; i < 3; i++ {
			p.createFolder(t, admin, fmt.Sprintf("child-%d", i), parent.ID)
		}
		p.awaitEvents(t, url.Values{"action": {"workspace.folder.create"}, "actor": {id64(admin.ID)}, "targetId": {id64(parent.ID)}}, 1)
		q := url.Values{"action": {"workspace.folder.create"}, "first": {"2"}}
		var seen []string
		for i := 0; i < 2; i++ {
			pg := p.auditQuery(t, bearer(admin), q)
			if len(pg.Items) != 2 || !pg.PageInfo.HasNextPage || pg.PageInfo.EndCursor == nil {
				t.Fatalf("page %d: %+v", i, pg)
			}
			for _, ev := range pg.Items {
				seen = append(seen, ev.ID)
			}
			q.Set("after", *pg.PageInfo.EndCursor)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i-1] <= seen[i] {
				t.Fatalf("not newest first across pages: %v", seen)
			}
		}
	}},
	{"filters-narrow-the-trail", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		f := p.createFolder(t, admin, p.unique("filters"), 0)
		ev := p.awaitEvent(t, "workspace.folder.create", id64(f.ID))
		at, _ := time.Parse(time.RFC3339Nano, ev.Time)
		for _, c := range []struct {
			q    url.Values
			want bool
		}{
			{url.Values{"action": {"workspace.folder.*"}, "targetId": {id64(f.ID)}}, true},
			{url.Values{"action": {"workspace.workbook.*"}, "targetId": {id64(f.ID)}}, false},
			{url.Values{"actor": {id64(admin.ID)}, "targetType": {"folder"}, "targetId": {id64(f.ID)}}, true},
			{url.Values{"actor": {id64(p.acme.Users["viewer"].ID)}, "targetId": {id64(f.ID)}}, false},
			{url.Values{"deploymentId": {id64(p.dep1)}, "targetId": {id64(f.ID)}}, true},
			{url.Values{"deploymentId": {id64(p.dep2)}, "targetId": {id64(f.ID)}}, false},
			{url.Values{"from": {at.Format(time.RFC3339Nano)}, "to": {at.Add(time.Millisecond).Format(time.RFC3339Nano)}, "targetId": {id64(f.ID)}}, true},
			{url.Values{"to": {at.Format(time.RFC3339Nano)}, "targetId": {id64(f.ID)}}, false},
		} {
			got := p.auditQuery(t, bearer(admin), c.q).Items
			if found := len(got) == 1 && got[0].ID == ev.ID; found != c.want || len(got) > 1 {
				t.Errorf("%v: %d events, want the folder's event: %v", c.q, len(got), c.want)
			}
		}
	}},
	{"bad-query-400", func(t *testing.T, p *platform) {
		admin := bearer(p.acme.Users["admin"])
		for _, q := range []string{"from=yesterday", "to=2026-13-01T00:00:00Z", "from=2026-11-25T10:00:00Z&to=2026-11-25T09:00:00Z",
			"action=Workspace.Folder", "action=" + strings.Repeat("a", 65), "deploymentId=0", "deploymentId=x", "targetType=FOLDER",
			"first=0", "first=201", "after=not-a-cursor", "actor=" + strings.Repeat("x", 129)} {
			p.call(t, "GET", auditPath+"?"+q, admin, nil).want(t, 400).wantCode(t, "invalid_request")
		}
	}},
	{"scoped-key-reads-only-its-deployments", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		p.call(t, "PUT", p.ws(p.dep2, "/dbt-git-integration"), bearer(admin), map[string]any{"repoUrl": "https://git.example.com/acme/scoped.git",
			"branch": "main", "projectPath": "."}).want(t, 200)
		eventually(t, 20*time.Second, "an event of deployment 2", func() bool {
			return len(p.auditQuery(t, bearer(admin), url.Values{"deploymentId": {id64(p.dep2)}}).Items) > 0
		})
		scoped := apiKey(p.acme.APIKeys["adminScoped"]) // scoped to acme's first deployment
		for _, ev := range p.auditQuery(t, scoped, url.Values{"first": {"200"}}).Items {
			if ev.DeploymentID == nil || *ev.DeploymentID != p.dep1 {
				t.Fatalf("a key scoped to deployment %d read an event of %v: %+v", p.dep1, ev.DeploymentID, ev)
			}
		}
		p.call(t, "GET", auditPath+"?deploymentId="+id64(p.dep2), scoped, nil).want(t, 403).wantCode(t, "key_out_of_scope")
	}},
	{"another-account-never-reads-the-trail", func(t *testing.T, p *platform) {
		f := p.createFolder(t, p.acme.Users["admin"], p.unique("private"), 0)
		p.awaitEvent(t, "workspace.folder.create", id64(f.ID))
		for _, q := range []string{"targetId=" + id64(f.ID), "deploymentId=" + id64(p.dep1), "actor=" + id64(p.acme.Users["admin"].ID)} {
			if items := p.auditQuery(t, bearer(p.globex.Users["admin"]), mustQuery(q)).Items; len(items) != 0 {
				t.Fatalf("globex's admin read %d of acme's events with %s", len(items), q)
			}
		}
	}},
}

// tenant is acme's default embed tenant, where a mint without embedTenantName goes.
func (p *platform) tenant() string {
	if p.acme.DefaultEmbedTenant != "" {
		return p.acme.DefaultEmbedTenant
	}
	return "default"
}

func mustQuery(s string) url.Values {
	v, _ := url.ParseQuery(s)
	return v
}
