package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/embed-svc/client"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/workspace-svc/internal/app"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// groupsFake is embed-svc's viewer lookup as a test sets it: each external user's
// current groups, or a lookup that fails. Every replica of a test asks the same one.
type groupsFake struct {
	mu     sync.Mutex
	groups map[string]client.ViewerReply
	fail   bool
}

func newGroupsFake() *groupsFake { return &groupsFake{groups: map[string]client.ViewerReply{}} }

func (g *groupsFake) Groups(_ context.Context, req client.ViewerRequest) (client.ViewerReply, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail {
		return client.ViewerReply{}, errors.Join(client.ErrUnavailable, errs.ErrUnavailable)
	}
	return g.groups[fmt.Sprint(req.AccountID, "/", req.EmbedTenantName, "/", req.ExternalID)], nil
}

func (g *groupsFake) set(account int64, tenant, externalID string, accountGroups ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups[fmt.Sprint(account, "/", tenant, "/", externalID)] = client.ViewerReply{AccountGroups: accountGroups}
}

func (g *groupsFake) failing(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail = on
}

// embedInstance starts one more workspace-svc instance on e's database, its viewer
// lookups answered by viewers or, when nc is set, by embed-svc over NATS (and the
// dashboard reach served there); counter counts its MongoDB commands (nil: none).
func (e *env) embedInstance(t *testing.T, viewers workspace.ViewerGroups, nc *nats.Conn, counter *mongox.CommandCounter) string {
	t.Helper()
	ctx := context.Background()
	mc, err := mongox.ConnectWith(ctx, e.mongoURI, mongox.ConnectOptions{Counter: counter, Observe: e.plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Disconnect(context.Background()) })
	signer, err := identity.NewSigner(e.key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Deps{Mongo: mc, Database: e.database, Signer: signer, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Registry: obs.NewRegistry(), Limits: e.limits, Audit: e.audit, Viewers: viewers, NATS: nc, ViewerTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// embedSession is the principal of an embed session of acme's deployment dep: an external
// user of tenant acme-corp, or (user set) an internal user of the account.
func (e *env) embedSession(dep int64, externalID string, user *devstack.SeedUser, resources ...string) *identity.Principal {
	acme := e.acme()
	p := &identity.Principal{Credential: identity.CredentialEmbed, Account: identity.Account{ID: acme.ID, Plan: acme.Plan, EmbeddingEnabled: true},
		Embed: &identity.Embed{SessionID: "sess-" + externalID, Subject: externalID, DeploymentID: dep, Tenant: "acme-corp"}}
	if user != nil {
		p.User = &identity.User{ID: user.ID, Username: user.Username, Email: user.Email, Role: user.Role}
		p.Embed.Internal, p.Embed.Tenant = true, ""
	}
	if resources != nil {
		p.Embed.Resources = &identity.EmbedResources{Dashboards: resources}
	}
	return p
}

// embedGet sends GET path to the instance at base as the embed session p (past the
// gateway: the principal is signed here, as the gateway signs it).
func (e *env) embedGet(t *testing.T, base, path string, p *identity.Principal) apitest.Response {
	t.Helper()
	c := apitest.New(base)
	req, err := c.Request("GET", path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := *p
	q.Audience = app.ServiceName
	v, err := e.stack.Signer.Sign(&q)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(identity.Header, v)
	return c.Send(t, req)
}

// board creates a workbook named name in folder whose draft shows report (0: none) and
// publishes it; allowEmbed nil publishes without a body. It returns the workbook's id
// and its dashboard's public id.
func (e *env) board(t *testing.T, dep int64, name string, folder, report int64, allowEmbed *bool) (int64, string) {
	t.Helper()
	admin := e.bearer("acme", "admin")
	draft := map[string]any{"kind": "CLASSIC", "title": name, "widgets": []any{}}
	if report != 0 {
		draft["widgets"] = []any{map[string]any{"id": "w1", "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 4, "h": 4},
			"config": map[string]any{"reportId": report}}}
	}
	body := map[string]any{"name": name, "dashboardDraft": draft}
	if folder != 0 {
		body["folderId"] = folder
	}
	r := e.do(t, "POST", depPath(dep, "/workbooks"), admin, body)
	if r.Status != 200 {
		t.Fatalf("create workbook %q: %d %s", name, r.Status, r.Body)
	}
	id := int64(r.Object(t)["id"].(float64))
	var pub any
	if allowEmbed != nil {
		pub = map[string]any{"allowEmbed": *allowEmbed}
	}
	p := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", id)), admin, pub)
	if p.Status != 200 {
		t.Fatalf("publish %q: %d %s", name, p.Status, p.Body)
	}
	return id, p.Object(t)["publishedDashboard"].(map[string]any)["publicId"].(string)
}

// volatileHeaders differ between any two answers.
var volatileHeaders = []string{"Date", "X-Request-Id", "Traceparent"}

// sameNotFound fails unless r is, byte for byte, the answer base got for baseID, with
// id in place of baseID.
func sameNotFound(t *testing.T, what string, r apitest.Response, id string, base apitest.Response, baseID string) {
	t.Helper()
	wantBody := strings.ReplaceAll(string(base.Body), baseID, id)
	if r.Status != 404 || string(r.Body) != wantBody {
		t.Errorf("%s: %d %s\nwant 404 %s", what, r.Status, r.Body, wantBody)
	}
	got, want := r.Header.Clone(), base.Header.Clone()
	for _, h := range volatileHeaders {
		got.Del(h)
		want.Del(h)
	}
	if len(id) != len(baseID) {
		got.Del("Content-Length")
		want.Del("Content-Length")
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("%s: headers %v\nwant %v", what, got, want)
	}
}

func embedPath(publicID string) string { return "/api/v1/embed/dashboards/" + publicID }

// TestEmbedReadPathOverTheStore: the viewer's read path over FerretDB on two replicas:
// every refusal the one not-found answer byte for byte, what a viewer must not see left
// out, a grant removed, a membership removed and a folder moved out of reach seen at the
// next request on either replica, narrowing, internal users, the lookup unavailable, and
// a read's cost.
func TestEmbedReadPathOverTheStore(t *testing.T) {
	e := newEnv(t, 1)
	acme := e.acme()
	dep, otherDep := e.dep("acme", 0), e.dep("acme", 1)
	admin := e.bearer("acme", "admin")
	groups := newGroupsFake()
	counter := &mongox.CommandCounter{}
	replicas := []string{e.embedInstance(t, groups, nil, counter), e.embedInstance(t, groups, nil, nil)}

	finance := e.mkFolder(t, dep, admin, "Finance", 0)
	emea := e.mkFolder(t, dep, admin, "EMEA", finance)
	report := e.do(t, "POST", depPath(dep, "/reports"), admin, map[string]any{"name": "Revenue report", "meta": map[string]any{"sql": "select secret"}})
	if report.Status != 200 {
		t.Fatalf("create report: %d %s", report.Status, report.Body)
	}
	revenueID, revenue := e.board(t, dep, "Revenue", emea, int64(report.Object(t)["id"].(float64)), nil)
	_, atRoot := e.board(t, dep, "At root", 0, 0, nil)
	no := false
	_, noEmbed := e.board(t, dep, "No embed", finance, 0, &no)
	archivedID, archived := e.board(t, dep, "Archived", finance, 0, nil)
	if r := e.do(t, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/unpublish", archivedID)), admin, nil); r.Status != 200 {
		t.Fatalf("unpublish: %d %s", r.Status, r.Body)
	}
	deletedID, deleted := e.board(t, dep, "Deleted", finance, 0, nil)
	if r := e.do(t, "DELETE", depPath(dep, fmt.Sprintf("/workbooks/%d", deletedID)), admin, nil); r.Status != 200 && r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	noneID, none := e.board(t, dep, "None", finance, 0, nil)
	_, elsewhere := e.board(t, otherDep, "Elsewhere", 0, 0, nil)
	e.eaPut(t, otherDep, "/embed-access", admin, map[string]any{"allEmbedUsers": "read"})
	e.eaPut(t, dep, fmt.Sprintf("/folders/%d/embed-access", finance), admin, map[string]any{"tenants": eaTenants("read", "acme-corp")})
	e.eaPut(t, dep, fmt.Sprintf("/workbooks/%d/embed-access", noneID), admin, map[string]any{"allEmbedUsers": "none"})

	viewer := e.embedSession(dep, "u-1", nil)
	// opens reports whether every replica opens publicID, failing when they disagree or
	// answer anything but 200 or the not-found answer.
	opens := func(t *testing.T, p *identity.Principal, publicID string) bool {
		t.Helper()
		var got []int
		for _, base := range replicas {
			r := e.embedGet(t, base, embedPath(publicID), p)
			if r.Status != 200 && r.Status != 404 {
				t.Fatalf("GET %s: %d %s", publicID, r.Status, r.Body)
			}
			got = append(got, r.Status)
		}
		if got[0] != got[1] {
			t.Fatalf("the replicas disagree on %s: %v", publicID, got)
		}
		return got[0] == 200
	}

	t.Run("the dashboard without what a viewer must not see", func(t *testing.T) {
		r := e.embedGet(t, replicas[0], embedPath(revenue), viewer)
		if r.Status != 200 {
			t.Fatalf("GET: %d %s", r.Status, r.Body)
		}
		d := r.Object(t)
		snaps, _ := d["reportSnapshots"].([]any)
		if d["publicId"] != revenue || d["title"] != "Revenue" || d["status"] != "published" || len(snaps) != 1 {
			t.Fatalf("dashboard %s", r.Body)
		}
		snap := snaps[0].(map[string]any)
		for k, v := range map[string]any{"createdBy": d["createdBy"], "updatedBy": d["updatedBy"], "sqlQuery": snap["sqlQuery"],
			"pythonCode": snap["pythonCode"], "meta": snap["meta"]} {
			if v != nil {
				t.Errorf("%s: %v, want null", k, v)
			}
		}
		if strings.Contains(string(r.Body), "secret") || !strings.Contains(string(r.Body), `"meta":null`) || !strings.Contains(string(r.Body), `"createdBy":null`) {
			t.Errorf("the answer holds what is hidden, or drops a field: %s", r.Body)
		}
	})

	t.Run("every refusal is the same not found", func(t *testing.T) {
		const unknown = "AAAAAAAAAAAAAAAA"
		base := e.embedGet(t, replicas[0], embedPath(unknown), viewer)
		if base.Status != 404 || strings.TrimSpace(string(base.Body)) != `{"status":404,"code":"not_found","message":"dashboard `+unknown+` not found"}` {
			t.Fatalf("unknown id: %d %s", base.Status, base.Body)
		}
		// Another account's session names that account's deployment (embed-svc checked
		// it at the mint, and signed it into the token).
		globex := e.embedSession(e.dep("globex", 0), "u-1", nil)
		globex.Account.ID = e.stack.Seed.Accounts["globex"].ID
		for _, tc := range []struct {
			name, id string
			p        *identity.Principal
		}{
			{"malformed", "not-an-id", viewer},
			{"too long", revenue + "A", viewer},
			{"another deployment's", elsewhere, viewer},
			{"allowEmbed false", noEmbed, viewer},
			{"archived", archived, viewer},
			{"no grant", atRoot, viewer},
			{"explicit none", none, viewer},
			{"deleted", deleted, viewer},
			{"excluded by resources", revenue, e.embedSession(dep, "u-1", nil, atRoot)},
			{"a session of the other deployment", revenue, e.embedSession(otherDep, "u-1", nil)},
			{"another account's session", revenue, globex},
			{"another tenant's session", revenue, func() *identity.Principal {
				p := e.embedSession(dep, "u-1", nil)
				p.Embed.Tenant = "globex-inc"
				return p
			}()},
		} {
			for i, b := range replicas {
				sameNotFound(t, fmt.Sprint(tc.name, " on replica ", i), e.embedGet(t, b, embedPath(tc.id), tc.p), tc.id, base, unknown)
			}
		}
		// An id of another deployment's dashboard, asked by a session of that deployment,
		// opens: the refusal above was the session's deployment, not the id.
		if !opens(t, e.embedSession(otherDep, "u-1", nil), elsewhere) {
			t.Fatal("the other deployment's own session does not open its dashboard")
		}
	})

	t.Run("the listing", func(t *testing.T) {
		for _, b := range replicas {
			r := e.embedGet(t, b, "/api/v1/embed/dashboards?first=10", viewer)
			var page struct {
				Items []map[string]any `json:"items"`
			}
			r.Decode(t, &page)
			if r.Status != 200 || len(page.Items) != 1 || page.Items[0]["publicId"] != revenue || page.Items[0]["title"] != "Revenue" ||
				page.Items[0]["accessSource"] != "folder" || page.Items[0]["workbookId"] != float64(revenueID) {
				t.Fatalf("listing: %d %s", r.Status, r.Body)
			}
		}
		if r := e.embedGet(t, replicas[0], "/api/v1/embed/dashboards?after=nonsense", viewer); r.Status != 400 {
			t.Fatalf("a bad cursor: %d %s", r.Status, r.Body)
		}
	})

	t.Run("a grant removed, a membership removed and a move take effect at once on every replica", func(t *testing.T) {
		financeAccess := fmt.Sprintf("/folders/%d/embed-access", finance)
		e.eaPut(t, dep, financeAccess, admin, map[string]any{})
		if opens(t, viewer, revenue) {
			t.Fatal("opened after the folder's grant was removed")
		}
		e.eaPut(t, dep, fmt.Sprintf("/workbooks/%d/embed-access", revenueID), admin,
			map[string]any{"groups": []any{map[string]any{"scope": "account", "groupName": "finance", "access": "read"}}})
		if opens(t, viewer, revenue) {
			t.Fatal("opened by a group the viewer is not a member of")
		}
		groups.set(acme.ID, "acme-corp", "u-1", "finance")
		if !opens(t, viewer, revenue) {
			t.Fatal("a member of the group granted does not open it")
		}
		groups.set(acme.ID, "acme-corp", "u-1")
		if opens(t, viewer, revenue) {
			t.Fatal("opened after the membership was removed")
		}
		e.eaPut(t, dep, fmt.Sprintf("/workbooks/%d/embed-access", revenueID), admin, map[string]any{})
		e.eaPut(t, dep, financeAccess, admin, map[string]any{"tenants": eaTenants("read", "acme-corp")})
		if !opens(t, viewer, revenue) {
			t.Fatal("not opened once the folder's grant is back")
		}
		move := func(to any) {
			t.Helper()
			if r := e.do(t, "POST", depPath(dep, "/workspace/move"), admin, map[string]any{"type": "FOLDER", "id": emea, "folderId": to}); r.Status != 200 {
				t.Fatalf("move: %d %s", r.Status, r.Body)
			}
		}
		move(nil)
		if opens(t, viewer, revenue) {
			t.Fatal("opened after its folder moved out of the granted folder")
		}
		move(finance)
		if !opens(t, viewer, revenue) {
			t.Fatal("not opened after its folder moved back")
		}
	})

	t.Run("narrowing", func(t *testing.T) {
		only := e.embedSession(dep, "u-1", nil, revenue, "AAAAAAAAAAAAAAAA")
		if !opens(t, only, revenue) {
			t.Fatal("a session narrowed to a dashboard it may open does not open it")
		}
		nothing := e.embedSession(dep, "u-1", nil, atRoot)
		r := e.embedGet(t, replicas[0], "/api/v1/embed/dashboards", nothing)
		if r.Status != 200 || !strings.Contains(string(r.Body), `"items":[]`) {
			t.Fatalf("narrowed to what its grants refuse: %d %s", r.Status, r.Body)
		}
	})

	t.Run("internal users follow their own access", func(t *testing.T) {
		u := e.user("acme", "viewer")
		internal := e.embedSession(dep, u.Email, &u)
		if !opens(t, internal, atRoot) || opens(t, internal, revenue) || opens(t, internal, noEmbed) {
			t.Fatal("an internal viewer's access is not their own: at the root yes, in an admin's folder and without allowEmbed no")
		}
		if r := e.do(t, "PUT", depPath(dep, fmt.Sprintf("/folders/%d/permissions", finance)), admin,
			map[string]any{"grants": []any{map[string]any{"userId": u.ID, "level": "view"}}}); r.Status != 200 {
			t.Fatalf("grant view: %d %s", r.Status, r.Body)
		}
		if !opens(t, internal, revenue) {
			t.Fatal("an internal viewer granted view on the folder does not open its dashboard")
		}
	})

	t.Run("a read's cost is fixed", func(t *testing.T) {
		counter.Reset()
		if r := e.embedGet(t, replicas[0], embedPath(revenue), viewer); r.Status != 200 {
			t.Fatalf("GET: %d %s", r.Status, r.Body)
		}
		if n := counter.Total(); n > 4 {
			t.Fatalf("one dashboard cost %d commands (%v): want the workbook, its folder, the folder's ancestors and the root", n, counter.ByName())
		}
	})

	t.Run("the lookup unavailable is 503", func(t *testing.T) {
		groups.failing(true)
		defer groups.failing(false)
		for _, path := range []string{embedPath(revenue), embedPath("AAAAAAAAAAAAAAAA"), "/api/v1/embed/dashboards"} {
			if r := e.embedGet(t, replicas[1], path, viewer); r.Status != 503 {
				t.Fatalf("GET %s with the lookup down: %d %s", path, r.Status, r.Body)
			}
		}
	})

	t.Run("other credentials are refused", func(t *testing.T) {
		if r := e.do(t, "GET", depPath(dep, "/workspace"), admin, nil); r.Status != 200 {
			t.Fatalf("the bearer's own route: %d", r.Status)
		}
		p := e.embedSession(dep, "u-1", nil)
		p.Credential = identity.CredentialBearer
		if r := e.embedGet(t, replicas[0], embedPath(revenue), p); r.Status != 403 {
			t.Fatalf("a bearer principal on the embed route: %d %s", r.Status, r.Body)
		}
	})
}

// TestEmbedViewerLookupAndReachOverNATS: workspace-svc asks embed-svc for a viewer's
// groups and answers embed-svc's dashboard reach over the real NATS with the platform
// users' permissions; no other process may ask the reach.
func TestEmbedViewerLookupAndReachOverNATS(t *testing.T) {
	e := newEnv(t, 1)
	acme := e.acme()
	dep := e.dep("acme", 0)
	admin := e.bearer("acme", "admin")
	ns := devstack.NATSForTest(t, devstack.NATSUsersOnly())
	workspaceNC := devstack.NATSConnForTest(t, ns.UserURL("workspace-svc"))
	embedNC := devstack.NATSConnForTest(t, ns.UserURL("embed-svc"))

	// embed-svc's side: the viewer lookup, from a table the test changes.
	groups := newGroupsFake()
	srv := natsx.NewServer(embedNC, natsx.ServerOptions{})
	t.Cleanup(func() { _ = srv.Close() })
	if err := client.Serve(srv, groups.Groups); err != nil {
		t.Fatal(err)
	}
	base := e.embedInstance(t, nil, workspaceNC, nil)

	folder := e.mkFolder(t, dep, admin, "Board", 0)
	wbID, publicID := e.board(t, dep, "Quarterly", folder, 0, nil)
	e.eaPut(t, dep, fmt.Sprintf("/folders/%d/embed-access", folder), admin,
		map[string]any{"groups": []any{map[string]any{"scope": "account", "groupName": "finance", "access": "read"}}})

	viewer := e.embedSession(dep, "u-7", nil)
	if r := e.embedGet(t, base, embedPath(publicID), viewer); r.Status != 404 {
		t.Fatalf("before the membership: %d %s", r.Status, r.Body)
	}
	groups.set(acme.ID, "acme-corp", "u-7", "finance")
	if r := e.embedGet(t, base, embedPath(publicID), viewer); r.Status != 200 {
		t.Fatalf("a member, asked over NATS: %d %s", r.Status, r.Body)
	}

	// embed-svc asks the reach.
	reach := client.NewReach(natsx.NewClient(embedNC, natsx.ClientOptions{}), 5*time.Second)
	ctx := context.Background()
	got, err := reach.Dashboards(ctx, client.ReachRequest{AccountID: acme.ID, DeploymentID: dep, EmbedTenantName: "acme-corp", AccountGroups: []string{"finance"}})
	if err != nil || got.Truncated || len(got.Dashboards) != 1 {
		t.Fatalf("reach: %+v %v", got, err)
	}
	d := got.Dashboards[0]
	if d.PublicID != publicID || d.WorkbookID != wbID || d.AccessSource != "folder" || d.ViaFolderID == nil || *d.ViaFolderID != folder ||
		d.Subject.Type != "group" || d.Subject.GroupName != "finance" || d.Title == nil || *d.Title != "Quarterly" {
		t.Fatalf("reach entry %+v", d)
	}
	got, err = reach.Dashboards(ctx, client.ReachRequest{AccountID: acme.ID, DeploymentID: dep, EmbedTenantName: "acme-corp"})
	if err != nil || len(got.Dashboards) != 0 {
		t.Fatalf("reach without the group: %+v %v", got, err)
	}
	if _, err := reach.Dashboards(ctx, client.ReachRequest{DeploymentID: dep}); err == nil {
		t.Fatal("an invalid reach request was answered")
	} else if e, ok := errs.As(err); !ok || e.Kind != errs.Invalid {
		t.Fatalf("an invalid reach request: %v, want a typed 400", err)
	}

	// Nobody but embed-svc may ask the reach: the gateway's and the worker's publishes
	// are refused, so their requests find no answer.
	for _, user := range []string{"gateway", "dbtsync-worker", "dbtsync-svc"} {
		nc := devstack.NATSConnForTest(t, ns.UserURL(user))
		other := client.NewReach(natsx.NewClient(nc, natsx.ClientOptions{}), 500*time.Millisecond)
		if _, err := other.Dashboards(ctx, client.ReachRequest{AccountID: acme.ID, DeploymentID: dep, AccountGroups: []string{"finance"}}); !errors.Is(err, client.ErrReachUnavailable) {
			t.Errorf("%s asked the reach: %v, want no answer", user, err)
		}
	}

	// Without embed-svc answering, the viewer's read is 503, never a 404 or a dashboard,
	// and no other process can answer in its place: its subscription is refused.
	_ = srv.Close()
	impostor := natsx.NewServer(devstack.NATSConnForTest(t, ns.UserURL("dbtsync-worker")), natsx.ServerOptions{})
	t.Cleanup(func() { _ = impostor.Close() })
	_ = client.Serve(impostor, func(context.Context, client.ViewerRequest) (client.ViewerReply, error) {
		return client.ViewerReply{AccountGroups: []string{"finance"}}, nil
	})
	start := time.Now()
	r := e.embedGet(t, base, embedPath(publicID), viewer)
	if r.Status != 503 {
		t.Fatalf("without embed-svc: %d %s", r.Status, r.Body)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("without embed-svc the answer took %s, past the lookup's timeout", el)
	}
}
