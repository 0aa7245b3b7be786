package app_test

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/audit"
)

// eaView is an embed access answer as a client reads it.
type eaView struct {
	AllEmbedUsers *string          `json:"allEmbedUsers"`
	Tenants       []map[string]any `json:"tenants"`
	Groups        []map[string]any `json:"groups"`
	Inherited     []struct {
		Source     string  `json:"source"`
		FolderID   *int64  `json:"folderId"`
		FolderName *string `json:"folderName"`
	} `json:"inherited"`
}

func eaTenants(access string, names ...string) []any {
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = map[string]any{"embedTenantName": n, "access": access}
	}
	return out
}

// eaPut sends a PUT of embed access to path (under the deployment) and requires a 200.
func (e *env) eaPut(t *testing.T, dep int64, path, bearer string, body map[string]any) apitest.Response {
	t.Helper()
	r := e.do(t, "PUT", depPath(dep, path), bearer, body)
	if r.Status != 200 {
		t.Fatalf("PUT %s: %d %s", path, r.Status, r.Body)
	}
	return r
}

// TestEmbedAccessOverTheStack: the embed access routes through the gateway over
// FerretDB: round trips, inheritance after a move, who may, the audit trail, the entry
// limit and the tenant's listing.
func TestEmbedAccessOverTheStack(t *testing.T) {
	e := newEnv(t, 1)
	dep, other := e.dep("acme", 0), e.dep("acme", 1)
	admin, dev, ai, viewer := e.bearer("acme", "admin"), e.bearer("acme", "developer"), e.bearer("acme", "aiBiUser"), e.bearer("acme", "viewer")
	globex := e.bearer("globex", "admin")

	finance := e.mkFolder(t, dep, admin, "Finance", 0)
	emea := e.mkFolder(t, dep, admin, "EMEA", finance)
	wb := e.mkItem(t, dep, admin, "workbooks", "Revenue", emea)
	wbPath := fmt.Sprintf("/workbooks/%d/embed-access", wb)

	t.Run("round-trip-and-a-get-body-sent-back-changes-nothing", func(t *testing.T) {
		e.eaPut(t, dep, fmt.Sprintf("/folders/%d/embed-access", finance), admin, map[string]any{"tenants": eaTenants("read", "acme-corp")})
		e.eaPut(t, dep, "/embed-access", admin, map[string]any{"allEmbedUsers": "none"})
		put := e.eaPut(t, dep, wbPath, admin, map[string]any{"tenants": eaTenants("none", "zeta-corp", "beta-corp"),
			"groups": []any{map[string]any{"scope": "account", "groupName": "Sales", "access": "read"}}})
		get := e.do(t, "GET", depPath(dep, wbPath), admin, nil)
		if get.Status != 200 || string(get.Body) != string(put.Body) {
			t.Fatalf("GET %d %s, the PUT answered %s", get.Status, get.Body, put.Body)
		}
		var v eaView
		get.Decode(t, &v)
		if v.AllEmbedUsers != nil || len(v.Tenants) != 2 || v.Tenants[0]["embedTenantName"] != "beta-corp" || len(v.Groups) != 1 ||
			len(v.Inherited) != 2 || v.Inherited[0].Source != "folder" || *v.Inherited[0].FolderID != finance || *v.Inherited[0].FolderName != "Finance" ||
			v.Inherited[1].Source != "root" || v.Inherited[1].FolderID != nil {
			t.Fatalf("view %s", get.Body)
		}
		if !strings.Contains(string(get.Body), `"folderId":null`) {
			t.Fatalf("the root's entry %s: want folderId null", get.Body)
		}
		e.audit.Reset()
		again := e.do(t, "PUT", depPath(dep, wbPath), admin, get.Body) // the bytes as answered
		if again.Status != 200 || string(again.Body) != string(get.Body) {
			t.Fatalf("the GET's body sent back: %d %s", again.Status, again.Body)
		}
		if evs := e.audit.Events(); len(evs) != 0 {
			t.Fatalf("a PUT that changed nothing recorded %+v", evs)
		}
	})

	t.Run("inherited-follows-a-folder-move", func(t *testing.T) {
		apac := e.mkFolder(t, dep, admin, "APAC", 0)
		e.eaPut(t, dep, fmt.Sprintf("/folders/%d/embed-access", apac), admin, map[string]any{"allEmbedUsers": "read"})
		if r := e.do(t, "POST", depPath(dep, "/workspace/move"), admin, map[string]any{"type": "FOLDER", "id": emea, "folderId": apac}); r.Status != 200 {
			t.Fatalf("move: %d %s", r.Status, r.Body)
		}
		var v eaView
		e.do(t, "GET", depPath(dep, wbPath), admin, nil).Decode(t, &v)
		if len(v.Inherited) != 2 || *v.Inherited[0].FolderID != apac || v.Inherited[1].Source != "root" {
			t.Fatalf("inherited after the move %+v, want APAC then the root", v.Inherited)
		}
		if r := e.do(t, "POST", depPath(dep, "/workspace/move"), admin, map[string]any{"type": "FOLDER", "id": emea, "folderId": finance}); r.Status != 200 {
			t.Fatalf("move back: %d %s", r.Status, r.Body)
		}
	})

	t.Run("who-may", func(t *testing.T) {
		team := e.mkFolder(t, dep, admin, "Team", 0)
		aiID, viewerID := e.user("acme", "aiBiUser").ID, e.user("acme", "viewer").ID
		if r := e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", team)), admin, map[string]any{"grants": []any{
			map[string]any{"userId": aiID, "level": "manage"}, map[string]any{"userId": viewerID, "level": "manage"}}}); r.Status != 200 {
			t.Fatalf("permissions: %d %s", r.Status, r.Body)
		}
		inTeam := e.mkItem(t, dep, admin, "workbooks", "Team board", team)
		teamPath := fmt.Sprintf("/workbooks/%d/embed-access", inTeam)
		body := map[string]any{"allEmbedUsers": "read"}
		for _, c := range []struct {
			name, method, path, who string
			status                  int
		}{
			{"workbook-get-200-admin", "GET", teamPath, admin, 200},
			{"workbook-put-200-manager-of-its-folder", "PUT", teamPath, ai, 200},
			{"folder-put-200-manager", "PUT", fmt.Sprintf("/folders/%d/embed-access", team), ai, 200},
			{"workbook-get-403-viewer-granted-manage", "GET", teamPath, viewer, 403},
			{"workbook-put-403-developer-without-grant", "PUT", teamPath, dev, 403},
			{"folder-get-403-developer-without-grant", "GET", fmt.Sprintf("/folders/%d/embed-access", finance), dev, 403},
			{"root-get-403-developer", "GET", "/embed-access", dev, 403},
			{"root-put-403-manager-of-a-folder", "PUT", "/embed-access", ai, 403},
			{"tenant-listing-403-developer", "GET", "/embed-tenants/acme-corp/workbooks", dev, 403},
		} {
			t.Run(c.name, func(t *testing.T) {
				var b any
				if c.method == "PUT" {
					b = body
				}
				r := e.do(t, c.method, depPath(dep, c.path), c.who, b)
				if r.Status != c.status {
					t.Fatalf("%d %s, want %d", r.Status, r.Body, c.status)
				}
				if c.status != 200 {
					r.Error(t)
				}
			})
		}
		t.Run("another-deployments-workbook-404-as-a-read", func(t *testing.T) {
			path := depPath(other, wbPath)
			got, read := e.do(t, "PUT", path, admin, body), e.do(t, "GET", depPath(other, fmt.Sprintf("/workbooks/%d", wb)), admin, nil)
			if got.Status != 404 || read.Status != 404 || string(got.Body) != string(read.Body) {
				t.Fatalf("PUT %d %s, the single read %d %s", got.Status, got.Body, read.Status, read.Body)
			}
		})
		t.Run("another-accounts-admin-404", func(t *testing.T) {
			if r := e.do(t, "GET", depPath(dep, wbPath), globex, nil); r.Status != 404 {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		})
		t.Run("api-key-refused", func(t *testing.T) {
			r := e.api.Call(t, "GET", depPath(dep, wbPath), apitest.APIKey(e.acme().APIKeys["admin"]), nil)
			if r.Status != 401 && r.Status != 403 {
				t.Fatalf("an API key: %d %s", r.Status, r.Body)
			}
		})
		t.Run("deleted-workbook-404-nothing-changed", func(t *testing.T) {
			gone := e.mkItem(t, dep, admin, "workbooks", "Gone", 0)
			if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workbooks/%d", gone)), admin, nil); r.Status != 204 {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			r := e.do(t, "PUT", depPath(dep, fmt.Sprintf("/workbooks/%d/embed-access", gone)), admin, body)
			if st, msg := errorBody(t, r); st != 404 || msg != fmt.Sprintf("workbook %d not found", gone) {
				t.Fatalf("%d %q", st, msg)
			}
		})
	})

	t.Run("put-400-embed-access-limit-names-200-nothing-changed", func(t *testing.T) {
		names := make([]string, 201)
		for i := range names {
			names[i] = fmt.Sprintf("tenant-%04d", i)
		}
		before := e.do(t, "GET", depPath(dep, wbPath), admin, nil)
		r := e.do(t, "PUT", depPath(dep, wbPath), admin, map[string]any{"tenants": eaTenants("read", names...)})
		eb := r.Error(t)
		if r.Status != 400 || eb.Code != "embed_access_limit" || !strings.Contains(eb.Message, "at most 200") {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if after := e.do(t, "GET", depPath(dep, wbPath), admin, nil); string(after.Body) != string(before.Body) {
			t.Fatalf("a refused PUT changed the grants: %s, was %s", after.Body, before.Body)
		}
		e.eaPut(t, dep, wbPath, admin, map[string]any{"tenants": eaTenants("read", names[:200]...)})
	})

	t.Run("put-400-bad-entries", func(t *testing.T) {
		for _, c := range []struct {
			name string
			body map[string]any
			msg  string
		}{
			{"bad-tenant-name", map[string]any{"tenants": eaTenants("read", "Acme")}, `tenants[0]: embedTenantName "Acme" is invalid`},
			{"bad-access", map[string]any{"allEmbedUsers": "write"}, `allEmbedUsers must be "read" or "none"`},
			{"duplicate-tenant", map[string]any{"tenants": eaTenants("read", "acme-corp", "acme-corp")}, "more than one entry"},
			{"unknown-field", map[string]any{"users": []any{}}, `unknown field "users"`},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.do(t, "PUT", depPath(dep, wbPath), admin, c.body)
				if st, msg := errorBody(t, r); st != 400 || !strings.Contains(msg, c.msg) {
					t.Fatalf("%d %q, want 400 saying %q", st, msg, c.msg)
				}
			})
		}
	})

	t.Run("audit-events", func(t *testing.T) {
		board := e.mkItem(t, dep, admin, "workbooks", "Audited", 0)
		path := fmt.Sprintf("/workbooks/%d/embed-access", board)
		e.audit.Reset()
		r := e.eaPut(t, dep, path, admin, map[string]any{"tenants": eaTenants("read", "acme-corp")})
		evs := e.audit.Events()
		e.audit.Reset()
		if len(evs) != 1 {
			t.Fatalf("%d events, want 1: %+v", len(evs), evs)
		}
		ev := evs[0]
		if ev.Action != "workspace.workbook.embed_access_change" || ev.Target != (audit.Target{Type: "workbook", ID: strconv.FormatInt(board, 10)}) ||
			ev.Outcome != audit.Succeeded(200) || ev.DeploymentID != dep || ev.RequestID != r.Header.Get("X-Request-Id") || ev.Details["entriesAfter"] != 1 {
			t.Fatalf("event %+v", ev)
		}
		e.eaPut(t, dep, path, admin, map[string]any{"tenants": eaTenants("read", "acme-corp")})
		if evs := e.audit.Events(); len(evs) != 0 {
			t.Fatalf("the same grants again recorded %+v", evs)
		}
		e.do(t, "PUT", depPath(dep, "/embed-access"), viewer, map[string]any{})
		evs = e.audit.Events()
		e.audit.Reset()
		if len(evs) != 1 || evs[0].Action != "workspace.deployment.embed_access_change" || evs[0].Outcome != audit.Failed(403, "forbidden") {
			t.Fatalf("the refused root PUT recorded %+v", evs)
		}
	})

	t.Run("tenant-listing", func(t *testing.T) {
		// A deployment of its own: the listing covers every workbook of it.
		d := other
		top := e.mkFolder(t, d, admin, "Top", 0)
		byTenant := e.mkItem(t, d, admin, "workbooks", "by tenant", 0)
		byGroup := e.mkItem(t, d, admin, "workbooks", "by group", 0)
		byAll := e.mkItem(t, d, admin, "workbooks", "by all", 0)
		byFolder := e.mkItem(t, d, admin, "workbooks", "by folder", top)
		e.mkItem(t, d, admin, "workbooks", "none", 0)
		e.eaPut(t, d, fmt.Sprintf("/workbooks/%d/embed-access", byTenant), admin, map[string]any{"tenants": eaTenants("read", "acme-corp")})
		e.eaPut(t, d, fmt.Sprintf("/workbooks/%d/embed-access", byGroup), admin, map[string]any{"groups": []any{
			map[string]any{"scope": "tenant", "embedTenantName": "acme-corp", "groupName": "ops", "access": "read"}}})
		e.eaPut(t, d, fmt.Sprintf("/workbooks/%d/embed-access", byAll), admin, map[string]any{"allEmbedUsers": "read"})
		e.eaPut(t, d, fmt.Sprintf("/folders/%d/embed-access", top), admin, map[string]any{"tenants": eaTenants("read", "acme-corp")})
		type entry struct {
			WorkbookID   int64          `json:"workbookId"`
			AccessSource string         `json:"accessSource"`
			Subject      map[string]any `json:"subject"`
			ViaFolderID  *int64         `json:"viaFolderId"`
		}
		list := func(t *testing.T, query string) ([]entry, int) {
			t.Helper()
			var all []entry
			after, pages := "", 0
			for {
				pages++
				q := "?first=1" + query
				if after != "" {
					q += "&after=" + url.QueryEscape(after)
				}
				r := e.do(t, "GET", depPath(d, "/embed-tenants/acme-corp/workbooks"+q), admin, nil)
				if r.Status != 200 {
					t.Fatalf("listing: %d %s", r.Status, r.Body)
				}
				var page struct {
					Items    []entry `json:"items"`
					PageInfo struct {
						HasNextPage bool    `json:"hasNextPage"`
						EndCursor   *string `json:"endCursor"`
					} `json:"pageInfo"`
				}
				r.Decode(t, &page)
				all = append(all, page.Items...)
				if !page.PageInfo.HasNextPage {
					return all, pages
				}
				after = *page.PageInfo.EndCursor
			}
		}
		got, pages := list(t, "")
		want := []struct {
			id     int64
			source string
		}{{byTenant, "tenant"}, {byGroup, "group"}, {byAll, "allEmbedUsers"}, {byFolder, "folder"}}
		if len(got) != len(want) || pages < len(want) {
			t.Fatalf("listed %+v over %d pages, want %v", got, pages, want)
		}
		for i, w := range want {
			if got[i].WorkbookID != w.id || got[i].AccessSource != w.source {
				t.Errorf("entry %d: %+v, want workbook %d by %s", i, got[i], w.id, w.source)
			}
		}
		if got[3].ViaFolderID == nil || *got[3].ViaFolderID != top || got[3].Subject["type"] != "tenant" {
			t.Errorf("the folder's entry %+v, want viaFolderId %d and the tenant's subject", got[3], top)
		}
		for _, w := range want {
			only, _ := list(t, "&accessSource="+w.source)
			if len(only) != 1 || only[0].WorkbookID != w.id {
				t.Errorf("accessSource=%s: %+v, want workbook %d only", w.source, only, w.id)
			}
		}
		r := e.do(t, "GET", depPath(d, "/embed-tenants/acme-corp/workbooks?accessSource=user"), admin, nil)
		if st, _ := errorBody(t, r); st != 400 {
			t.Fatalf("accessSource=user: %d", st)
		}
		r = e.do(t, "GET", depPath(d, "/embed-tenants/ACME/workbooks"), admin, nil)
		if st, _ := errorBody(t, r); st != 400 {
			t.Fatalf("tenant ACME: %d", st)
		}
	})
}
