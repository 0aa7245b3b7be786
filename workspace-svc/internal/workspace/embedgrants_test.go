package workspace_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// grantsFixture is the fixture with the store's commands counted, by method.
type grantsFixture struct {
	*fixture
	mu    sync.Mutex
	calls map[string]int
}

func newGrantsFixture(t *testing.T, limits workspace.Limits) *grantsFixture {
	f := &grantsFixture{fixture: newFixture(t), calls: map[string]int{}}
	f.store.Fault = func(method string) error {
		f.mu.Lock()
		f.calls[method]++
		f.mu.Unlock()
		return nil
	}
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: limits})
	return f
}

// commands runs fn and returns the store's commands it sent, by method.
func (f *grantsFixture) commands(fn func()) map[string]int {
	f.mu.Lock()
	f.calls = map[string]int{}
	f.mu.Unlock()
	fn()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

var (
	rootObj = workspace.EmbedObject{}
	tRead   = func(name string) embedaccess.TenantEntry {
		return embedaccess.TenantEntry{EmbedTenantName: name, Access: embedaccess.Read}
	}
	tNone = func(name string) embedaccess.TenantEntry {
		return embedaccess.TenantEntry{EmbedTenantName: name, Access: embedaccess.None}
	}
)

func wbObj(id int64) workspace.EmbedObject {
	return workspace.EmbedObject{Type: workspace.TypeWorkbook, ID: id}
}
func folderObj(id int64) workspace.EmbedObject {
	return workspace.EmbedObject{Type: workspace.TypeFolder, ID: id}
}

func (f *fixture) putEmbed(p *identity.Principal, obj workspace.EmbedObject, g embedaccess.Grants) workspace.EmbedAccessView {
	f.t.Helper()
	v, err := f.svc.PutEmbedAccess(f.ctx, p, f.dep, obj, g)
	if err != nil {
		f.t.Fatalf("put embed access on %+v: %v", obj, err)
	}
	return v
}

// publishedWorkbook creates a workbook in folder and publishes its dashboard with allowEmbed.
func (f *fixture) publishedWorkbook(name string, folder int64, allowEmbed bool) (int64, string) {
	f.t.Helper()
	w, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook,
		workspace.CreateItemInput{Name: name, FolderID: folder, DashboardDraft: &workspace.DashboardConfig{}})
	if err != nil {
		f.t.Fatal(err)
	}
	pub, err := f.svc.Publish(f.ctx, admin, f.dep, w.ID, &allowEmbed)
	if err != nil {
		f.t.Fatal(err)
	}
	return w.ID, pub.PublishedDashboard.PublicID
}

func ptr[T any](v T) *T { return &v }

