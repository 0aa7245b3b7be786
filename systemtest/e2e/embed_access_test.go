package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// TestEmbedAccess checks who sees which embedded dashboard, through the gateway of one
// stack that runs two replicas of every service (the gateway sends requests round robin,
// so four requests in a row reach each replica twice): the precedence of grants on a
// workbook, its folders and the root, inheritance at depth and across moves, revocation
// and removed grants and memberships seen on the next request by every replica, the
// session's narrowing, one 404 for everything a session may not open, internal users,
// the tenant listing, membership routes, the dry run, audit events and the data-API
// token. Subtests run one after another: root grants reach every workbook of a
// deployment, so the subtests that set them use the second deployment and clear them.
func TestEmbedAccess(t *testing.T) {
	p := startPlatformWith(t, stacktest.Options{Replicas: 2, Env: []string{"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0"}})
	for _, r := range embedAccessRules {
		t.Run(r.name, func(t *testing.T) { r.check(t, p) })
	}
}

// startPlatformWith is startPlatform with the stack's options.
func startPlatformWith(t *testing.T, o stacktest.Options) *platform {
	t.Helper()
	doc, router := loadContract(t)
	s := stacktest.Start(t, o)
	p := &platform{s: s, doc: doc, router: router,
		acme: s.Seed.Accounts["acme"], globex: s.Seed.Accounts["globex"], initech: s.Seed.Accounts["initech"]}
	p.dep1, p.dep2 = p.acme.Deployments[0].ID, p.acme.Deployments[1].ID
	p.startPrism(t)
	p.api = apitest.New(s.Gateway)
	p.api.Check = p.checkResponse
	return p
}

const embedDashboards = "/api/v1/embed/dashboards"

// grants is the body of an embed-access PUT: allEmbedUsers, tenants, groups.
type grants map[string]any

func tenantRead(tenant string) map[string]any {
	return map[string]any{"embedTenantName": tenant, "access": "read"}
}
func tenantNone(tenant string) map[string]any {
	return map[string]any{"embedTenantName": tenant, "access": "none"}
}
func accountGroup(name, access string) map[string]any {
	return map[string]any{"scope": "account", "groupName": name, "access": access}
}
func tenantGroup(tenant, name, access string) map[string]any {
	return map[string]any{"scope": "tenant", "embedTenantName": tenant, "groupName": name, "access": access}
}

// board is a published workbook: its item and its dashboard's public id.
type board struct {
	item
	dep      int64
	publicID string
}

// folderIn creates a folder in deployment dep as the admin.
func (p *platform) folderIn(t *testing.T, dep, parent int64, name string) item {
	t.Helper()
	body := map[string]any{"name": name}
	if parent != 0 {
		body["parentId"] = parent
	}
	var f item
	p.call(t, "POST", p.ws(dep, "/folders"), bearer(p.acme.Users["admin"]), body).want(t, 200).decode(t, &f)
	return f
}

// publishedIn creates a workbook with a dashboard draft in folder (0: the root) of dep as
// u and publishes it with allowEmbed.
func (p *platform) publishedIn(t *testing.T, u stacktest.User, dep, folder int64, allowEmbed bool) board {
	t.Helper()
	title := p.unique("board")
	body := map[string]any{"name": title, "dashboardDraft": map[string]any{"kind": "CLASSIC", "title": title, "widgets": []any{}}}
	if folder != 0 {
		body["folderId"] = folder
	}
	var w item
	p.call(t, "POST", p.ws(dep, "/workbooks"), bearer(u), body).want(t, 200).decode(t, &w)
	var pub struct {
		PublishedDashboard struct {
			PublicID   string `json:"publicId"`
			AllowEmbed bool   `json:"allowEmbed"`
		} `json:"publishedDashboard"`
	}
	p.call(t, "POST", p.ws(dep, fmt.Sprintf("/workbooks/%d/publish", w.ID)), bearer(u), map[string]any{"allowEmbed": allowEmbed}).want(t, 200).decode(t, &pub)
	if pub.PublishedDashboard.PublicID == "" || pub.PublishedDashboard.AllowEmbed != allowEmbed {
		t.Fatalf("publish answered %+v", pub)
	}
	return board{item: w, dep: dep, publicID: pub.PublishedDashboard.PublicID}
}

// access paths: a workbook's, a folder's, the root's.
func (p *platform) workbookAccess(dep, id int64) string {
	return p.ws(dep, fmt.Sprintf("/workbooks/%d/embed-access", id))
}
func (p *platform) folderAccess(dep, id int64) string {
	return p.ws(dep, fmt.Sprintf("/folders/%d/embed-access", id))
}
func (p *platform) rootAccess(dep int64) string { return p.ws(dep, "/embed-access") }

// grant replaces the grants at path as the admin.
func (p *platform) grant(t *testing.T, path string, g grants) response {
	t.Helper()
	if g == nil {
		g = grants{}
	}
	return p.call(t, "PUT", path, bearer(p.acme.Users["admin"]), g).want(t, 200)
}

// clearRootAfter clears dep's root grants when the test ends.
func (p *platform) clearRootAfter(t *testing.T, dep int64) {
	t.Cleanup(func() {
		r := p.api.Do("PUT", p.rootAccess(dep), bearer(p.acme.Users["admin"]), grants{})
		if r.Status != 200 {
			t.Errorf("clearing the root grants of %d: %d %s", dep, r.Status, r.Body)
		}
	})
}

// viewerToken mints an external viewer's session (acme's admin key) with body and
// exchanges it.
func (p *platform) viewerToken(t *testing.T, body map[string]any) string {
	t.Helper()
	return p.exchange(t, p.mintID(t, body)).Token
}

// viewerOf is the body of a mint for a new external user of tenant in dep with account
// groups.
func (p *platform) viewerOf(dep int64, tenant string, groups ...string) map[string]any {
	body := map[string]any{"deploymentId": dep, "externalId": p.unique("viewer"), "embedTenantName": tenant}
	if groups != nil {
		body["groups"] = groups
	}
	return body
}

// open asks for a dashboard with an embed token.
func (p *platform) open(t *testing.T, token, publicID string) response {
	t.Helper()
	return p.call(t, "GET", embedDashboards+"/"+publicID, "Bearer "+token, nil)
}

// dashboardSummary is an item of the viewer's listing.
type dashboardSummary struct {
	PublicID     string  `json:"publicId"`
	WorkbookID   int64   `json:"workbookId"`
	Title        *string `json:"title"`
	AccessSource string  `json:"accessSource"`
}

// listed is every dashboard the session lists, following the pages.
func (p *platform) listed(t *testing.T, token string) []dashboardSummary {
	t.Helper()
	var all []dashboardSummary
	after := ""
	for range 50 {
		var pg struct {
			Items    []dashboardSummary `json:"items"`
			PageInfo struct {
				HasNextPage bool    `json:"hasNextPage"`
				EndCursor   *string `json:"endCursor"`
			} `json:"pageInfo"`
		}
		q := "?first=200"
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		p.call(t, "GET", embedDashboards+q, "Bearer "+token, nil).want(t, 200).decode(t, &pg)
		all = append(all, pg.Items...)
		if !pg.PageInfo.HasNextPage || pg.PageInfo.EndCursor == nil {
			return all
		}
		after = *pg.PageInfo.EndCursor
	}
	t.Fatal("the listing did not end in 50 pages")
	return nil
}

func publicIDs(s []dashboardSummary) []string {
	out := []string{}
	for _, d := range s {
		out = append(out, d.PublicID)
	}
	sort.Strings(out)
	return out
}

func sourceOf(s []dashboardSummary, publicID string) string {
	for _, d := range s {
		if d.PublicID == publicID {
			return d.AccessSource
		}
	}
	return ""
}

// notFoundBody is the one answer for a dashboard the session may not open.
func notFoundBody(publicID string) string {
	return fmt.Sprintf(`{"status":404,"code":"not_found","message":"dashboard %s not found"}`, publicID)
}