// TestEmbedAccessGetAndPut: a PUT replaces an object's own grants (in a stable order:
// tenants by name, groups by scope, tenant and name) and answers them with what the
// object inherits, nearest first: each folder above it with an entry, then the root; a
// GET answers the same.
func TestEmbedAccessGetAndPut(t *testing.T) {
	f := newFixture(t)
	top := f.folder(admin, "Top", 0)
	mid := f.folder(admin, "Mid", top)
	low := f.folder(admin, "Low", mid)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", low)

	own := embedaccess.Grants{AllEmbedUsers: embedaccess.None,
		Tenants: []embedaccess.TenantEntry{tRead("zeta-corp"), tNone("acme-corp")},
		Groups: []embedaccess.GroupEntry{{Scope: "tenant", EmbedTenantName: "acme-corp", GroupName: "ops", Access: embedaccess.Read},
			{Scope: "account", GroupName: "sales", Access: embedaccess.None}}}
	got := f.putEmbed(admin, wbObj(wb), own)
	want := embedaccess.Grants{AllEmbedUsers: embedaccess.None,
		Tenants: []embedaccess.TenantEntry{tNone("acme-corp"), tRead("zeta-corp")},
		Groups: []embedaccess.GroupEntry{{Scope: "account", GroupName: "sales", Access: embedaccess.None},
			{Scope: "tenant", EmbedTenantName: "acme-corp", GroupName: "ops", Access: embedaccess.Read}}}
	if !reflect.DeepEqual(got.Grants, want) || len(got.Inherited) != 0 || !got.Changed {
		t.Fatalf("put answered %+v, want own %+v and nothing inherited", got, want)
	}

	f.putEmbed(admin, folderObj(top), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp")}})
	f.putEmbed(admin, folderObj(low), embedaccess.Grants{AllEmbedUsers: embedaccess.Read})
	f.putEmbed(admin, rootObj, embedaccess.Grants{AllEmbedUsers: embedaccess.None})
	v, err := f.svc.GetEmbedAccess(f.ctx, admin, f.dep, wbObj(wb))
	if err != nil {
		t.Fatal(err)
	}
	wantInherited := []workspace.InheritedEmbedAccess{
		{Source: "folder", FolderID: ptr(low), FolderName: ptr("Low"), Grants: embedaccess.Grants{AllEmbedUsers: embedaccess.Read, Tenants: []embedaccess.TenantEntry{}, Groups: []embedaccess.GroupEntry{}}},
		{Source: "folder", FolderID: ptr(top), FolderName: ptr("Top"), Grants: embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp")}, Groups: []embedaccess.GroupEntry{}}},
		{Source: "root", Grants: embedaccess.Grants{AllEmbedUsers: embedaccess.None, Tenants: []embedaccess.TenantEntry{}, Groups: []embedaccess.GroupEntry{}}},
	}
	if !reflect.DeepEqual(v.Grants, want) || !reflect.DeepEqual(v.Inherited, wantInherited) {
		t.Fatalf("get answered %+v, want own %+v and inherited %+v", v, want, wantInherited)
	}
	// The folder's own view: what is above it only.
	fv, err := f.svc.GetEmbedAccess(f.ctx, admin, f.dep, folderObj(mid))
	if err != nil {
		t.Fatal(err)
	}
	if !fv.Empty() || len(fv.Inherited) != 2 || *fv.Inherited[0].FolderID != top || fv.Inherited[1].Source != "root" {
		t.Fatalf("mid folder's view %+v", fv)
	}
	// The root's own view inherits nothing.
	rv, err := f.svc.GetEmbedAccess(f.ctx, admin, f.dep, rootObj)
	if err != nil {
		t.Fatal(err)
	}
	if rv.AllEmbedUsers != embedaccess.None || len(rv.Inherited) != 0 {
		t.Fatalf("root's view %+v", rv)
	}

	// An empty PUT clears the object's own grants.
	cleared := f.putEmbed(admin, folderObj(low), embedaccess.Grants{})
	if !cleared.Changed || !cleared.Empty() || cleared.Tenants == nil || cleared.Groups == nil {
		t.Fatalf("cleared %+v", cleared)
	}
	if v, _ := f.svc.GetEmbedAccess(f.ctx, admin, f.dep, wbObj(wb)); len(v.Inherited) != 2 {
		t.Fatalf("after clearing the low folder, inherited %+v", v.Inherited)
	}
}

// TestEmbedAccessGetBodySentBackChangesNothing: over HTTP, the body of a GET sent back
// as a PUT is accepted (inherited is ignored), writes nothing and answers the same body.
func TestEmbedAccessGetBodySentBackChangesNothing(t *testing.T) {
	f := newGrantsFixture(t, workspace.Limits{})
	folder := f.folder(admin, "F", 0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", folder)
	f.putEmbed(admin, folderObj(folder), embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: "account", GroupName: "g", Access: embedaccess.Read}}})
	f.putEmbed(admin, wbObj(wb), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tNone("acme-corp")}})
	path := fmt.Sprintf("/api/v1/deployments/7/workbooks/%d/embed-access", wb)
	get := f.serve(admin, "GET", path, "")
	if get.Code != 200 {
		t.Fatalf("GET %d %s", get.Code, get.Body)
	}
	wantBody := fmt.Sprintf(`{"tenants":[{"embedTenantName":"acme-corp","access":"none"}],"groups":[],"inherited":[`+
		`{"source":"folder","folderId":%d,"folderName":"F","tenants":[],"groups":[{"scope":"account","groupName":"g","access":"read"}]}]}`, folder)
	if strings.TrimSpace(get.Body.String()) != wantBody {
		t.Fatalf("GET body\n%s\nwant\n%s", get.Body, wantBody)
	}
	var put = map[string]int{}
	var body string
	put = f.commands(func() {
		w := f.serve(admin, "PUT", path, get.Body.String())
		if w.Code != 200 {
			t.Fatalf("PUT of the GET's body: %d %s", w.Code, w.Body)
		}
		body = w.Body.String()
	})
	if body != get.Body.String() {
		t.Fatalf("PUT answered\n%s\nthe GET\n%s", body, get.Body)
	}
	if put["SetEmbedAccess"] != 0 || put["SetRootEmbedAccess"] != 0 {
		t.Fatalf("a PUT of the grants already there wrote: %v", put)
	}
	// The same entries in another order are the same grants.
	f.putEmbed(admin, wbObj(wb), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("beta-corp"), tRead("alpha-corp")}})
	v := f.putEmbed(admin, wbObj(wb), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("alpha-corp"), tRead("beta-corp")}})
	if v.Changed {
		t.Fatal("reordered entries counted as a change")
	}
}

// TestEmbedAccessHTTPDecoding: the PUT body follows the service's strict decoding, and
// each route's path is checked.
func TestEmbedAccessHTTPDecoding(t *testing.T) {
	f := newFixture(t)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
	wbPath := fmt.Sprintf("/api/v1/deployments/7/workbooks/%d/embed-access", wb)
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"put-400-unknown-field", "PUT", wbPath, `{"tenants":[],"owner":1}`, 400, `unknown field "owner"`},
		{"put-400-unknown-entry-field", "PUT", wbPath, `{"tenants":[{"embedTenantName":"acme-corp","access":"read","level":"x"}]}`, 400, `unknown field "level"`},
		{"put-400-access-not-a-string", "PUT", wbPath, `{"allEmbedUsers":true}`, 400, `field "allEmbedUsers" must be`},
		{"put-400-not-an-object", "PUT", wbPath, `[]`, 400, "request body must be"},
		{"put-400-empty-body", "PUT", wbPath, ``, 400, ""},
		{"put-400-bad-access", "PUT", wbPath, `{"allEmbedUsers":"write"}`, 400, `allEmbedUsers must be "read" or "none", not "write"`},
		{"put-200-inherited-ignored", "PUT", wbPath, `{"allEmbedUsers":"read","inherited":[{"source":"root","folderId":null,"allEmbedUsers":"none"}]}`, 200, ""},
		{"put-200-null-lists", "PUT", wbPath, `{"allEmbedUsers":null,"tenants":null,"groups":null}`, 200, ""},
		{"get-400-bad-workbook-id", "GET", "/api/v1/deployments/7/workbooks/x/embed-access", "", 400, `workbookId in the path must be a positive integer, not "x"`},
		{"get-400-bad-folder-id", "GET", "/api/v1/deployments/7/folders/0/embed-access", "", 400, `folderId in the path must be a positive integer, not "0"`},
		{"get-404-another-deployment-in-the-path", "GET", fmt.Sprintf("/api/v1/deployments/8/workbooks/%d/embed-access", wb), "", 404, "deployment 8 not found"},
		{"get-404-unknown-workbook", "GET", "/api/v1/deployments/7/workbooks/999999/embed-access", "", 404, "workbook 999999 not found"},
		{"put-404-unknown-folder", "PUT", "/api/v1/deployments/7/folders/999999/embed-access", `{}`, 404, "folder 999999 not found"},
		{"tenant-listing-400-bad-tenant", "GET", "/api/v1/deployments/7/embed-tenants/Acme/workbooks", "", 400, `embedTenantName "Acme" is invalid`},
		{"tenant-listing-400-long-tenant-not-echoed", "GET", "/api/v1/deployments/7/embed-tenants/" + strings.Repeat("a", 100) + "/workbooks", "", 400, "embedTenantName in the path is invalid"},
		{"tenant-listing-400-bad-access-source", "GET", "/api/v1/deployments/7/embed-tenants/acme-corp/workbooks?accessSource=user", "", 400,
			`accessSource must be one of tenant, group, allEmbedUsers, folder, not "user"`},
		{"tenant-listing-400-bad-first", "GET", "/api/v1/deployments/7/embed-tenants/acme-corp/workbooks?first=0", "", 400, "first must be"},
		{"tenant-listing-400-bad-cursor", "GET", "/api/v1/deployments/7/embed-tenants/acme-corp/workbooks?after=xyz", "", 400, httpx.ErrBadCursor.Error()},
		{"tenant-listing-400-cursor-of-another-list", "GET", "/api/v1/deployments/7/embed-tenants/acme-corp/workbooks?after=" + httpx.EncodeCursor(map[string]int{"w": 0}), "", 400, httpx.ErrBadCursor.Error()},
		{"tenant-listing-200", "GET", "/api/v1/deployments/7/embed-tenants/acme-corp/workbooks?accessSource=folder", "", 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := f.serve(admin, c.method, c.path, c.body)
			if c.body == "" && c.method == "PUT" {
				w = f.serve(admin, c.method, c.path, " ")
			}
			if w.Code != c.status {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, c.status)
			}
			if c.status != 200 {
				if m := decodeJSON(t, w); !strings.Contains(fmt.Sprint(m["message"]), c.msg) || m["code"] == "" {
					t.Fatalf("%s, want a message with %q", w.Body, c.msg)
				}
			}
		})
	}
	v, _ := f.svc.GetEmbedAccess(f.ctx, admin, f.dep, wbObj(wb))
	if v.AllEmbedUsers != "" || v.Entries() != 0 {
		t.Fatalf("after the last PUT (null lists) the workbook holds %+v", v.Grants)
	}
}

// TestEmbedAccessWhoMay: a workbook's or folder's embed access needs manage on it by the
// folder rules (its creator, a manage grant above it, admins; a viewer never more than
// view), the root's and a tenant's listing an admin; only a user's bearer token.
func TestEmbedAccessWhoMay(t *testing.T) {
	f := newFixture(t)
	shared := f.folder(admin, "shared", 0)
	f.grant(shared, workspace.Grant{UserID: ai.User.ID, Level: "manage"}, workspace.Grant{UserID: viewer.User.ID, Level: "manage"},
		workspace.Grant{UserID: dev.User.ID, Level: "edit"})
	sub := f.folder(admin, "sub", shared)
	inShared := f.item(admin, workspace.TypeWorkbook, "in shared", sub)
	aisOwn := f.item(ai, workspace.TypeWorkbook, "ai's own", 0)
	apiKey := &identity.Principal{Credential: identity.CredentialAPIKey, KeyKind: identity.KeyPersonal, Account: identity.Account{ID: 100},
		User: admin.User, Deployment: &identity.Deployment{ID: 7}}
	embedInternal := &identity.Principal{Credential: identity.CredentialEmbed, Account: identity.Account{ID: 100}, User: admin.User,
		Embed: &identity.Embed{SessionID: "s", Subject: "a@example.com", DeploymentID: 7, Internal: true}}
	for _, c := range []struct {
		name string
		who  *identity.Principal
		obj  workspace.EmbedObject
		want errs.Kind // 0: allowed
	}{
		{"admin on the root", admin, rootObj, 0},
		{"developer on the root", dev, rootObj, errs.Forbidden},
		{"admin on a workbook", admin, wbObj(inShared), 0},
		{"manager of the folder above", ai, wbObj(inShared), 0},
		{"manager of the folder above, on the subfolder", ai, folderObj(sub), 0},
		{"manager of the folder itself", ai, folderObj(shared), 0},
		{"editor of the folder above", dev, wbObj(inShared), errs.Forbidden},
		{"viewer granted manage is capped at view", viewer, folderObj(sub), errs.Forbidden},
		{"creator of a workbook at the root", ai, wbObj(aisOwn), 0},
		{"another user on a workbook at the root", dev, wbObj(aisOwn), errs.Forbidden},
		{"a personal API key", apiKey, wbObj(inShared), errs.Forbidden},
		{"an internal user's embed token", embedInternal, wbObj(inShared), errs.Forbidden},
		{"no principal", nil, wbObj(inShared), errs.Forbidden},
		{"a report is not an embed object", admin, workspace.EmbedObject{Type: workspace.TypeReport, ID: inShared}, errs.Invalid},
		{"another deployment's workbook is not found", admin, wbObj(f.otherDeploymentWorkbook()), errs.NotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, gerr := f.svc.GetEmbedAccess(f.ctx, c.who, f.dep, c.obj)
			_, perr := f.svc.PutEmbedAccess(f.ctx, c.who, f.dep, c.obj, embedaccess.Grants{AllEmbedUsers: embedaccess.Read})
			for verb, err := range map[string]error{"GET": gerr, "PUT": perr} {
				if c.want == 0 {
					if err != nil {
						t.Errorf("%s refused: %v", verb, err)
					}
					continue
				}
				if e, ok := errs.As(err); !ok || e.Kind != c.want {
					t.Errorf("%s: %v, want kind %d", verb, err, c.want)
				}
			}
		})
	}
	for _, c := range []struct {
		name string
		who  *identity.Principal
		ok   bool
	}{{"admin", admin, true}, {"developer", dev, false}, {"viewer", viewer, false}, {"api key", apiKey, false}, {"embed token", embedInternal, false}} {
		t.Run("tenant listing by "+c.name, func(t *testing.T) {
			_, err := f.svc.TenantWorkbooks(f.ctx, c.who, f.dep, "acme-corp", workspace.TenantWorkbooksInput{})
			if e, isErr := errs.As(err); (err == nil) != c.ok || (err != nil && (!isErr || e.Kind != errs.Forbidden)) {
				t.Fatalf("%v, want allowed %v", err, c.ok)
			}
		})
	}
}