// volatile headers differ between any two answers.
var volatileHeaders = []string{"X-Request-Id", "Date", "Traceresponse", "Traceparent"}

// comparableHeaders are r's headers but the volatile ones.
func comparableHeaders(r response) http.Header {
	h := r.header.Clone()
	for _, k := range volatileHeaders {
		h.Del(k)
	}
	return h
}

// wantHidden checks that r is the one 404 for publicID, and that its headers are those
// of ref (another such 404 for an id of the same length).
func wantHidden(t *testing.T, what string, r response, publicID string, ref response) {
	t.Helper()
	if r.status != 404 || strings.TrimSpace(string(r.body)) != notFoundBody(publicID) {
		t.Errorf("%s: %d %s, want 404 %s", what, r.status, r.body, notFoundBody(publicID))
	}
	if len(publicID) == 16 {
		if strings.TrimSpace(string(r.body)) != strings.Replace(strings.TrimSpace(string(ref.body)), refID, publicID, 1) {
			t.Errorf("%s: body %q differs from the unknown id's %q", what, r.body, ref.body)
		}
		if got, want := comparableHeaders(r), comparableHeaders(ref); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: headers %v differ from the unknown id's %v", what, got, want)
		}
	} else {
		got, want := comparableHeaders(r), comparableHeaders(ref)
		got.Del("Content-Length")
		want.Del("Content-Length")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: headers %v differ from the unknown id's %v", what, got, want)
		}
	}
}

// refID is a well-formed public id no dashboard has.
const refID = "AAAAAAAAAAAAAAAA"

// seenByEveryReplica sends four requests in a row (each replica gets two) and wants
// each answered status; it reports how long after since the change the last one came.
func seenByEveryReplica(t *testing.T, what string, since time.Time, status int, send func() response) {
	t.Helper()
	for n := range 4 {
		if r := send(); r.status != status {
			t.Errorf("%s: request %d after the change (%s later) answered %d %s, want %d",
				what, n+1, time.Since(since).Round(time.Millisecond), r.status, r.body, status)
		}
	}
	if d := time.Since(since); d > time.Second {
		t.Logf("%s: the four requests took %s (a loaded machine); each saw the change", what, d.Round(time.Millisecond))
	}
}

// groupID is the id of the account-wide group name (created when missing).
func (p *platform) accountGroupID(t *testing.T, name string) string {
	t.Helper()
	var g struct {
		ID string `json:"id"`
	}
	p.call(t, "POST", "/api/v1/groups", apiKey(p.acme.APIKeys["admin"]), map[string]any{"name": name}).want(t, 200).decode(t, &g)
	return g.ID
}

// precedenceCase is one row of the precedence table: grants on the workbook, its
// folder, the folder above and the root; the viewer's tenant (self: the case's tenant,
// other: another tenant) and account groups; whether the viewer opens the dashboard, and
// the accessSource of the listing.
type precedenceCase struct {
	name                  string
	wb, folder, above, rt func(c caseNames) grants
	otherTenant           bool
	groups                func(c caseNames) []string
	allowEmbed            *bool
	open                  bool
	source                string
}

// caseNames are the names a precedence case uses, fresh for each.
type caseNames struct{ tenant, other, g1, g2 string }

var no = false

var precedenceCases = []precedenceCase{
	{name: "no entry anywhere: no access"},
	{name: "allEmbedUsers read on the workbook", wb: func(caseNames) grants { return grants{"allEmbedUsers": "read"} }, open: true, source: "allEmbedUsers"},
	{name: "the tenant's read on the workbook", wb: func(c caseNames) grants { return grants{"tenants": []any{tenantRead(c.tenant)}} }, open: true, source: "tenant"},
	{name: "a group's read on the workbook", wb: func(c caseNames) grants { return grants{"groups": []any{accountGroup(c.g1, "read")}} },
		groups: func(c caseNames) []string { return []string{c.g1} }, open: true, source: "group"},
	{name: "the tenant's none outranks allEmbedUsers read", wb: func(c caseNames) grants {
		return grants{"allEmbedUsers": "read", "tenants": []any{tenantNone(c.tenant)}}
	}},
	{name: "a group's none outranks the tenant's read", wb: func(c caseNames) grants {
		return grants{"tenants": []any{tenantRead(c.tenant)}, "groups": []any{accountGroup(c.g1, "none")}}
	}, groups: func(c caseNames) []string { return []string{c.g1} }},
	{name: "a group's read outranks the tenant's none", wb: func(c caseNames) grants {
		return grants{"tenants": []any{tenantNone(c.tenant)}, "groups": []any{accountGroup(c.g1, "read")}}
	}, groups: func(c caseNames) []string { return []string{c.g1} }, open: true, source: "group"},
	{name: "between two of the viewer's groups read wins", wb: func(c caseNames) grants {
		return grants{"groups": []any{accountGroup(c.g1, "none"), accountGroup(c.g2, "read")}}
	}, groups: func(c caseNames) []string { return []string{c.g1, c.g2} }, open: true, source: "group"},
	{name: "a group the viewer is not in does not match", wb: func(c caseNames) grants {
		return grants{"groups": []any{accountGroup(c.g2, "read")}}
	}, groups: func(c caseNames) []string { return []string{c.g1} }},
	{name: "another tenant's read does not match", wb: func(c caseNames) grants { return grants{"tenants": []any{tenantRead(c.other)}} }},
	{name: "a tenant-scope group of another tenant does not match", wb: func(c caseNames) grants {
		return grants{"groups": []any{tenantGroup(c.other, c.g1, "read")}}
	}, groups: func(c caseNames) []string { return []string{c.g1} }},
	{name: "an account-scope group matches in any tenant", wb: func(c caseNames) grants {
		return grants{"groups": []any{accountGroup(c.g1, "read")}}
	}, otherTenant: true, groups: func(c caseNames) []string { return []string{c.g1} }, open: true, source: "group"},
	{name: "inherited from the folder", folder: func(c caseNames) grants { return grants{"tenants": []any{tenantRead(c.tenant)}} }, open: true, source: "folder"},
	{name: "inherited from the folder above", above: func(c caseNames) grants { return grants{"allEmbedUsers": "read"} }, open: true, source: "folder"},
	{name: "inherited from the root", rt: func(c caseNames) grants { return grants{"tenants": []any{tenantRead(c.tenant)}} }, open: true, source: "folder"},
	{name: "the workbook's none outranks the folder's read", wb: func(c caseNames) grants { return grants{"tenants": []any{tenantNone(c.tenant)}} },
		folder: func(c caseNames) grants { return grants{"tenants": []any{tenantRead(c.tenant)}} }},
	{name: "the nearest object decides even with a less specific entry", folder: func(caseNames) grants { return grants{"allEmbedUsers": "none"} },
		above: func(c caseNames) grants { return grants{"tenants": []any{tenantRead(c.tenant)}} }},
	{name: "the workbook's read outranks the root's none", wb: func(caseNames) grants { return grants{"allEmbedUsers": "read"} },
		rt: func(c caseNames) grants { return grants{"tenants": []any{tenantNone(c.tenant)}} }, open: true, source: "allEmbedUsers"},
	{name: "the root's none below nothing: no access", rt: func(caseNames) grants { return grants{"allEmbedUsers": "none"} }},
	{name: "an object without an entry for the viewer is passed", wb: func(c caseNames) grants { return grants{"tenants": []any{tenantNone(c.other)}} },
		folder: func(c caseNames) grants { return grants{"groups": []any{accountGroup(c.g2, "none")}} },
		rt:     func(caseNames) grants { return grants{"allEmbedUsers": "read"} }, groups: func(c caseNames) []string { return []string{c.g1} }, open: true, source: "folder"},
	{name: "allowEmbed false: a read grant opens nothing", wb: func(caseNames) grants { return grants{"allEmbedUsers": "read"} }, allowEmbed: &no},
}