// otherDeploymentWorkbook creates a workbook in deployment 8.
func (f *fixture) otherDeploymentWorkbook() int64 {
	f.t.Helper()
	other := principal(1, identity.RoleAdmin)
	other.Deployment = &identity.Deployment{ID: 8}
	w, err := f.svc.CreateItem(f.ctx, other, 8, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "theirs"})
	if err != nil {
		f.t.Fatal(err)
	}
	return w.ID
}

// TestEmbedAccessRefusalsChangeNothing: every refused PUT leaves the grants as they were
// and writes nothing.
func TestEmbedAccessRefusalsChangeNothing(t *testing.T) {
	f := newGrantsFixture(t, workspace.Limits{EmbedAccessEntries: 3})
	wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
	gone := f.item(admin, workspace.TypeWorkbook, "gone", 0)
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, gone); err != nil {
		t.Fatal(err)
	}
	before := f.putEmbed(admin, wbObj(wb), embedaccess.Grants{AllEmbedUsers: embedaccess.Read})
	tenants := func(n int) []embedaccess.TenantEntry {
		out := make([]embedaccess.TenantEntry, n)
		for i := range out {
			out[i] = tRead(fmt.Sprintf("tenant-%d", i))
		}
		return out
	}
	for _, c := range []struct {
		name string
		who  *identity.Principal
		obj  workspace.EmbedObject
		g    embedaccess.Grants
		kind errs.Kind
		code string
		msg  string
	}{
		{"over the configured limit", admin, wbObj(wb), embedaccess.Grants{AllEmbedUsers: embedaccess.None, Tenants: tenants(3)}, errs.Invalid, errs.CodeEmbedAccessLimit, "at most 3"},
		{"a duplicate tenant", admin, wbObj(wb), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp"), tNone("acme-corp")}}, errs.Invalid, "", "more than one entry"},
		{"a bad group", admin, wbObj(wb), embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: "tenant", GroupName: "g", Access: embedaccess.Read}}}, errs.Invalid, "", "needs a valid embedTenantName"},
		{"a deleted workbook", admin, wbObj(gone), embedaccess.Grants{AllEmbedUsers: embedaccess.None}, errs.NotFound, "", fmt.Sprintf("workbook %d not found", gone)},
		{"a forbidden caller", viewer, wbObj(wb), embedaccess.Grants{AllEmbedUsers: embedaccess.None}, errs.Forbidden, "", "you need manage access to workbook"},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := f.commands(func() {
				_, err := f.svc.PutEmbedAccess(f.ctx, c.who, f.dep, c.obj, c.g)
				e := wantErr(t, err, c.kind, c.code)
				if !strings.Contains(e.Message, c.msg) {
					t.Fatalf("message %q, want it to say %q", e.Message, c.msg)
				}
			})
			if calls["SetEmbedAccess"] != 0 || calls["SetRootEmbedAccess"] != 0 {
				t.Fatalf("a refused PUT wrote: %v", calls)
			}
			if c.kind == errs.Invalid && len(calls) != 0 {
				t.Fatalf("an invalid PUT read the store before refusing: %v", calls)
			}
		})
	}
	after, err := f.svc.GetEmbedAccess(f.ctx, admin, f.dep, wbObj(wb))
	if err != nil || !reflect.DeepEqual(after.Grants, before.Grants) {
		t.Fatalf("after the refusals %+v %v, want %+v", after.Grants, err, before.Grants)
	}
}

// TestEmbedAccessInheritedNamesOnlyWhatTheCallerViews: a manager of a subfolder sees the
// grants of the folders above it (they decide its effective access) but not the names of
// those they cannot view.
func TestEmbedAccessInheritedNamesOnlyWhatTheCallerViews(t *testing.T) {
	f := newFixture(t)
	private := f.folder(admin, "Board only", 0)
	sub := f.folder(admin, "Team", private)
	f.grant(sub, workspace.Grant{UserID: ai.User.ID, Level: "manage"})
	f.putEmbed(admin, folderObj(private), embedaccess.Grants{AllEmbedUsers: embedaccess.Read})
	v, err := f.svc.GetEmbedAccess(f.ctx, ai, f.dep, folderObj(sub))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Inherited) != 1 || *v.Inherited[0].FolderID != private || v.Inherited[0].FolderName != nil || v.Inherited[0].AllEmbedUsers != embedaccess.Read {
		t.Fatalf("inherited %+v, want the private folder's grants without its name", v.Inherited)
	}
	raw, _ := json.Marshal(v)
	if strings.Contains(string(raw), "Board only") || strings.Contains(string(raw), "folderName") {
		t.Fatalf("answer %s names the private folder", raw)
	}
}

// TestEmbedAccessFollowsAFolderMove: a workbook's inherited grants are those of wherever
// its folder is now.
func TestEmbedAccessFollowsAFolderMove(t *testing.T) {
	f := newFixture(t)
	a := f.folder(admin, "A", 0)
	b := f.folder(admin, "B", 0)
	child := f.folder(admin, "child", a)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", child)
	f.putEmbed(admin, folderObj(a), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp")}})
	f.putEmbed(admin, folderObj(b), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tNone("acme-corp")}})
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeFolder, child), b); err != nil {
		t.Fatal(err)
	}
	v, err := f.svc.GetEmbedAccess(f.ctx, admin, f.dep, wbObj(wb))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Inherited) != 1 || *v.Inherited[0].FolderID != b || v.Inherited[0].Tenants[0].Access != embedaccess.None {
		t.Fatalf("inherited after the move %+v, want B's only", v.Inherited)
	}
	page, err := f.svc.TenantWorkbooks(f.ctx, admin, f.dep, "acme-corp", workspace.TenantWorkbooksInput{})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("the tenant's listing after the move: %+v %v, want nothing (B says none)", page.Items, err)
	}
}

// TestEmbedAccessAuditEvents: one event per PUT that changed something, listing what it
// changed; none for a PUT of the grants already there; refused PUTs recorded as failures.
func TestEmbedAccessAuditEvents(t *testing.T) {
	f := newFixture(t)
	rec := &audit.Memory{Service: "workspace-svc"}
	f.svc = workspace.AuditingMiddleware(rec)(f.svc)
	folder := f.folder(admin, "F", 0)
	rec.Reset()
	one := func(t *testing.T) audit.Event {
		t.Helper()
		evs := rec.Events()
		rec.Reset()
		if len(evs) != 1 {
			t.Fatalf("%d events, want 1: %+v", len(evs), evs)
		}
		return evs[0]
	}
	g := embedaccess.Grants{AllEmbedUsers: embedaccess.Read, Tenants: []embedaccess.TenantEntry{tRead("acme-corp")},
		Groups: []embedaccess.GroupEntry{{Scope: "tenant", EmbedTenantName: "acme-corp", GroupName: "ops", Access: embedaccess.None}}}
	f.putEmbed(admin, folderObj(folder), g)
	ev := one(t)
	want := map[string]any{"entriesBefore": 0, "entriesAfter": 3, "changes": []map[string]any{
		{"subject": "allEmbedUsers", "after": "read"},
		{"subject": "group:tenant:acme-corp:ops", "after": "none"},
		{"subject": "tenant:acme-corp", "after": "read"}}}
	if ev.Action != "workspace.folder.embed_access_change" || ev.Target != (audit.Target{Type: "folder", ID: jsonID(folder)}) ||
		ev.Outcome != audit.Succeeded(200) || !reflect.DeepEqual(ev.Details, want) {
		t.Fatalf("event %+v, want details %v", ev, want)
	}

	f.putEmbed(admin, folderObj(folder), g)
	if evs := rec.Events(); len(evs) != 0 {
		t.Fatalf("a PUT of the grants already there recorded %+v", evs)
	}

	g2 := embedaccess.Grants{AllEmbedUsers: embedaccess.Read, Tenants: []embedaccess.TenantEntry{tNone("acme-corp")}}
	f.putEmbed(admin, folderObj(folder), g2)
	want = map[string]any{"entriesBefore": 3, "entriesAfter": 2, "changes": []map[string]any{
		{"subject": "group:tenant:acme-corp:ops", "before": "none"},
		{"subject": "tenant:acme-corp", "before": "read", "after": "none"}}}
	if ev := one(t); !reflect.DeepEqual(ev.Details, want) {
		t.Fatalf("details %v, want %v", ev.Details, want)
	}

	f.putEmbed(admin, rootObj, embedaccess.Grants{AllEmbedUsers: embedaccess.None})
	if ev := one(t); ev.Action != "workspace.deployment.embed_access_change" || ev.Target != (audit.Target{Type: "deployment", ID: "7"}) {
		t.Fatalf("root event %+v", ev)
	}

	if _, err := f.svc.PutEmbedAccess(f.ctx, dev, f.dep, rootObj, embedaccess.Grants{}); err == nil {
		t.Fatal("a developer changed the root's grants")
	}
	if ev := one(t); ev.Outcome != audit.Failed(403, "forbidden") || ev.Action != "workspace.deployment.embed_access_change" {
		t.Fatalf("refused event %+v", ev)
	}
	if _, err := f.svc.PutEmbedAccess(f.ctx, admin, f.dep, wbObj(999999), embedaccess.Grants{AllEmbedUsers: "x"}); err == nil {
		t.Fatal("an invalid PUT was taken")
	}
	if ev := one(t); ev.Outcome != audit.Failed(400, "invalid_request") || ev.Action != "workspace.workbook.embed_access_change" ||
		ev.Target != (audit.Target{Type: "workbook", ID: "999999"}) || ev.Details["entries"] != 1 {
		t.Fatalf("refused event %+v", ev)
	}

	// Reads record nothing.
	_, _ = f.svc.GetEmbedAccess(f.ctx, admin, f.dep, folderObj(folder))
	_, _ = f.svc.TenantWorkbooks(f.ctx, admin, f.dep, "acme-corp", workspace.TenantWorkbooksInput{})
	if evs := rec.Events(); len(evs) != 0 {
		t.Fatalf("reads recorded %+v", evs)
	}
}