var embedAccessRules = []rule{
	{"precedence-table", func(t *testing.T, p *platform) {
		// In the second deployment: the cases set root grants.
		dep := p.dep2
		p.clearRootAfter(t, dep)
		for _, c := range precedenceCases {
			t.Run(c.name, func(t *testing.T) {
				n := caseNames{tenant: p.unique("tenant"), other: p.unique("other"), g1: p.unique("grp"), g2: p.unique("grp")}
				p.accountGroupID(t, n.g1)
				p.accountGroupID(t, n.g2)
				above := p.folderIn(t, dep, 0, p.unique("above"))
				folder := p.folderIn(t, dep, above.ID, p.unique("folder"))
				b := p.publishedIn(t, p.acme.Users["admin"], dep, folder.ID, c.allowEmbed == nil || *c.allowEmbed)
				set := func(path string, f func(caseNames) grants) {
					if f != nil {
						p.grant(t, path, f(n))
					} else {
						p.grant(t, path, grants{})
					}
				}
				set(p.workbookAccess(dep, b.ID), c.wb)
				set(p.folderAccess(dep, folder.ID), c.folder)
				set(p.folderAccess(dep, above.ID), c.above)
				set(p.rootAccess(dep), c.rt)
				tenant := n.tenant
				if c.otherTenant {
					tenant = n.other
				}
				var groups []string
				if c.groups != nil {
					groups = c.groups(n)
				}
				tok := p.viewerToken(t, p.viewerOf(dep, tenant, groups...))
				r := p.open(t, tok, b.publicID)
				list := p.listed(t, tok)
				if !c.open {
					wantHidden(t, "open", r, b.publicID, p.open(t, tok, refID))
					if slices.Contains(publicIDs(list), b.publicID) {
						t.Errorf("listed %v, want without %s", publicIDs(list), b.publicID)
					}
					return
				}
				r.want(t, 200)
				var d map[string]any
				r.decode(t, &d)
				if d["publicId"] != b.publicID || d["workbookId"] != float64(b.ID) {
					t.Errorf("opened %v, want the dashboard of workbook %d", d, b.ID)
				}
				if got := sourceOf(list, b.publicID); got != c.source {
					t.Errorf("listed with accessSource %q, want %q (listing %+v)", got, c.source, list)
				}
			})
		}
	}},
	{"the-viewer-answer-hides-code-and-authors", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		admin := p.acme.Users["admin"]
		rep := p.call(t, "POST", p.ws(p.dep1, "/reports"), bearer(admin), map[string]any{"name": "r",
			"sqlQuery": "SELECT secret FROM t", "pythonCode": "print('secret')", "meta": map[string]any{"secret": true}})
		var repID int64
		if rep.status == 200 {
			var ri item
			rep.decode(t, &ri)
			repID = ri.ID
		}
		body := map[string]any{"name": p.unique("hidden"), "dashboardDraft": map[string]any{"kind": "CLASSIC", "title": "Hidden parts",
			"widgets": []any{map[string]any{"id": "w1", "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 1, "h": 1},
				"config": map[string]any{"reportId": repID}}}}}
		var w item
		p.call(t, "POST", p.ws(p.dep1, "/workbooks"), bearer(admin), body).want(t, 200).decode(t, &w)
		pub := p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/publish", w.ID)), bearer(admin), nil).want(t, 200).obj(t)
		publicID := pub["publishedDashboard"].(map[string]any)["publicId"].(string)
		p.grant(t, p.workbookAccess(p.dep1, w.ID), grants{"tenants": []any{tenantRead(tenant)}})
		d := p.open(t, p.viewerToken(t, p.viewerOf(p.dep1, tenant)), publicID).want(t, 200).obj(t)
		for _, k := range []string{"createdBy", "updatedBy"} {
			if v, ok := d[k]; ok && v != nil {
				t.Errorf("%s = %v, want null or absent for a viewer", k, v)
			}
		}
		snaps, _ := d["reportSnapshots"].([]any)
		if repID != 0 && len(snaps) == 0 {
			t.Errorf("no report snapshot in %v", d)
		}
		for _, s := range snaps {
			m := s.(map[string]any)
			for _, k := range []string{"sqlQuery", "pythonCode", "meta"} {
				if v, ok := m[k]; ok && v != nil {
					t.Errorf("snapshot %s = %v, want null or absent for a viewer", k, v)
				}
			}
		}
		if strings.Contains(fmt.Sprint(d), "secret") {
			t.Errorf("the viewer's answer carries a report's code: %v", d)
		}
	}},
	{"inheritance-at-depth-8", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		chain := []item{p.folderIn(t, p.dep1, 0, p.unique("level-1"))}
		for level := 2; level <= 8; level++ {
			chain = append(chain, p.folderIn(t, p.dep1, chain[len(chain)-1].ID, fmt.Sprintf("level-%d", level)))
		}
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, chain[7].ID, true)
		tok := p.viewerToken(t, p.viewerOf(p.dep1, tenant))
		p.open(t, tok, b.publicID).want(t, 404)
		for i, f := range chain {
			p.grant(t, p.folderAccess(p.dep1, f.ID), grants{"tenants": []any{tenantRead(tenant)}})
			at := time.Now()
			seenByEveryReplica(t, fmt.Sprintf("a grant on level %d", i+1), at, 200, func() response { return p.open(t, tok, b.publicID) })
			p.grant(t, p.folderAccess(p.dep1, f.ID), grants{})
			at = time.Now()
			seenByEveryReplica(t, fmt.Sprintf("the grant on level %d removed", i+1), at, 404, func() response { return p.open(t, tok, b.publicID) })
		}
		// The GET of the workbook's grants lists what it inherits, nearest first.
		p.grant(t, p.folderAccess(p.dep1, chain[0].ID), grants{"allEmbedUsers": "read"})
		p.grant(t, p.folderAccess(p.dep1, chain[5].ID), grants{"tenants": []any{tenantNone(tenant)}})
		var view struct {
			Inherited []struct {
				Source   string `json:"source"`
				FolderID *int64 `json:"folderId"`
			} `json:"inherited"`
		}
		p.call(t, "GET", p.workbookAccess(p.dep1, b.ID), bearer(p.acme.Users["admin"]), nil).want(t, 200).decode(t, &view)
		var got []int64
		for _, in := range view.Inherited {
			if in.Source == "folder" && in.FolderID != nil {
				got = append(got, *in.FolderID)
			}
		}
		if !reflect.DeepEqual(got, []int64{chain[5].ID, chain[0].ID}) {
			t.Errorf("inherited %+v, want level 6 then level 1", view.Inherited)
		}
		p.open(t, tok, b.publicID).want(t, 404) // level 6's none is nearer than level 1's read
		other := p.viewerToken(t, p.viewerOf(p.dep1, p.unique("tenant")))
		p.open(t, other, b.publicID).want(t, 200)
	}},
	{"moves-in-and-out-of-reach", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		admin := p.acme.Users["admin"]
		reached := p.folderIn(t, p.dep1, 0, p.unique("reached"))
		p.grant(t, p.folderAccess(p.dep1, reached.ID), grants{"tenants": []any{tenantRead(tenant)}})
		outside := p.folderIn(t, p.dep1, 0, p.unique("outside"))
		deep := p.folderIn(t, p.dep1, outside.ID, "deep")
		b := p.publishedIn(t, admin, p.dep1, deep.ID, true)
		tok := p.viewerToken(t, p.viewerOf(p.dep1, tenant))
		open := func() response { return p.open(t, tok, b.publicID) }
		open().want(t, 404)

		p.move(t, admin, reached.ID, fo(outside)).want(t, 200)
		seenByEveryReplica(t, "its folder's parent moved into reach", time.Now(), 200, open)
		if src := sourceOf(p.listed(t, tok), b.publicID); src != "folder" {
			t.Errorf("listed with accessSource %q, want folder", src)
		}
		p.move(t, admin, nil, fo(outside)).want(t, 200)
		seenByEveryReplica(t, "its folder's parent moved out of reach", time.Now(), 404, open)

		p.move(t, admin, reached.ID, wb(b.item)).want(t, 200)
		seenByEveryReplica(t, "the workbook moved into reach", time.Now(), 200, open)
		p.move(t, admin, deep.ID, wb(b.item)).want(t, 200)
		seenByEveryReplica(t, "the workbook moved out of reach", time.Now(), 404, open)

		r := p.bulkMove(t, admin, reached.ID, fo(deep))
		if len(r.Moved) != 1 {
			t.Fatalf("bulk move %+v", r)
		}
		seenByEveryReplica(t, "its folder bulk-moved into reach", time.Now(), 200, open)
	}},
	{"root-grants", func(t *testing.T, p *platform) {
		dep := p.dep2
		p.clearRootAfter(t, dep)
		tenant, other := p.unique("tenant"), p.unique("other")
		f := p.folderIn(t, dep, 0, p.unique("any"))
		atRoot := p.publishedIn(t, p.acme.Users["admin"], dep, 0, true)
		inFolder := p.publishedIn(t, p.acme.Users["admin"], dep, f.ID, true)
		tok, otherTok := p.viewerToken(t, p.viewerOf(dep, tenant)), p.viewerToken(t, p.viewerOf(dep, other))
		p.grant(t, p.rootAccess(dep), grants{"tenants": []any{tenantRead(tenant)}})
		for _, b := range []board{atRoot, inFolder} {
			p.open(t, tok, b.publicID).want(t, 200)
			p.open(t, otherTok, b.publicID).want(t, 404)
		}
		var view struct {
			Tenants []map[string]any `json:"tenants"`
		}
		p.call(t, "GET", p.rootAccess(dep), bearer(p.acme.Users["admin"]), nil).want(t, 200).decode(t, &view)
		if len(view.Tenants) != 1 || view.Tenants[0]["embedTenantName"] != tenant {
			t.Errorf("root grants %+v", view)
		}
		var wbView struct {
			Inherited []struct {
				Source   string  `json:"source"`
				FolderID *string `json:"folderId"`
			} `json:"inherited"`
		}
		p.call(t, "GET", p.workbookAccess(dep, inFolder.ID), bearer(p.acme.Users["admin"]), nil).want(t, 200).decode(t, &wbView)
		if n := len(wbView.Inherited); n == 0 || wbView.Inherited[n-1].Source != "root" || wbView.Inherited[n-1].FolderID != nil {
			t.Errorf("inherited %+v, want the root last with folderId null", wbView.Inherited)
		}
		// The root is the admins'.
		p.call(t, "PUT", p.rootAccess(dep), bearer(p.acme.Users["aiBiUser"]), grants{}).want(t, 403)
		p.call(t, "GET", p.rootAccess(dep), bearer(p.acme.Users["viewer"]), nil).want(t, 403)
		p.open(t, tok, atRoot.publicID).want(t, 200)
		p.grant(t, p.rootAccess(dep), grants{})
		seenByEveryReplica(t, "the root grant removed", time.Now(), 404, func() response { return p.open(t, tok, inFolder.publicID) })
		// Another deployment's viewer never sees this deployment's root grants.
		p.grant(t, p.rootAccess(dep), grants{"allEmbedUsers": "read"})
		p.open(t, p.viewerToken(t, p.viewerOf(p.dep1, tenant)), atRoot.publicID).want(t, 404)
		p.open(t, p.viewerToken(t, p.viewerOf(dep, p.unique("anyone"))), atRoot.publicID).want(t, 200)
	}},
	{"get-body-sent-back-changes-nothing", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		g := p.unique("grp")
		p.accountGroupID(t, g)
		f := p.folderIn(t, p.dep1, 0, p.unique("roundtrip"))
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, f.ID, true)
		p.grant(t, p.folderAccess(p.dep1, f.ID), grants{"allEmbedUsers": "none"})
		put := p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"allEmbedUsers": "read", "tenants": []any{tenantNone(tenant)},
			"groups": []any{accountGroup(g, "read"), tenantGroup(tenant, "editors", "none")}}).obj(t)
		got := p.call(t, "GET", p.workbookAccess(p.dep1, b.ID), bearer(p.acme.Users["admin"]), nil).want(t, 200)
		if !reflect.DeepEqual(got.obj(t), put) {
			t.Errorf("GET %s, PUT answered %v", got.body, put)
		}
		again := p.call(t, "PUT", p.workbookAccess(p.dep1, b.ID), bearer(p.acme.Users["admin"]), got.body).want(t, 200)
		if !reflect.DeepEqual(again.obj(t), got.obj(t)) {
			t.Errorf("the GET's body sent back answered %s, want %s", again.body, got.body)
		}
	}},
	{"bad-grants-400-nothing-changed", func(t *testing.T, p *platform) {
		w := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		path := p.workbookAccess(p.dep1, w.ID)
		before := p.grant(t, path, grants{"tenants": []any{tenantRead("kept-tenant")}})
		tenants := func(n int) []any {
			out := []any{}
			for i := range n {
				out = append(out, tenantRead(fmt.Sprintf("tenant-%05d", i)))
			}
			return out
		}
		for _, c := range []struct {
			name string
			body any
			code string
			says string
		}{
			{"invalid tenant name", grants{"tenants": []any{tenantRead("Not A Tenant")}}, "", "Not A Tenant"},
			{"access other than read or none", grants{"allEmbedUsers": "write"}, "", "write"},
			{"tenant access other than read or none", grants{"tenants": []any{map[string]any{"embedTenantName": "valid-name", "access": "READ"}}}, "", "READ"},
			{"duplicate tenant", grants{"tenants": []any{tenantRead("dup-tenant"), tenantNone("dup-tenant")}}, "", "dup-tenant"},
			{"duplicate group", grants{"groups": []any{accountGroup("g", "read"), accountGroup("g", "none")}}, "", "g"},
			{"tenant scope without tenant", grants{"groups": []any{map[string]any{"scope": "tenant", "groupName": "g", "access": "read"}}}, "", "embedTenantName"},
			{"account scope with tenant", grants{"groups": []any{map[string]any{"scope": "account", "embedTenantName": "some-tenant", "groupName": "g", "access": "read"}}}, "", "embedTenantName"},
			{"unknown scope", grants{"groups": []any{map[string]any{"scope": "world", "groupName": "g", "access": "read"}}}, "", "world"},
			{"empty group name", grants{"groups": []any{accountGroup("", "read")}}, "", "groupName"},
			{"201 entries", grants{"tenants": tenants(201)}, "embed_access_limit", "200"},
			{"not JSON", "{", "", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := p.call(t, "PUT", path, bearer(p.acme.Users["admin"]), c.body)
				if r.status != 400 {
					t.Fatalf("%d %s, want 400", r.status, r.body)
				}
				if c.code != "" {
					r.wantCode(t, c.code)
				}
				if msg := r.message(t); !strings.Contains(msg, c.says) {
					t.Errorf("message %q does not name %q", msg, c.says)
				}
			})
		}
		p.grant(t, path, grants{"tenants": tenants(200)})
		p.grant(t, path, before.obj(t))
		after := p.call(t, "GET", path, bearer(p.acme.Users["admin"]), nil).want(t, 200)
		if !reflect.DeepEqual(after.obj(t), before.obj(t)) {
			t.Errorf("grants after the refused PUTs %s, want %s", after.body, before.body)
		}
	}},
	{"who-may-manage-grants", func(t *testing.T, p *platform) {
		admin, dev, ai, viewer := p.acme.Users["admin"], p.acme.Users["developer"], p.acme.Users["aiBiUser"], p.acme.Users["viewer"]
		f := p.folderIn(t, p.dep1, 0, p.unique("managed"))
		p.call(t, "PUT", p.ws(p.dep1, fmt.Sprintf("/folders/%d/permissions", f.ID)), bearer(admin), map[string]any{"grants": []any{
			map[string]any{"userId": ai.ID, "level": "manage"}, map[string]any{"userId": dev.ID, "level": "edit"},
			map[string]any{"userId": viewer.ID, "level": "view"}}}).want(t, 200)
		path := p.folderAccess(p.dep1, f.ID)
		p.call(t, "PUT", path, bearer(ai), grants{"allEmbedUsers": "read"}).want(t, 200)
		p.call(t, "GET", path, bearer(ai), nil).want(t, 200)
		for _, u := range []stacktest.User{dev, viewer} {
			p.call(t, "PUT", path, bearer(u), grants{}).want(t, 403)
		}
		p.call(t, "PUT", path, apiKey(p.acme.APIKeys["admin"]), grants{}).want(t, 401)
		p.call(t, "PUT", path, "", grants{}).want(t, 401)
		tok := p.viewerToken(t, p.viewerOf(p.dep1, p.unique("tenant")))
		p.call(t, "PUT", path, "Bearer "+tok, grants{}).want(t, 401)
		// Another deployment's or account's object is not found; the tenant listing is the admins'.
		p.call(t, "PUT", p.folderAccess(p.dep2, f.ID), bearer(admin), grants{"allEmbedUsers": "read"}).want(t, 404)
		p.call(t, "PUT", p.folderAccess(p.globex.Deployments[0].ID, f.ID), bearer(p.globex.Users["admin"]), grants{"allEmbedUsers": "read"}).want(t, 404)
		p.call(t, "PUT", p.workbookAccess(p.dep1, 987654321), bearer(admin), grants{}).want(t, 404)
		p.call(t, "GET", p.ws(p.dep1, "/embed-tenants/"+p.unique("tenant")+"/workbooks"), bearer(ai), nil).want(t, 403)
		var view struct {
			AllEmbedUsers string `json:"allEmbedUsers"`
		}
		p.call(t, "GET", path, bearer(admin), nil).want(t, 200).decode(t, &view)
		if view.AllEmbedUsers != "read" {
			t.Errorf("grants %+v after the refused PUTs, want the manager's", view)
		}
	}},
	{"revoked-session-401-on-next-request", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"tenants": []any{tenantRead(tenant)}})
		id := p.mintID(t, p.viewerOf(p.dep1, tenant))
		tok := p.exchange(t, id).Token
		p.open(t, tok, b.publicID).want(t, 200)
		p.call(t, "POST", revokePath, apiKey(p.acme.APIKeys["admin"]), map[string]any{"sessionId": id}).want(t, 204)
		at := time.Now()
		seenByEveryReplica(t, "the revoked session opens", at, 401, func() response { return p.open(t, tok, b.publicID) })
		p.call(t, "GET", embedDashboards, "Bearer "+tok, nil).want(t, 401)
	}},
	{"grant-removed-on-every-replica", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		tok := p.viewerToken(t, p.viewerOf(p.dep1, tenant))
		for range 3 {
			p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"tenants": []any{tenantRead(tenant)}})
			seenByEveryReplica(t, "the grant added", time.Now(), 200, func() response { return p.open(t, tok, b.publicID) })
			p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{})
			seenByEveryReplica(t, "the grant removed", time.Now(), 404, func() response { return p.open(t, tok, b.publicID) })
			if got := publicIDs(p.listed(t, tok)); slices.Contains(got, b.publicID) {
				t.Errorf("listed %v after the grant was removed", got)
			}
		}
	}},
	{"membership-routes-and-removal-on-every-replica", func(t *testing.T, p *platform) {
		key := apiKey(p.acme.APIKeys["admin"])
		tenant, g := p.unique("tenant"), p.unique("grp")
		gid := p.accountGroupID(t, g)
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"groups": []any{accountGroup(g, "read")}})
		body := p.viewerOf(p.dep1, tenant)
		ext := body["externalId"].(string)
		tok := p.viewerToken(t, body) // no groups: not a member
		open := func() response { return p.open(t, tok, b.publicID) }
		open().want(t, 404)

		users := "/api/v1/groups/" + gid + "/users"
		var added struct {
			Added          int `json:"added"`
			AlreadyMembers int `json:"alreadyMembers"`
		}
		p.call(t, "POST", users, key, map[string]any{"externalIds": []string{ext}}).want(t, 200).decode(t, &added)
		if added.Added != 1 || added.AlreadyMembers != 0 {
			t.Errorf("POST answered %+v, want 1 added", added)
		}
		seenByEveryReplica(t, "the membership added", time.Now(), 200, open)
		p.call(t, "POST", users, key, map[string]any{"externalIds": []string{ext}}).want(t, 200).decode(t, &added)
		if added.Added != 0 || added.AlreadyMembers != 1 {
			t.Errorf("POST again answered %+v, want 1 already a member", added)
		}
		var members struct {
			Items []map[string]any `json:"items"`
		}
		p.call(t, "GET", users+"?first=200", key, nil).want(t, 200).decode(t, &members)
		if len(members.Items) != 1 || members.Items[0]["externalId"] != ext {
			t.Errorf("members %v, want %s", members.Items, ext)
		}
		// A mint that omits groups keeps what the route added.
		tok = p.viewerToken(t, body)
		open().want(t, 200)

		p.call(t, "DELETE", users+"/"+ext, key, nil).want(t, 204)
		seenByEveryReplica(t, "the membership removed", time.Now(), 404, open)

		// Unknown users: 404 naming them, nothing added.
		missing := p.unique("nobody")
		r := p.call(t, "POST", users, key, map[string]any{"externalIds": []string{ext, missing}}).want(t, 404)
		if msg := r.message(t); !strings.Contains(msg, missing) || strings.Contains(msg, ext+",") {
			t.Errorf("message %q, want it to name %s only", msg, missing)
		}
		open().want(t, 404)
		// Bounds, and who may.
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprintf("user-%d", i)
		}
		p.call(t, "POST", users, key, map[string]any{"externalIds": many}).want(t, 400)
		p.call(t, "POST", users, key, map[string]any{"externalIds": []string{}}).want(t, 400)
		p.call(t, "POST", users, apiKey(p.acme.APIKeys["adminScoped"]), map[string]any{"externalIds": []string{ext}}).want(t, 403)
		p.call(t, "POST", users, apiKey(p.acme.APIKeys["personal"]), map[string]any{"externalIds": []string{ext}}).want(t, 403)
		p.call(t, "POST", "/api/v1/groups/"+gid+"/users", apiKey(p.globex.APIKeys["admin"]), map[string]any{"externalIds": []string{ext}}).want(t, 404)

		// The tenant's catalog: a creator-mode tenant group.
		ct := p.unique("creator")
		cbody := map[string]any{"deploymentId": p.dep1, "externalId": p.unique("creator-user"), "embedTenantName": ct, "creatorMode": true,
			"groupDefinitions": []map[string]any{{"name": "editors"}}}
		ctok := p.viewerToken(t, cbody)
		tb := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, tb.ID), grants{"groups": []any{tenantGroup(ct, "editors", "read")}})
		p.open(t, ctok, tb.publicID).want(t, 404)
		tgid := ""
		for _, d := range p.tenantGroups(t, ct) {
			if d["name"] == "editors" {
				tgid, _ = d["id"].(string)
			}
		}
		if tgid == "" {
			t.Fatalf("no tenant group editors in %v", p.tenantGroups(t, ct))
		}
		tusers := "/api/v1/embed-tenants/" + ct + "/groups/" + tgid + "/users"
		p.call(t, "POST", tusers, key, map[string]any{"externalIds": []string{cbody["externalId"].(string)}}).want(t, 200)
		seenByEveryReplica(t, "the tenant membership added", time.Now(), 200, func() response { return p.open(t, ctok, tb.publicID) })
		p.call(t, "DELETE", tusers+"/"+cbody["externalId"].(string), key, nil).want(t, 204)
		seenByEveryReplica(t, "the tenant membership removed", time.Now(), 404, func() response { return p.open(t, ctok, tb.publicID) })
		// A mint's empty groups clears, a list replaces.
		p.call(t, "POST", tusers, key, map[string]any{"externalIds": []string{cbody["externalId"].(string)}}).want(t, 200)
		ctok = p.viewerToken(t, with(cbody, "groups", []string{}))
		p.open(t, ctok, tb.publicID).want(t, 404)
		ctok = p.viewerToken(t, with(cbody, "groups", []string{"editors"}))
		p.open(t, ctok, tb.publicID).want(t, 200)
	}},
	{"narrowing-by-resources", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		f := p.folderIn(t, p.dep1, 0, p.unique("narrow"))
		a := p.publishedIn(t, p.acme.Users["admin"], p.dep1, f.ID, true)
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, f.ID, true)
		hidden := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true) // no grant
		p.grant(t, p.folderAccess(p.dep1, f.ID), grants{"tenants": []any{tenantRead(tenant)}})
		narrowed := func(ids ...string) string {
			if ids == nil {
				ids = []string{}
			}
			return p.viewerToken(t, with(p.viewerOf(p.dep1, tenant), "resources", map[string]any{"dashboards": ids}))
		}
		tok := narrowed(a.publicID, hidden.publicID, refID)
		p.open(t, tok, a.publicID).want(t, 200)
		ref := p.open(t, tok, refID)
		wantHidden(t, "excluded by resources", p.open(t, tok, b.publicID), b.publicID, ref)
		wantHidden(t, "named by resources, no grant", p.open(t, tok, hidden.publicID), hidden.publicID, ref)
		if got := publicIDs(p.listed(t, tok)); !reflect.DeepEqual(got, []string{a.publicID}) {
			t.Errorf("narrowed listing %v, want only %s", got, a.publicID)
		}
		empty := narrowed()
		for _, x := range []board{a, b} {
			wantHidden(t, "resources empty", p.open(t, empty, x.publicID), x.publicID, ref)
		}
		if got := p.listed(t, empty); len(got) != 0 {
			t.Errorf("a session narrowed to nothing lists %v", got)
		}
		// Unnarrowed: both.
		if got := publicIDs(p.listed(t, p.viewerToken(t, p.viewerOf(p.dep1, tenant)))); !slices.Contains(got, a.publicID) || !slices.Contains(got, b.publicID) {
			t.Errorf("unnarrowed listing %v, want both", got)
		}
		// Format-checked, bounded, not with internalId.
		for name, res := range map[string]any{
			"malformed id": map[string]any{"dashboards": []string{"not-a-public-id"}},
			"51 ids":       map[string]any{"dashboards": slices.Repeat([]string{refID}, 51)},
			"not a list":   map[string]any{"dashboards": "x"},
		} {
			t.Run(name, func(t *testing.T) {
				p.mint(t, with(p.viewerOf(p.dep1, tenant), "resources", res)).want(t, 400)
			})
		}
		p.mint(t, map[string]any{"deploymentId": p.dep1, "internalId": p.acme.Users["viewer"].Username,
			"resources": map[string]any{"dashboards": []string{a.publicID}}}).want(t, 400)
	}},
	{"one-404-byte-for-byte", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		tenant := p.unique("tenant")
		grantAll := func(b board) { p.grant(t, p.workbookAccess(b.dep, b.ID), grants{"allEmbedUsers": "read"}) }
		ok := p.publishedIn(t, admin, p.dep1, 0, true)
		grantAll(ok)
		noGrant := p.publishedIn(t, admin, p.dep1, 0, true)
		none := p.publishedIn(t, admin, p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, none.ID), grants{"allEmbedUsers": "read", "tenants": []any{tenantNone(tenant)}})
		noEmbed := p.publishedIn(t, admin, p.dep1, 0, false)
		grantAll(noEmbed)
		archived := p.publishedIn(t, admin, p.dep1, 0, true)
		grantAll(archived)
		p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/unpublish", archived.ID)), bearer(admin), nil).want(t, 200)
		deleted := p.publishedIn(t, admin, p.dep1, 0, true)
		grantAll(deleted)
		p.call(t, "DELETE", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d", deleted.ID)), bearer(admin), nil).want(t, 204)
		otherDep := p.publishedIn(t, admin, p.dep2, 0, true)
		grantAll(otherDep)
		excluded := p.publishedIn(t, admin, p.dep1, 0, true)
		grantAll(excluded)
		// Another account's.
		g := p.globex
		var gw item
		p.call(t, "POST", p.ws(g.Deployments[0].ID, "/workbooks"), bearer(g.Users["admin"]), map[string]any{"name": "globex board",
			"dashboardDraft": map[string]any{"kind": "CLASSIC", "widgets": []any{}}}).want(t, 200).decode(t, &gw)
		gpub := p.call(t, "POST", p.ws(g.Deployments[0].ID, fmt.Sprintf("/workbooks/%d/publish", gw.ID)), bearer(g.Users["admin"]), nil).want(t, 200).obj(t)
		otherAccount := gpub["publishedDashboard"].(map[string]any)["publicId"].(string)
		p.call(t, "PUT", p.workbookAccess(g.Deployments[0].ID, gw.ID), bearer(g.Users["admin"]), grants{"allEmbedUsers": "read"}).want(t, 200)

		tok := p.viewerToken(t, p.viewerOf(p.dep1, tenant))
		narrowedTok := p.viewerToken(t, with(p.viewerOf(p.dep1, tenant), "resources", map[string]any{"dashboards": []string{ok.publicID}}))
		p.open(t, tok, ok.publicID).want(t, 200)
		p.open(t, narrowedTok, ok.publicID).want(t, 200)
		ref := p.open(t, tok, refID)
		wantHidden(t, "unknown id", ref, refID, ref)
		for _, c := range []struct {
			what, token, id string
		}{
			{"no grant", tok, noGrant.publicID},
			{"explicit none", tok, none.publicID},
			{"allowEmbed false", tok, noEmbed.publicID},
			{"archived", tok, archived.publicID},
			{"deleted", tok, deleted.publicID},
			{"another deployment", tok, otherDep.publicID},
			{"another account", tok, otherAccount},
			{"excluded by resources", narrowedTok, excluded.publicID},
			{"unknown id, narrowed session", narrowedTok, refID},
			{"lowercase of an id", tok, strings.ToLower(ok.publicID)},
			{"too short", tok, ok.publicID[:15]},
			{"too long", tok, ok.publicID + "A"},
			{"one character", tok, "x"},
			{"a 200-character id", tok, strings.Repeat("A", 200)},
			{"characters outside the alphabet", tok, "AAAAAAAAAAAAAAA."},
			{"a percent-encoded space", tok, "AAAAAAAAAAAAAAA%20"},
			{"a number", tok, "12345"},
		} {
			t.Run(c.what, func(t *testing.T) {
				r := p.open(t, c.token, c.id)
				id := c.id
				if u, err := url.PathUnescape(id); err == nil {
					id = u
				}
				wantHidden(t, c.what, r, id, ref)
			})
		}
		// An archived dashboard published again opens again; the listing never shows the others.
		p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/publish", archived.ID)), bearer(admin), nil).want(t, 200)
		p.open(t, tok, archived.publicID).want(t, 200)
		got := publicIDs(p.listed(t, tok))
		for _, id := range []string{noGrant.publicID, none.publicID, noEmbed.publicID, deleted.publicID, otherDep.publicID, otherAccount} {
			if slices.Contains(got, id) {
				t.Errorf("listed %s, which the session may not open", id)
			}
		}
		if !slices.Contains(got, ok.publicID) || !slices.Contains(got, archived.publicID) {
			t.Errorf("listing %v lacks what the session opens", got)
		}
		// The viewer routes take an embed token only.
		for _, authz := range []string{bearer(admin), apiKey(p.acme.APIKeys["admin"]), ""} {
			p.call(t, "GET", embedDashboards+"/"+ok.publicID, authz, nil).want(t, 401)
			p.call(t, "GET", embedDashboards, authz, nil).want(t, 401)
		}
	}},
	{"internal-users-follow-their-own-permissions", func(t *testing.T, p *platform) {
		admin, viewer := p.acme.Users["admin"], p.acme.Users["viewer"]
		private := p.folderIn(t, p.dep1, 0, p.unique("private"))
		inPrivate := p.publishedIn(t, admin, p.dep1, private.ID, true)
		// Embed grants open it to every external viewer; the internal viewer has no folder grant.
		p.grant(t, p.workbookAccess(p.dep1, inPrivate.ID), grants{"allEmbedUsers": "read"})
		atRoot := p.publishedIn(t, admin, p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, atRoot.ID), grants{"allEmbedUsers": "none"})
		internal := func(u stacktest.User) string {
			return p.viewerToken(t, map[string]any{"deploymentId": p.dep1, "internalId": u.Username})
		}
		vt := internal(viewer)
		wantHidden(t, "internal viewer, no folder grant", p.open(t, vt, inPrivate.publicID), inPrivate.publicID, p.open(t, vt, refID))
		p.open(t, vt, atRoot.publicID).want(t, 200) // a root workbook is viewable by every viewer, whatever the embed grants
		if src := sourceOf(p.listed(t, vt), atRoot.publicID); src != "user" {
			t.Errorf("internal listing: accessSource %q, want user", src)
		}
		p.call(t, "PUT", p.ws(p.dep1, fmt.Sprintf("/folders/%d/permissions", private.ID)), bearer(admin),
			map[string]any{"grants": []any{map[string]any{"userId": viewer.ID, "level": "view"}}}).want(t, 200)
		seenByEveryReplica(t, "a folder grant to the internal viewer", time.Now(), 200, func() response { return p.open(t, vt, inPrivate.publicID) })
		p.call(t, "PUT", p.ws(p.dep1, fmt.Sprintf("/folders/%d/permissions", private.ID)), bearer(admin), map[string]any{"grants": []any{}}).want(t, 200)
		seenByEveryReplica(t, "the folder grant removed", time.Now(), 404, func() response { return p.open(t, vt, inPrivate.publicID) })
		p.open(t, internal(admin), inPrivate.publicID).want(t, 200)
		// allowEmbed still decides.
		noEmbed := p.publishedIn(t, admin, p.dep1, 0, false)
		p.open(t, internal(admin), noEmbed.publicID).want(t, 404)
		// External viewers of the same deployment follow the embed grants.
		ext := p.viewerToken(t, p.viewerOf(p.dep1, p.unique("tenant")))
		p.open(t, ext, inPrivate.publicID).want(t, 200)
		p.open(t, ext, atRoot.publicID).want(t, 404)
	}},
	{"creator-mode-follows-embed-grants", func(t *testing.T, p *platform) {
		tenant := p.unique("creator")
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		body := map[string]any{"deploymentId": p.dep1, "externalId": p.unique("creator-user"), "embedTenantName": tenant, "creatorMode": true}
		tok := p.viewerToken(t, body)
		p.open(t, tok, b.publicID).want(t, 404)
		p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"tenants": []any{tenantRead(tenant)}})
		p.open(t, tok, b.publicID).want(t, 200)
	}},
	{"tenant-listing-access-source", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		tenant, g := p.unique("tenant"), p.unique("grp")
		f := p.folderIn(t, p.dep1, 0, p.unique("listing"))
		byTenant := p.publishedIn(t, admin, p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, byTenant.ID), grants{"tenants": []any{tenantRead(tenant)}})
		byGroup := p.publishedIn(t, admin, p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, byGroup.ID), grants{"groups": []any{accountGroup(g, "read")}})
		byAll := p.publishedIn(t, admin, p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, byAll.ID), grants{"allEmbedUsers": "read"})
		byFolder := p.publishedIn(t, admin, p.dep1, f.ID, true)
		unpublished := p.createWorkbook(t, admin, p.unique("draft"), f.ID)
		p.grant(t, p.folderAccess(p.dep1, f.ID), grants{"tenants": []any{tenantRead(tenant)}})
		denied := p.publishedIn(t, admin, p.dep1, f.ID, true)
		p.grant(t, p.workbookAccess(p.dep1, denied.ID), grants{"tenants": []any{tenantNone(tenant)}})

		type entry struct {
			WorkbookID   int64          `json:"workbookId"`
			PublicID     *string        `json:"publicId"`
			Embeddable   bool           `json:"embeddable"`
			AccessSource string         `json:"accessSource"`
			Subject      map[string]any `json:"subject"`
			ViaFolderID  *int64         `json:"viaFolderId"`
		}
		list := func(q string) map[int64]entry {
			out := map[int64]entry{}
			after := ""
			for range 100 {
				var pg struct {
					Items    []entry `json:"items"`
					PageInfo struct {
						HasNextPage bool    `json:"hasNextPage"`
						EndCursor   *string `json:"endCursor"`
					} `json:"pageInfo"`
				}
				path := p.ws(p.dep1, "/embed-tenants/"+tenant+"/workbooks?first=2"+q)
				if after != "" {
					path += "&after=" + url.QueryEscape(after)
				}
				p.call(t, "GET", path, bearer(admin), nil).want(t, 200).decode(t, &pg)
				for _, e := range pg.Items {
					if _, dup := out[e.WorkbookID]; dup {
						t.Errorf("workbook %d listed twice", e.WorkbookID)
					}
					out[e.WorkbookID] = e
				}
				if !pg.PageInfo.HasNextPage || pg.PageInfo.EndCursor == nil {
					return out
				}
				after = *pg.PageInfo.EndCursor
			}
			t.Fatal("the tenant listing did not end")
			return nil
		}
		all := list("")
		for id, want := range map[int64]string{byTenant.ID: "tenant", byGroup.ID: "group", byAll.ID: "allEmbedUsers", byFolder.ID: "folder", unpublished.ID: "folder"} {
			if e, ok := all[id]; !ok || e.AccessSource != want {
				t.Errorf("workbook %d: %+v, want accessSource %s", id, e, want)
			}
		}
		if e := all[byFolder.ID]; e.ViaFolderID == nil || *e.ViaFolderID != f.ID || !e.Embeddable {
			t.Errorf("the folder's workbook %+v, want viaFolderId %d, embeddable", e, f.ID)
		}
		if e := all[unpublished.ID]; e.Embeddable || e.PublicID != nil {
			t.Errorf("a draft %+v, want not embeddable and no publicId", e)
		}
		if e := all[byGroup.ID]; e.Subject["groupName"] != g {
			t.Errorf("the group's workbook %+v, want subject naming %s", e, g)
		}
		if _, ok := all[denied.ID]; ok {
			t.Errorf("the workbook with the tenant's none is listed")
		}
		for _, src := range []string{"tenant", "group", "allEmbedUsers", "folder"} {
			for id, e := range list("&accessSource=" + src) {
				if e.AccessSource != src {
					t.Errorf("accessSource=%s listed %d with %s", src, id, e.AccessSource)
				}
			}
		}
		p.call(t, "GET", p.ws(p.dep1, "/embed-tenants/"+tenant+"/workbooks?accessSource=user"), bearer(admin), nil).want(t, 400)
		p.call(t, "GET", p.ws(p.dep1, "/embed-tenants/Bad_Tenant/workbooks"), bearer(admin), nil).want(t, 400)
		// A tenant granted before its first session; another account's admin sees none of it.
		p.call(t, "GET", p.ws(p.dep1, "/embed-tenants/"+tenant+"/workbooks"), bearer(p.globex.Users["admin"]), nil).want(t, 404)
	}},
	{"dry-run-lists-dashboards", func(t *testing.T, p *platform) {
		tenant, g := p.unique("tenant"), p.unique("grp")
		p.accountGroupID(t, g)
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"groups": []any{accountGroup(g, "read")}})
		var dry struct {
			Effective struct {
				Dashboards []struct {
					PublicID     string         `json:"publicId"`
					AccessSource string         `json:"accessSource"`
					Subject      map[string]any `json:"subject"`
				} `json:"dashboards"`
				DashboardsTruncated bool `json:"dashboardsTruncated"`
				GroupMemberships    struct {
					Account []string `json:"account"`
					Tenant  []string `json:"tenant"`
				} `json:"groupMemberships"`
			} `json:"effective"`
		}
		p.mint(t, with(p.viewerOf(p.dep1, tenant, g), "dryRun", true)).want(t, 200).decode(t, &dry)
		found := false
		for _, d := range dry.Effective.Dashboards {
			if d.PublicID == b.publicID {
				found = d.AccessSource == "group" && d.Subject["groupName"] == g
			}
		}
		if !found || !slices.Contains(dry.Effective.GroupMemberships.Account, g) {
			t.Errorf("dry run %+v, want %s through group %s", dry.Effective, b.publicID, g)
		}
		p.mint(t, with(p.viewerOf(p.dep1, tenant), "dryRun", true)).want(t, 200).decode(t, &dry)
		for _, d := range dry.Effective.Dashboards {
			if d.PublicID == b.publicID {
				t.Errorf("a viewer without the group would open %s: %+v", b.publicID, d)
			}
		}
	}},
	{"audit-events-for-grant-and-membership-changes", func(t *testing.T, p *platform) {
		admin := p.acme.Users["admin"]
		f := p.folderIn(t, p.dep1, 0, p.unique("audited"))
		first := grants{"tenants": []any{tenantRead(p.unique("tenant"))}}
		r := p.grant(t, p.folderAccess(p.dep1, f.ID), first)
		q := url.Values{"action": {"workspace.folder.embed_access_change"}, "targetId": {id64(f.ID)}}
		if ev := p.awaitEventOf(t, bearer(admin), q, r); ev.Outcome.Result != "success" || ev.Target.Type != "folder" {
			t.Errorf("grant event %+v", ev)
		}
		p.grant(t, p.folderAccess(p.dep1, f.ID), first) // identical: nothing changes, nothing is recorded
		refused := p.call(t, "PUT", p.folderAccess(p.dep1, f.ID), bearer(p.acme.Users["viewer"]), grants{}).want(t, 403)
		if ev := p.awaitEventOf(t, bearer(admin), q, refused); ev.Outcome.Result == "success" || ev.Outcome.Status != 403 {
			t.Errorf("refused grant change recorded as %+v", ev.Outcome)
		}
		last := p.grant(t, p.folderAccess(p.dep1, f.ID), grants{"allEmbedUsers": "none"})
		p.awaitEventOf(t, bearer(admin), q, last)
		successes := 0
		for _, ev := range p.auditQuery(t, bearer(admin), q).Items {
			if ev.Outcome.Result == "success" {
				successes++
			}
		}
		if successes != 2 {
			t.Errorf("%d successful grant events on the folder, want 2 (the identical PUT records none)", successes)
		}
		rr := p.grant(t, p.rootAccess(p.dep1), grants{"tenants": []any{tenantRead(p.unique("tenant"))}})
		p.clearRootAfter(t, p.dep1)
		if ev := p.awaitEventOf(t, bearer(admin), url.Values{"action": {"workspace.deployment.embed_access_change"}}, rr); ev.Target.ID != id64(p.dep1) {
			t.Errorf("root grant event %+v", ev)
		}

		key := apiKey(p.acme.APIKeys["admin"])
		g := p.unique("grp")
		gid := p.accountGroupID(t, g)
		body := p.viewerOf(p.dep1, p.unique("tenant"))
		p.mint(t, body).want(t, 200)
		ext := body["externalId"].(string)
		add := p.call(t, "POST", "/api/v1/groups/"+gid+"/users", key, map[string]any{"externalIds": []string{ext}}).want(t, 200)
		if ev := p.awaitEventOf(t, bearer(admin), url.Values{"action": {"embed.group_membership.add"}}, add); ev.Outcome.Result != "success" {
			t.Errorf("membership add event %+v", ev)
		}
		del := p.call(t, "DELETE", "/api/v1/groups/"+gid+"/users/"+ext, key, nil).want(t, 204)
		if ev := p.awaitEventOf(t, bearer(admin), url.Values{"action": {"embed.group_membership.remove"}}, del); ev.Outcome.Result != "success" {
			t.Errorf("membership removal event %+v", ev)
		}
	}},
	{"grants-leave-the-data-api-token-unchanged", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		b := p.publishedIn(t, p.acme.Users["admin"], p.dep1, 0, true)
		tok := p.viewerToken(t, p.viewerOf(p.dep1, tenant))
		dataClaims := func() map[string]any {
			var dt struct{ Token string }
			p.call(t, "POST", p.ws(p.dep1, "/token"), "Bearer "+tok, nil).want(t, 200).decode(t, &dt)
			c := jwtClaims(t, dt.Token)
			for _, k := range []string{"jti", "iat", "exp", "nbf"} {
				delete(c, k)
			}
			return c
		}
		before := dataClaims()
		p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"tenants": []any{tenantRead(tenant)}})
		p.open(t, tok, b.publicID).want(t, 200)
		if after := dataClaims(); !reflect.DeepEqual(after, before) {
			t.Errorf("the data-API token's claims changed with a grant: %v, were %v", after, before)
		}
		p.grant(t, p.workbookAccess(p.dep1, b.ID), grants{"tenants": []any{tenantNone(tenant)}})
		if after := dataClaims(); !reflect.DeepEqual(after, before) {
			t.Errorf("the data-API token's claims changed with a none: %v, were %v", after, before)
		}
	}},
	{"viewer-listing-pages", func(t *testing.T, p *platform) {
		tenant := p.unique("tenant")
		f := p.folderIn(t, p.dep1, 0, p.unique("pages"))
		var want []string
		for range 5 {
			want = append(want, p.publishedIn(t, p.acme.Users["admin"], p.dep1, f.ID, true).publicID)
		}
		sort.Strings(want)
		p.grant(t, p.folderAccess(p.dep1, f.ID), grants{"tenants": []any{tenantRead(tenant)}})
		tok := p.viewerToken(t, p.viewerOf(p.dep1, tenant))
		var got []string
		after := ""
		for range 10 {
			var pg struct {
				Items    []dashboardSummary `json:"items"`
				PageInfo struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
			}
			path := embedDashboards + "?first=2"
			if after != "" {
				path += "&after=" + url.QueryEscape(after)
			}
			p.call(t, "GET", path, "Bearer "+tok, nil).want(t, 200).decode(t, &pg)
			if len(pg.Items) > 2 {
				t.Fatalf("a page of %d, want at most 2", len(pg.Items))
			}
			for _, d := range pg.Items {
				if !slices.Contains(want, d.PublicID) {
					continue // another subtest's, open to every viewer
				}
				got = append(got, d.PublicID)
				if d.Title == nil || *d.Title == "" || d.AccessSource != "folder" {
					t.Errorf("summary %+v, want a title and accessSource folder", d)
				}
			}
			if !pg.PageInfo.HasNextPage {
				break
			}
			after = *pg.PageInfo.EndCursor
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pages listed %v, want %v", got, want)
		}
		for _, q := range []string{"first=0", "first=201", "after=not-a-cursor"} {
			p.call(t, "GET", embedDashboards+"?"+q, "Bearer "+tok, nil).want(t, 400)
		}
	}},
}