// TestEmbedAccessAuditEventIsBounded: a change of the most entries an object holds, with
// the longest names, lists as many changes as fit in the details' limit and counts the
// rest.
func TestEmbedAccessAuditEventIsBounded(t *testing.T) {
	f := newFixture(t)
	rec := &audit.Memory{Service: "workspace-svc"}
	f.svc = workspace.AuditingMiddleware(rec)(f.svc)
	g := embedaccess.Grants{}
	for i := range embedaccess.DefaultMaxEntries {
		g.Groups = append(g.Groups, embedaccess.GroupEntry{Scope: "tenant", EmbedTenantName: "tenant-with-a-long-name-0123456789ab",
			GroupName: fmt.Sprintf("%03d", i) + strings.Repeat("x", 252), Access: embedaccess.Read})
	}
	f.putEmbed(admin, rootObj, g)
	evs := rec.Events()
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	raw, _ := json.Marshal(evs[0].Details)
	changes, _ := evs[0].Details["changes"].([]map[string]any)
	unlisted, _ := evs[0].Details["unlisted"].(int)
	if len(raw) > audit.MaxDetailsBytes || len(changes) == 0 || len(changes)+unlisted != embedaccess.DefaultMaxEntries {
		t.Fatalf("details of %d bytes: %d listed, %d unlisted", len(raw), len(changes), unlisted)
	}
}

// tenantPage lists one page of acme-corp's workbooks.
func (f *grantsFixture) tenantPage(t *testing.T, in workspace.TenantWorkbooksInput) httpx.Page[workspace.TenantWorkbook] {
	t.Helper()
	page, err := f.svc.TenantWorkbooks(f.ctx, admin, f.dep, "acme-corp", in)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// TestTenantWorkbooksSaysWhichGrantDecided: each workbook a viewer of the tenant reads,
// by id, with the grant that decided it; accessSource filters by it.
func TestTenantWorkbooksSaysWhichGrantDecided(t *testing.T) {
	f := newGrantsFixture(t, workspace.Limits{})
	top := f.folder(admin, "top", 0)
	low := f.folder(admin, "low", top)
	byTenant, pub := f.publishedWorkbook("by tenant", 0, true)
	byGroup := f.item(admin, workspace.TypeWorkbook, "by group", 0)
	byAll := f.item(admin, workspace.TypeWorkbook, "by all", 0)
	byFolder := f.item(admin, workspace.TypeWorkbook, "by folder", low)
	byRoot := f.item(admin, workspace.TypeWorkbook, "by root", 0)
	deniedHere := f.item(admin, workspace.TypeWorkbook, "denied here", low)
	otherTenant := f.item(admin, workspace.TypeWorkbook, "other tenant", 0)
	f.putEmbed(admin, wbObj(byTenant), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp")}})
	f.putEmbed(admin, wbObj(byGroup), embedaccess.Grants{AllEmbedUsers: embedaccess.None,
		Groups: []embedaccess.GroupEntry{{Scope: "tenant", EmbedTenantName: "acme-corp", GroupName: "ops", Access: embedaccess.Read}}})
	f.putEmbed(admin, wbObj(byAll), embedaccess.Grants{AllEmbedUsers: embedaccess.Read})
	f.putEmbed(admin, folderObj(top), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp")}})
	f.putEmbed(admin, wbObj(deniedHere), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tNone("acme-corp")}})
	f.putEmbed(admin, wbObj(otherTenant), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("globex-inc")}, AllEmbedUsers: embedaccess.None})
	f.putEmbed(admin, rootObj, embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp"), tNone("globex-inc")}})
	// byRoot has no grant of its own and sits at the root.

	acme := embedaccess.Subject{Type: "tenant", EmbedTenantName: "acme-corp"}
	want := []workspace.TenantWorkbook{
		{WorkbookID: byTenant, Name: "by tenant", PublicID: &pub, Embeddable: true, AccessSource: "tenant", Subject: acme},
		{WorkbookID: byGroup, Name: "by group", AccessSource: "group", Subject: embedaccess.Subject{Type: "group", Scope: "tenant", EmbedTenantName: "acme-corp", GroupName: "ops"}},
		{WorkbookID: byAll, Name: "by all", AccessSource: "allEmbedUsers", Subject: embedaccess.Subject{Type: "allEmbedUsers"}},
		{WorkbookID: byFolder, Name: "by folder", FolderID: &low, AccessSource: "folder", Subject: acme, ViaFolderID: &top},
		{WorkbookID: byRoot, Name: "by root", AccessSource: "folder", Subject: acme, ViaRoot: true},
	}
	page := f.tenantPage(t, workspace.TenantWorkbooksInput{})
	if !reflect.DeepEqual(page.Items, want) || page.PageInfo.HasNextPage {
		got, _ := json.Marshal(page)
		t.Fatalf("listing %s\nwant %+v", got, want)
	}
	for _, c := range []struct {
		source string
		want   []int64
	}{
		{"tenant", []int64{byTenant}}, {"group", []int64{byGroup}}, {"allEmbedUsers", []int64{byAll}}, {"folder", []int64{byFolder, byRoot}},
	} {
		var got []int64
		for _, w := range f.tenantPage(t, workspace.TenantWorkbooksInput{AccessSource: c.source}).Items {
			got = append(got, w.WorkbookID)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("accessSource=%s: %v, want %v", c.source, got, c.want)
		}
	}
	// Another tenant: the root's none for it decides what its own grants do not.
	g, err := f.svc.TenantWorkbooks(f.ctx, admin, f.dep, "globex-inc", workspace.TenantWorkbooksInput{})
	if err != nil || len(g.Items) != 2 || g.Items[0].WorkbookID != byAll || g.Items[1].WorkbookID != otherTenant {
		t.Fatalf("globex-inc's listing %+v %v", g.Items, err)
	}
	// A tenant named nowhere reads only what every embed user reads.
	n, err := f.svc.TenantWorkbooks(f.ctx, admin, f.dep, "nobody-inc", workspace.TenantWorkbooksInput{})
	if err != nil || len(n.Items) != 1 || n.Items[0].WorkbookID != byAll {
		t.Fatalf("nobody-inc's listing %+v %v", n.Items, err)
	}
}

// TestTenantWorkbooksPagesAndStopsAtTheScanBudget: pages by workbook id with an opaque
// cursor; a page examines at most ListScan workbooks and then answers what it has with
// a cursor that goes on from the last one examined, so every reached workbook is listed
// once; what a page costs does not depend on the number of grants.
func TestTenantWorkbooksPagesAndStopsAtTheScanBudget(t *testing.T) {
	f := newGrantsFixture(t, workspace.Limits{ListScan: 4})
	folder := f.folder(admin, "f", 0)
	var reached []int64
	for i := range 13 {
		id := f.item(admin, workspace.TypeWorkbook, fmt.Sprintf("wb-%02d", i), folder)
		if i%3 == 0 {
			f.putEmbed(admin, wbObj(id), embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp")}})
			reached = append(reached, id)
		}
	}
	var got []int64
	after, pages := "", 0
	for {
		pages++
		if pages > 20 {
			t.Fatal("the listing does not end")
		}
		var page httpx.Page[workspace.TenantWorkbook]
		calls := f.commands(func() { page = f.tenantPage(t, workspace.TenantWorkbooksInput{First: 2, After: after}) })
		if len(page.Items) > 2 {
			t.Fatalf("page of %d items, first 2", len(page.Items))
		}
		if calls["WorkbookHeads"] != 1 || calls["Folders"] > 2 || calls["RootEmbedAccess"] != 1 {
			t.Fatalf("a page sent %v: want one batch of heads, at most two folder reads, the root once", calls)
		}
		for _, w := range page.Items {
			got = append(got, w.WorkbookID)
		}
		if !page.PageInfo.HasNextPage {
			break
		}
		if page.PageInfo.EndCursor == nil {
			t.Fatal("hasNextPage without a cursor")
		}
		after = *page.PageInfo.EndCursor
	}
	if !reflect.DeepEqual(got, reached) {
		t.Fatalf("listed %v over %d pages, want %v", got, pages, reached)
	}
	if pages < 13/4 {
		t.Fatalf("%d pages: the scan budget of 4 was not kept", pages)
	}

	// Many grants on every object cost the same commands.
	g := embedaccess.Grants{}
	for i := range 150 {
		g.Tenants = append(g.Tenants, tNone(fmt.Sprintf("other-%04d", i)))
	}
	g.Tenants = append(g.Tenants, tRead("acme-corp"))
	f.putEmbed(admin, folderObj(folder), g)
	f.putEmbed(admin, rootObj, g)
	calls := f.commands(func() { f.tenantPage(t, workspace.TenantWorkbooksInput{First: 2}) })
	if calls["WorkbookHeads"] != 1 || calls["Folders"] > 2 || calls["RootEmbedAccess"] != 1 {
		t.Fatalf("with 151 entries on each object a page sent %v", calls)
	}
}

// TestTenantWorkbooksLargePages: a page of up to first workbooks reads batches until it
// has them, within the scan budget.
func TestTenantWorkbooksLargePages(t *testing.T) {
	f := newGrantsFixture(t, workspace.Limits{})
	f.putEmbed(admin, rootObj, embedaccess.Grants{AllEmbedUsers: embedaccess.Read})
	for i := range 7 {
		f.item(admin, workspace.TypeWorkbook, fmt.Sprintf("wb-%d", i), 0)
	}
	p1 := f.tenantPage(t, workspace.TenantWorkbooksInput{First: 5})
	if len(p1.Items) != 5 || !p1.PageInfo.HasNextPage {
		t.Fatalf("first page %+v", p1)
	}
	p2 := f.tenantPage(t, workspace.TenantWorkbooksInput{First: 5, After: *p1.PageInfo.EndCursor})
	if len(p2.Items) != 2 || p2.PageInfo.HasNextPage || p2.Items[0].WorkbookID <= p1.Items[4].WorkbookID {
		t.Fatalf("second page %+v", p2)
	}
	empty, err := f.svc.TenantWorkbooks(f.ctx, admin, f.dep, "acme-corp", workspace.TenantWorkbooksInput{AccessSource: "tenant"})
	if err != nil || len(empty.Items) != 0 || empty.Items == nil || empty.PageInfo.EndCursor != nil || empty.PageInfo.HasNextPage {
		t.Fatalf("an empty listing %+v %v", empty, err)
	}
}

// TestEmbedAccessDecoratorsCountAndLogChangesOnly: the changes counter and the log line
// come from a PUT that changed the grants; a PUT of the same grants and a refused one
// count and log nothing; each embed dashboard read is counted by its outcome.
func TestEmbedAccessDecoratorsCountAndLogChangesOnly(t *testing.T) {
	f := newFixture(t)
	m := workspace.NewMetrics(prometheus.NewRegistry())
	var buf bytes.Buffer
	f.svc = workspace.InstrumentingMiddleware(m)(workspace.LoggingMiddleware(slog.New(slog.NewJSONHandler(&buf, nil)))(f.svc))
	folder := f.folder(admin, "Secret plans", 0)
	buf.Reset()
	g := embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tRead("acme-corp")}}
	f.putEmbed(admin, folderObj(folder), g)
	f.putEmbed(admin, folderObj(folder), g)
	f.putEmbed(admin, rootObj, g)
	if _, err := f.svc.PutEmbedAccess(f.ctx, viewer, f.dep, folderObj(folder), embedaccess.Grants{}); err == nil {
		t.Fatal("a viewer changed a folder's grants")
	}
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"folder changes", m.EmbedAccessChanges.WithLabelValues("folder"), 1},
		{"root changes", m.EmbedAccessChanges.WithLabelValues("root"), 1},
		{"workbook changes", m.EmbedAccessChanges.WithLabelValues("workbook"), 0},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"msg":"embed access set"`) || !strings.Contains(lines[0], `"object":"folder"`) ||
		!strings.Contains(lines[1], `"object":"root"`) || strings.Contains(buf.String(), "Secret plans") || strings.Contains(buf.String(), "acme-corp") {
		t.Fatalf("log lines %q", lines)
	}
	_, _ = f.svc.EmbedDashboard(f.ctx, &identity.Principal{Credential: identity.CredentialEmbed, Account: identity.Account{ID: 100},
		Embed: &identity.Embed{SessionID: "s", Subject: "x", DeploymentID: 7, Tenant: "acme-corp"}}, "nope")
	var reads float64
	for _, o := range []string{"opened", "not_found", "forbidden", "unavailable", "other"} {
		reads += testutil.ToFloat64(m.EmbedDashboardReads.WithLabelValues(o))
	}
	if reads != 1 {
		t.Fatalf("%v embed dashboard reads counted, want 1", reads)
	}
}

// FuzzPutEmbedAccess: whatever body a PUT of embed access sends, the answer is a 200 or
// a 4xx client error, never a 5xx or a panic; a 200 answers grants that pass Validate.
func FuzzPutEmbedAccess(f *testing.F) {
	for _, s := range []string{`{}`, `{"allEmbedUsers":"read"}`, `{"tenants":[{"embedTenantName":"acme-corp","access":"none"}]}`,
		`{"groups":[{"scope":"tenant","embedTenantName":"acme-corp","groupName":"ops","access":"read"}],"inherited":[]}`,
		`{"groups":[{"scope":"account","groupName":"\u0000","access":"read"}]}`, `{"tenants":null}`, `[]`, `{`, ``, `{"allEmbedUsers":1}`,
		`{"tenants":[{"embedTenantName":"acme-corp","access":"read"},{"embedTenantName":"acme-corp","access":"read"}]}`} {
		f.Add(s)
	}
	fx := newFixture(&testing.T{}) // its t is each input's (fx.t = t) before any helper runs
	w, err := fx.svc.CreateItem(fx.ctx, admin, fx.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "wb"})
	if err != nil {
		f.Fatal(err)
	}
	path := fmt.Sprintf("/api/v1/deployments/7/workbooks/%d/embed-access", w.ID)
	f.Fuzz(func(t *testing.T, body string) {
		fx.t = t
		rec := fx.serve(admin, "PUT", path, body)
		switch {
		case rec.Code == 200:
			var v embedaccess.Grants
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || embedaccess.Validate(v, embedaccess.DefaultMaxEntries) != nil {
				t.Fatalf("body %q: answered %s", body, rec.Body)
			}
		case rec.Code >= 400 && rec.Code < 500:
			if m := decodeJSON(t, rec); m["message"] == "" || m["code"] == "" {
				t.Fatalf("body %q: %s", body, rec.Body)
			}
		default:
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		}
	})
}
