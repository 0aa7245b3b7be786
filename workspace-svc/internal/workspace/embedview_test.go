package workspace_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// viewers is embed-svc's viewer lookup as the tests set it: each external user's current
// groups, changed between requests, or a lookup that fails.
type viewers struct {
	mu     sync.Mutex
	groups map[string]contract.ViewerReply // by externalId
	fail   bool
	asked  []contract.ViewerRequest
}

func (v *viewers) Groups(_ context.Context, req contract.ViewerRequest) (contract.ViewerReply, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked = append(v.asked, req)
	if v.fail {
		return contract.ViewerReply{}, errors.Join(contract.ErrUnavailable, errs.ErrUnavailable)
	}
	return v.groups[req.ExternalID], nil
}

func (v *viewers) set(externalID string, account, tenant []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.groups[externalID] = contract.ViewerReply{AccountGroups: account, TenantGroups: tenant}
}

func (v *viewers) calls() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.asked)
}

// embedFixture is the fixture with a viewer lookup and a count of the store's commands.
type embedFixture struct {
	*fixture
	viewers *viewers
	mu      sync.Mutex
	calls   map[string]int
}

func newEmbedFixture(t *testing.T, limits workspace.Limits) *embedFixture {
	f := &embedFixture{fixture: newFixture(t), viewers: &viewers{groups: map[string]contract.ViewerReply{}}, calls: map[string]int{}}
	f.store.Fault = func(method string) error {
		f.mu.Lock()
		f.calls[method]++
		f.mu.Unlock()
		return nil
	}
	f.svc = workspace.NewService(workspace.Ports{Store: f.store, Viewers: f.viewers}, workspace.Options{Limits: limits})
	return f
}

// counted runs fn and returns the store's commands it sent, by method, and the viewer
// lookups.
func (f *embedFixture) counted(fn func()) (map[string]int, int) {
	f.mu.Lock()
	f.calls = map[string]int{}
	f.mu.Unlock()
	before := f.viewers.calls()
	fn()
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls), f.viewers.calls() - before
}

// board creates a workbook in folder with a dashboard draft titled name and publishes it
// (allowEmbed as given), returning its id and public id.
func (f *embedFixture) board(name string, folder int64, allowEmbed bool) (int64, string) {
	f.t.Helper()
	title := name
	w, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook,
		workspace.CreateItemInput{Name: name, FolderID: folder, DashboardDraft: &workspace.DashboardConfig{Title: &title}})
	if err != nil {
		f.t.Fatal(err)
	}
	pub, err := f.svc.Publish(f.ctx, admin, f.dep, w.ID, &allowEmbed)
	if err != nil {
		f.t.Fatal(err)
	}
	return w.ID, pub.PublishedDashboard.PublicID
}

func (f *embedFixture) grantWorkbook(id int64, g embedaccess.Grants) {
	f.t.Helper()
	if ok, err := f.store.SetEmbedAccess(f.ctx, f.dep, id, workspace.TypeWorkbook, g, 1, time.Time{}); err != nil || !ok {
		f.t.Fatalf("embed access on workbook %d: %v %v", id, ok, err)
	}
}

func (f *embedFixture) grantFolder(id int64, g embedaccess.Grants) {
	f.t.Helper()
	if ok, err := f.store.SetEmbedAccess(f.ctx, f.dep, id, workspace.TypeFolder, g, 1, time.Time{}); err != nil || !ok {
		f.t.Fatalf("embed access on folder %d: %v %v", id, ok, err)
	}
}

func (f *embedFixture) grantRoot(g embedaccess.Grants) {
	f.t.Helper()
	if err := f.store.SetRootEmbedAccess(f.ctx, f.dep, g, 1, time.Time{}); err != nil {
		f.t.Fatal(err)
	}
}

// external is an embed session of tenant acme-corp for external user sub in deployment dep.
func external(dep int64, sub string) *identity.Principal {
	return &identity.Principal{Credential: identity.CredentialEmbed, Account: identity.Account{ID: 100},
		Embed: &identity.Embed{SessionID: "s-" + sub, Subject: sub, DeploymentID: dep, Tenant: "acme-corp"}}
}

// narrowed is p narrowed to the dashboards ids.
func narrowed(p *identity.Principal, ids ...string) *identity.Principal {
	c := *p
	e := *p.Embed
	e.Resources = &identity.EmbedResources{Dashboards: ids}
	c.Embed = &e
	return &c
}

// internalSession is an embed session of an internal user of the account.
func internalSession(dep int64, u *identity.Principal) *identity.Principal {
	return &identity.Principal{Credential: identity.CredentialEmbed, Account: identity.Account{ID: 100}, User: u.User,
		Embed: &identity.Embed{SessionID: "s-internal", Subject: u.User.Email, DeploymentID: dep, Internal: true}}
}

var (
	readAll    = embedaccess.Grants{AllEmbedUsers: embedaccess.Read}
	noneAll    = embedaccess.Grants{AllEmbedUsers: embedaccess.None}
	readTenant = embedaccess.Grants{Tenants: []embedaccess.TenantEntry{{EmbedTenantName: "acme-corp", Access: embedaccess.Read}}}
)

func readGroup(scope, name string) embedaccess.Grants {
	e := embedaccess.GroupEntry{Scope: scope, GroupName: name, Access: embedaccess.Read}
	if scope == embedaccess.ScopeTenant {
		e.EmbedTenantName = "acme-corp"
	}
	return embedaccess.Grants{Groups: []embedaccess.GroupEntry{e}}
}

// opens reports whether p opens publicID, failing on anything but a dashboard or the
// one not-found answer.
func (f *embedFixture) opens(p *identity.Principal, publicID string) bool {
	f.t.Helper()
	d, err := f.svc.EmbedDashboard(f.ctx, p, publicID)
	if err != nil {
		wantNotFound(f.t, err, publicID)
		return false
	}
	if d.PublicID != publicID {
		f.t.Fatalf("asked for %s, got %s", publicID, d.PublicID)
	}
	return true
}

// wantNotFound fails unless err is the read path's one not-found answer for publicID.
func wantNotFound(t *testing.T, err error, publicID string) {
	t.Helper()
	e, ok := errs.As(err)
	want := errs.New(errs.NotFound, "dashboard %s not found", publicID)
	if !ok || e.Kind != want.Kind || e.Code != want.Code || e.Message != want.Message || e.Error() != want.Error() {
		t.Fatalf("error %#v, want %#v", err, want)
	}
}

// Every dashboard the session may not open is the same not-found answer, whatever the
// reason; a malformed id reads nothing at all.
func TestEmbedDashboardEveryRefusalIsTheSameNotFound(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	viewer := external(f.dep, "u-1")
	_, open := f.board("open", 0, true)
	f.grantRoot(readAll)
	if !f.opens(viewer, open) {
		t.Fatal("a dashboard the root's grant opens is not found")
	}
	_, noEmbed := f.board("no-embed", 0, false)
	archivedID, archived := f.board("archived", 0, true)
	if _, err := f.svc.Unpublish(f.ctx, admin, f.dep, archivedID); err != nil {
		t.Fatal(err)
	}
	noneID, none := f.board("none", 0, true)
	f.grantWorkbook(noneID, noneAll)
	deletedID, deleted := f.board("deleted", 0, true)
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, deletedID); err != nil {
		t.Fatal(err)
	}
	private := f.folder(admin, "private", 0)
	f.grantFolder(private, noneAll)
	_, hidden := f.board("hidden", private, true)
	// Another deployment's dashboard, open to every embed user there.
	other := &embedFixture{fixture: &fixture{t: t, ctx: f.ctx, store: f.store, svc: f.svc, dep: 8}, viewers: f.viewers}
	_, elsewhere := other.board("elsewhere", 0, true)
	other.grantRoot(readAll)

	for _, tc := range []struct {
		name, id string
		p        *identity.Principal
	}{
		{"unknown", "AAAAAAAAAAAAAAAA", viewer},
		{"another deployment's", elsewhere, viewer},
		{"allowEmbed false", noEmbed, viewer},
		{"archived", archived, viewer},
		{"explicit none on the workbook", none, viewer},
		{"none on its folder", hidden, viewer},
		{"deleted", deleted, viewer},
		{"excluded by resources", open, narrowed(viewer, none)},
		{"excluded by empty resources", open, narrowed(viewer)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.EmbedDashboard(f.ctx, tc.p, tc.id)
			wantNotFound(t, err, tc.id)
		})
	}
	for _, id := range []string{"", "short", "AAAAAAAAAAAAAAA!", strings.Repeat("A", 17), "AAAAAAAAAAAAAAA\x00", "../../../../../x"} {
		calls, lookups := f.counted(func() {
			_, err := f.svc.EmbedDashboard(f.ctx, viewer, id)
			wantNotFound(t, err, id)
		})
		if len(calls) != 0 || lookups != 0 {
			t.Errorf("malformed id %q: store commands %v, viewer lookups %d; want none", id, calls, lookups)
		}
	}
}

// The viewer gets the published dashboard without its reports' queries and code, their
// snapshots' meta, nor who created or changed it.
func TestEmbedDashboardHidesWhatAViewerMustNotSee(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	id, publicID := f.board("board", 0, true)
	f.grantWorkbook(id, readTenant)
	docs, err := f.store.Items(f.ctx, f.dep, []int64{id}, workspace.PartPublished)
	if err != nil {
		t.Fatal(err)
	}
	pub := *docs[id].Published
	sql, code, name := "select secret from t", "print('secret')", "r"
	pub.ReportSnapshots = []workspace.ReportSnapshot{{ID: 9, ReportID: 8, VersionNumber: 1, Name: &name, SQLQuery: &sql, PythonCode: &code,
		Meta: json.RawMessage(`{"secret":true}`), Spec: json.RawMessage(`{"chart":"bar"}`)}}
	if _, err := f.store.UpdateItem(f.ctx, f.dep, id, workspace.TypeWorkbook, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Published: &pub, UpdatedBy: 1}); err != nil {
		t.Fatal(err)
	}
	d, err := f.svc.EmbedDashboard(f.ctx, external(f.dep, "u-1"), publicID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(d)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"createdBy", "updatedBy"} {
		if v, ok := got[k]; !ok || v != nil {
			t.Errorf("%s: %v (present %v), want null", k, v, ok)
		}
	}
	snaps := got["reportSnapshots"].([]any)
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v", snaps)
	}
	snap := snaps[0].(map[string]any)
	for _, k := range []string{"sqlQuery", "pythonCode", "meta"} {
		if v, ok := snap[k]; !ok || v != nil {
			t.Errorf("snapshot %s: %v (present %v), want null", k, v, ok)
		}
	}
	if snap["name"] != "r" || fmt.Sprint(snap["spec"]) != "map[chart:bar]" || got["title"] != "board" || got["publicId"] != publicID {
		t.Errorf("what a viewer sees is kept: %s", body)
	}
	if strings.Contains(string(body), "secret") {
		t.Errorf("the answer holds what is hidden: %s", body)
	}
	// The stored dashboard is not changed by what the viewer got.
	if w, err := f.svc.GetItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, id); err != nil ||
		w.PublishedDashboard.ReportSnapshots[0].SQLQuery == nil || w.PublishedDashboard.CreatedBy == nil {
		t.Fatalf("the owner's view after the viewer's: %+v %v", w.PublishedDashboard, err)
	}
}

// A grant removed, a membership removed and a folder moved out of reach take effect on
// the very next request: nothing is cached.
func TestEmbedDashboardFollowsGrantsMembershipsAndMovesAtOnce(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	viewer := external(f.dep, "u-1")
	reach := f.folder(admin, "reach", 0)
	away := f.folder(admin, "away", 0)
	sub := f.folder(admin, "sub", reach)
	id, publicID := f.board("board", sub, true)

	f.grantFolder(reach, readGroup(embedaccess.ScopeAccount, "finance"))
	if f.opens(viewer, publicID) {
		t.Fatal("opened without being a member of the group granted")
	}
	f.viewers.set("u-1", []string{"finance"}, nil)
	if !f.opens(viewer, publicID) {
		t.Fatal("a member of the group granted on a folder two levels up does not open it")
	}
	f.viewers.set("u-1", nil, nil)
	if f.opens(viewer, publicID) {
		t.Fatal("opened after the membership was removed")
	}

	f.viewers.set("u-1", nil, []string{"managers"})
	f.grantFolder(reach, readGroup(embedaccess.ScopeTenant, "managers"))
	if !f.opens(viewer, publicID) {
		t.Fatal("a member of the tenant's group does not open it")
	}
	f.grantFolder(reach, embedaccess.Grants{})
	if f.opens(viewer, publicID) {
		t.Fatal("opened after the grant was removed")
	}

	f.grantFolder(reach, readTenant)
	if !f.opens(viewer, publicID) {
		t.Fatal("the tenant's grant does not open it")
	}
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeFolder, sub), away); err != nil {
		t.Fatal(err)
	}
	if f.opens(viewer, publicID) {
		t.Fatal("opened after its folder moved out of the granted folder")
	}
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeFolder, sub), reach); err != nil {
		t.Fatal(err)
	}
	if !f.opens(viewer, publicID) {
		t.Fatal("not opened after its folder moved back")
	}
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeWorkbook, id), away); err != nil {
		t.Fatal(err)
	}
	if f.opens(viewer, publicID) {
		t.Fatal("opened after the workbook moved out of reach")
	}
}

// The walk goes from the workbook up through its folders, nearest first, to the root: the
// first explicit answer met decides, at any depth.
func TestEmbedDashboardWalksFromTheWorkbookUpToTheRoot(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	viewer := external(f.dep, "u-1")
	f.viewers.set("u-1", []string{"finance"}, nil)
	var chain []int64
	parent := int64(0)
	for i := range 8 {
		parent = f.folder(admin, fmt.Sprint("level-", i), parent)
		chain = append(chain, parent)
	}
	id, publicID := f.board("deep", parent, true)
	steps := []struct {
		name string
		set  func()
		want bool
	}{
		{"nothing anywhere", func() {}, false},
		{"root read", func() { f.grantRoot(readAll) }, true},
		{"top folder none", func() { f.grantFolder(chain[0], noneAll) }, false},
		{"a folder below it reads for the tenant", func() { f.grantFolder(chain[4], readTenant) }, true},
		{"the nearest folder refuses the viewer's group", func() {
			f.grantFolder(chain[7], embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: embedaccess.ScopeAccount, GroupName: "finance", Access: embedaccess.None}}})
		}, false},
		{"another of their groups reads there", func() {
			f.viewers.set("u-1", []string{"finance", "board"}, nil)
			f.grantFolder(chain[7], embedaccess.Grants{Groups: []embedaccess.GroupEntry{
				{Scope: embedaccess.ScopeAccount, GroupName: "finance", Access: embedaccess.None},
				{Scope: embedaccess.ScopeAccount, GroupName: "board", Access: embedaccess.Read}}})
		}, true},
		{"the workbook's own none", func() { f.grantWorkbook(id, noneAll) }, false},
		{"the workbook's tenant read over its allEmbedUsers none", func() {
			f.grantWorkbook(id, embedaccess.Grants{AllEmbedUsers: embedaccess.None, Tenants: readTenant.Tenants})
		}, true},
	}
	for _, s := range steps {
		s.set()
		if got := f.opens(viewer, publicID); got != s.want {
			t.Fatalf("%s: opens %v, want %v", s.name, got, s.want)
		}
	}
	// Another tenant's session meets none of acme-corp's entries.
	other := external(f.dep, "u-2")
	other.Embed.Tenant = "globex-inc"
	f.grantFolder(chain[7], embedaccess.Grants{})
	if f.opens(other, publicID) {
		t.Fatal("another tenant's viewer opens what acme-corp's tenant grant reads")
	}
}

// An internal user's session follows their own role and folder grants, not embed grants.
func TestEmbedDashboardInternalUsersFollowTheirOwnAccess(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	private := f.folder(admin, "private", 0)
	_, inPrivate := f.board("in-private", private, true)
	_, atRoot := f.board("at-root", 0, true)
	_, noEmbed := f.board("no-embed", 0, false)
	f.grantFolder(private, readAll) // embed grants do not decide for internal users
	f.grantRoot(noneAll)
	session := internalSession(f.dep, viewer)
	if f.opens(session, inPrivate) {
		t.Fatal("an internal viewer opens a dashboard in a folder they cannot view")
	}
	if !f.opens(session, atRoot) {
		t.Fatal("an internal viewer does not open a dashboard at the root they can view")
	}
	if f.opens(session, noEmbed) {
		t.Fatal("an internal user opens a dashboard published without allowEmbed")
	}
	f.grant(private, workspace.Grant{UserID: viewer.User.ID, Level: "view"})
	if !f.opens(session, inPrivate) {
		t.Fatal("an internal viewer granted view on the folder does not open it")
	}
	page, err := f.svc.EmbedDashboards(f.ctx, session, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || page.Items[0].AccessSource != embedaccess.SourceUser || page.Items[1].AccessSource != embedaccess.SourceUser {
		t.Fatalf("internal user's listing %+v", page.Items)
	}
	if f.viewers.calls() != 0 {
		t.Fatalf("an internal user's groups were looked up %d times", f.viewers.calls())
	}
}

// While embed-svc cannot say which groups the viewer has, every request is 503, whether
// the id exists or not: never a 404, nor a dashboard.
func TestEmbedViewerLookupUnavailableIsUnavailable(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	_, publicID := f.board("board", 0, true)
	f.grantRoot(readAll)
	f.viewers.fail = true
	viewer := external(f.dep, "u-1")
	for _, id := range []string{publicID, "AAAAAAAAAAAAAAAA"} {
		_, err := f.svc.EmbedDashboard(f.ctx, viewer, id)
		wantErr(t, err, errs.Unavailable, "")
	}
	_, err := f.svc.EmbedDashboards(f.ctx, viewer, 10, "")
	wantErr(t, err, errs.Unavailable, "")
	_, err = f.svc.EmbedDashboards(f.ctx, narrowed(viewer, publicID), 10, "")
	wantErr(t, err, errs.Unavailable, "")
}

// Without the lookup (no embed-svc wired), a viewer has no groups: a group's grant opens
// nothing, a tenant's still does.
func TestEmbedWithoutViewerLookupViewersHaveNoGroups(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{})
	id, publicID := f.board("board", 0, true)
	f.grantWorkbook(id, readGroup(embedaccess.ScopeAccount, "finance"))
	if f.opens(external(f.dep, "u-1"), publicID) {
		t.Fatal("opened through a group without a lookup")
	}
	f.grantWorkbook(id, readTenant)
	if !f.opens(external(f.dep, "u-1"), publicID) {
		t.Fatal("the tenant's grant does not open it")
	}
}

// Only embed sessions use the read path.
func TestEmbedReadPathRefusesOtherCredentials(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	noUser := internalSession(f.dep, viewer)
	noUser.User = nil
	noSubject := external(f.dep, "")
	for name, p := range map[string]*identity.Principal{"bearer": admin, "nil": nil, "internal without user": noUser,
		"external without subject": noSubject, "no embed claims": {Credential: identity.CredentialEmbed, Account: identity.Account{ID: 100}}} {
		_, err := f.svc.EmbedDashboard(f.ctx, p, "AAAAAAAAAAAAAAAA")
		wantErr(t, err, errs.Forbidden, "")
		_, err = f.svc.EmbedDashboards(f.ctx, p, 10, "")
		wantErr(t, err, errs.Forbidden, "")
		_ = name
	}
}

// A session of one deployment sees nothing of another's, whatever id it sends.
func TestEmbedSessionOfAnotherDeploymentSeesNothing(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	_, publicID := f.board("board", 0, true)
	f.grantRoot(readAll)
	other := external(8, "u-1")
	if f.opens(other, publicID) {
		t.Fatal("a session of deployment 8 opens deployment 7's dashboard")
	}
	page, err := f.svc.EmbedDashboards(f.ctx, other, 50, "")
	if err != nil || len(page.Items) != 0 || page.PageInfo.HasNextPage {
		t.Fatalf("deployment 8's listing: %+v %v", page, err)
	}
	page, err = f.svc.EmbedDashboards(f.ctx, narrowed(other, publicID), 50, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("deployment 8's narrowed listing: %+v %v", page, err)
	}
}

// resources narrows a session to those dashboards among what its grants open: never
// wider, and an id that matches nothing opens nothing.
func TestEmbedNarrowedSessionOpensOnlyItsResources(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	_, a := f.board("a", 0, true)
	_, b := f.board("b", 0, true)
	cID, c := f.board("c", 0, true)
	f.grantRoot(readAll)
	f.grantWorkbook(cID, noneAll)
	viewer := narrowed(external(f.dep, "u-1"), a, c, "AAAAAAAAAAAAAAAA", "not-an-id", a)
	if !f.opens(viewer, a) || f.opens(viewer, b) || f.opens(viewer, c) {
		t.Fatal("a narrowed session opens what it is not narrowed to, or what its grants refuse")
	}
	page, err := f.svc.EmbedDashboards(f.ctx, viewer, 50, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].PublicID != a || page.PageInfo.HasNextPage {
		t.Fatalf("narrowed listing %+v %v", page, err)
	}
	page, err = f.svc.EmbedDashboards(f.ctx, narrowed(external(f.dep, "u-1")), 50, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("a session narrowed to nothing lists %+v %v", page, err)
	}
	// Narrowed pages go on by workbook id.
	all := narrowed(external(f.dep, "u-1"), b, a)
	first, err := f.svc.EmbedDashboards(f.ctx, all, 1, "")
	if err != nil || len(first.Items) != 1 || first.Items[0].PublicID != a || !first.PageInfo.HasNextPage {
		t.Fatalf("narrowed first page %+v %v", first, err)
	}
	second, err := f.svc.EmbedDashboards(f.ctx, all, 1, *first.PageInfo.EndCursor)
	if err != nil || len(second.Items) != 1 || second.Items[0].PublicID != b || second.PageInfo.HasNextPage {
		t.Fatalf("narrowed second page %+v %v", second, err)
	}
}

// The listing pages by workbook id through what the viewer opens, with its title and the
// source of its access; a page examines at most ListScan workbooks and goes on from there.
func TestEmbedDashboardsPagesWhatTheViewerOpens(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{ListScan: 4})
	viewer := external(f.dep, "u-1")
	f.viewers.set("u-1", []string{"finance"}, nil)
	granted := f.folder(admin, "granted", 0)
	f.grantFolder(granted, readTenant)
	var want []workspace.EmbedDashboardSummary
	for i := range 12 {
		name := fmt.Sprint("board-", i)
		folder := int64(0)
		if i%3 == 1 {
			folder = granted
		}
		id, publicID := f.board(name, folder, true)
		switch i % 3 {
		case 0:
			f.grantWorkbook(id, readGroup(embedaccess.ScopeAccount, "finance"))
			want = append(want, workspace.EmbedDashboardSummary{PublicID: publicID, WorkbookID: id, Title: &name, AccessSource: embedaccess.SourceGroup})
		case 1:
			want = append(want, workspace.EmbedDashboardSummary{PublicID: publicID, WorkbookID: id, Title: &name, AccessSource: embedaccess.SourceFolder})
		}
		// i%3 == 2: no grant, not listed
	}
	f.board("not-embeddable", granted, false)
	var got []workspace.EmbedDashboardSummary
	after, pages := "", 0
	for {
		lookups := f.viewers.calls()
		page, err := f.svc.EmbedDashboards(f.ctx, viewer, 3, after)
		if err != nil {
			t.Fatal(err)
		}
		if f.viewers.calls()-lookups != 1 {
			t.Fatalf("a page looked the viewer up %d times", f.viewers.calls()-lookups)
		}
		pages++
		got = append(got, page.Items...)
		if !page.PageInfo.HasNextPage {
			break
		}
		if page.PageInfo.EndCursor == nil || pages > 20 {
			t.Fatalf("page %d: %+v", pages, page)
		}
		after = *page.PageInfo.EndCursor
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d dashboards, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].PublicID != want[i].PublicID || got[i].WorkbookID != want[i].WorkbookID || *got[i].Title != *want[i].Title ||
			got[i].AccessSource != want[i].AccessSource {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if pages < 4 {
		t.Errorf("%d pages: the scan limit of 4 should end pages early", pages)
	}
	for _, bad := range []string{"x", httpx.EncodeCursor(map[string]int64{"i": 0}), httpx.EncodeCursor(map[string]any{"i": 1, "z": 2})} {
		_, err := f.svc.EmbedDashboards(f.ctx, viewer, 3, bad)
		if !errors.Is(err, httpx.ErrBadCursor) {
			t.Errorf("cursor %q: %v, want the bad cursor answer", bad, err)
		}
	}
}

// What one dashboard costs is fixed: the workbook by its public id, its folder, its
// folder's ancestors, the root's grants and one viewer lookup, however many grants there
// are and however deep the workbook is.
func TestEmbedDashboardCostIsIndependentOfGrantsAndDepth(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	f.viewers.set("u-1", []string{"finance"}, nil)
	viewer := external(f.dep, "u-1")
	many := embedaccess.Grants{}
	for i := range 150 {
		many.Tenants = append(many.Tenants, embedaccess.TenantEntry{EmbedTenantName: fmt.Sprintf("tenant-%03d", i), Access: embedaccess.Read})
	}
	cost := func(depth int, g embedaccess.Grants) (map[string]int, int) {
		parent := int64(0)
		for i := range depth {
			parent = f.folder(admin, fmt.Sprint("d", depth, "-", i), parent)
			f.grantFolder(parent, g)
		}
		id, publicID := f.board(fmt.Sprint("at-", depth), parent, true)
		f.grantWorkbook(id, g)
		f.grantRoot(readAll)
		return f.counted(func() {
			if !f.opens(viewer, publicID) {
				t.Fatal("not opened")
			}
		})
	}
	shallow, l1 := cost(1, readGroup(embedaccess.ScopeTenant, "other"))
	deep, l2 := cost(workspace.MaxDepth, many)
	if fmt.Sprint(shallow) != fmt.Sprint(deep) || l1 != 1 || l2 != 1 {
		t.Fatalf("depth 1, one grant: %v and %d lookups; depth 8, 150 grants per level: %v and %d lookups", shallow, l1, deep, l2)
	}
	total := 0
	for _, n := range deep {
		total += n
	}
	if deep["WorkbookByPublicID"] != 1 || deep["Folders"] > 2 || deep["RootEmbedAccess"] != 1 || total > 4 {
		t.Fatalf("commands %v, want the workbook, at most two folder reads and the root", deep)
	}
	// A page of the listing: one batch, its folders in two reads, the root once.
	page, _ := f.counted(func() {
		if _, err := f.svc.EmbedDashboards(f.ctx, viewer, 1, ""); err != nil {
			t.Fatal(err)
		}
	})
	if page["EmbeddableWorkbooks"] != 1 || page["Folders"] > 2 || page["RootEmbedAccess"] != 1 {
		t.Fatalf("a listing page's commands %v", page)
	}
}

// The reach answers what a viewer the request describes would open and through which
// grant, by the listing's rules.
func TestReachListsWhatTheViewerWouldOpen(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	reach := workspace.NewReach(workspace.Ports{Store: f.store}, workspace.Options{})
	folder := f.folder(admin, "shared", 0)
	f.grantFolder(folder, readTenant)
	inFolderID, inFolder := f.board("in-folder", folder, true)
	groupID, group := f.board("group", 0, true)
	f.grantWorkbook(groupID, readGroup(embedaccess.ScopeTenant, "managers"))
	rootOnlyID, rootOnly := f.board("root-only", 0, true)
	f.grantRoot(embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: embedaccess.ScopeAccount, GroupName: "finance", Access: embedaccess.Read}}})
	f.board("no-embed", folder, false)

	req := contract.ReachRequest{AccountID: 100, DeploymentID: f.dep, EmbedTenantName: "acme-corp", AccountGroups: []string{"finance"}, TenantGroups: []string{"managers"}}
	got, err := reach(f.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fid := folder
	want := []contract.ReachDashboard{
		{PublicID: inFolder, WorkbookID: inFolderID, AccessSource: embedaccess.SourceFolder,
			Subject: embedaccess.Subject{Type: embedaccess.SourceTenant, EmbedTenantName: "acme-corp"}, ViaFolderID: &fid},
		{PublicID: group, WorkbookID: groupID, AccessSource: embedaccess.SourceGroup,
			Subject: embedaccess.Subject{Type: embedaccess.SourceGroup, Scope: embedaccess.ScopeTenant, EmbedTenantName: "acme-corp", GroupName: "managers"}},
		{PublicID: rootOnly, WorkbookID: rootOnlyID, AccessSource: embedaccess.SourceFolder,
			Subject: embedaccess.Subject{Type: embedaccess.SourceGroup, Scope: embedaccess.ScopeAccount, GroupName: "finance"}, ViaRoot: true},
	}
	if got.Truncated || len(got.Dashboards) != len(want) {
		t.Fatalf("reach %+v", got)
	}
	for i := range want {
		g, w := got.Dashboards[i], want[i]
		g.Title = nil
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Errorf("entry %d: %s, want %s", i, gb, wb)
		}
	}
	if *got.Dashboards[0].Title != "in-folder" {
		t.Errorf("title %v", *got.Dashboards[0].Title)
	}

	// Without the groups only the tenant's grant opens; narrowed, only what it names.
	got, err = reach(f.ctx, contract.ReachRequest{AccountID: 100, DeploymentID: f.dep, EmbedTenantName: "acme-corp"})
	if err != nil || len(got.Dashboards) != 1 || got.Dashboards[0].PublicID != inFolder {
		t.Fatalf("reach without groups: %+v %v", got, err)
	}
	only := []string{group, "AAAAAAAAAAAAAAAA"}
	req.Resources = &only
	got, err = reach(f.ctx, req)
	if err != nil || len(got.Dashboards) != 1 || got.Dashboards[0].PublicID != group {
		t.Fatalf("narrowed reach: %+v %v", got, err)
	}
	// Another deployment's session reaches nothing of this one.
	got, err = reach(f.ctx, contract.ReachRequest{AccountID: 100, DeploymentID: 8, EmbedTenantName: "acme-corp", AccountGroups: []string{"finance"}})
	if err != nil || len(got.Dashboards) != 0 || got.Truncated {
		t.Fatalf("deployment 8's reach: %+v %v", got, err)
	}
}

// An internal user's reach is their own access; a bad role or request is a 400.
func TestReachOfAnInternalUserIsTheirOwnAccess(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{})
	reach := workspace.NewReach(workspace.Ports{Store: f.store}, workspace.Options{})
	private := f.folder(admin, "private", 0)
	f.grantFolder(private, readAll)
	_, inPrivate := f.board("in-private", private, true)
	_, atRoot := f.board("at-root", 0, true)
	req := contract.ReachRequest{AccountID: 100, DeploymentID: f.dep, InternalUserID: viewer.User.ID, InternalRole: identity.RoleViewer}
	got, err := reach(f.ctx, req)
	if err != nil || len(got.Dashboards) != 1 || got.Dashboards[0].PublicID != atRoot || got.Dashboards[0].AccessSource != embedaccess.SourceUser ||
		got.Dashboards[0].Subject.Type != embedaccess.SourceUser {
		t.Fatalf("internal viewer's reach %+v %v", got, err)
	}
	f.grant(private, workspace.Grant{UserID: viewer.User.ID, Level: "view"})
	got, err = reach(f.ctx, req)
	if err != nil || len(got.Dashboards) != 2 || !slices.ContainsFunc(got.Dashboards, func(d contract.ReachDashboard) bool { return d.PublicID == inPrivate }) {
		t.Fatalf("internal viewer's reach once granted view: %+v %v", got, err)
	}
	req.InternalRole = "owner"
	_, err = reach(f.ctx, req)
	wantErr(t, err, errs.Invalid, "")
	_, err = reach(f.ctx, contract.ReachRequest{DeploymentID: f.dep})
	wantErr(t, err, errs.Invalid, "")
}

// The reach lists at most contract.MaxReachDashboards, Truncated when there are more.
func TestReachIsBoundedAndSaysSo(t *testing.T) {
	f := newEmbedFixture(t, workspace.Limits{ListScan: 40})
	reach := workspace.NewReach(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{ListScan: 40}})
	f.grantRoot(readAll)
	for i := range contract.MaxReachDashboards {
		f.board(fmt.Sprint("b", i), 0, true)
	}
	req := contract.ReachRequest{AccountID: 100, DeploymentID: f.dep, EmbedTenantName: "acme-corp"}
	got, err := reach(f.ctx, req)
	if err != nil || len(got.Dashboards) != contract.MaxReachDashboards || got.Truncated {
		t.Fatalf("exactly the bound: %d dashboards, truncated %v, %v", len(got.Dashboards), got.Truncated, err)
	}
	f.board("one-more", 0, true)
	got, err = reach(f.ctx, req)
	if err != nil || len(got.Dashboards) != contract.MaxReachDashboards || !got.Truncated {
		t.Fatalf("one past the bound: %d dashboards, truncated %v, %v", len(got.Dashboards), got.Truncated, err)
	}
	// Past the workbooks it may examine (10 scan limits: 400) it stops, truncated.
	small := workspace.NewReach(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{ListScan: 5}})
	f.grantRoot(noneAll)
	got, err = small(f.ctx, req)
	if err != nil || len(got.Dashboards) != 0 || !got.Truncated {
		t.Fatalf("past the scan budget: %d dashboards, truncated %v, %v", len(got.Dashboards), got.Truncated, err)
	}
}

// The title a workbook's head keeps is bounded: a dashboard title of any size is kept
// as its first MaxPublishedTitleBytes bytes, cut at a character boundary.
func TestPublishedHeadBoundsTheTitle(t *testing.T) {
	long := strings.Repeat("é", workspace.MaxPublishedTitleBytes) // two bytes each
	title, embeddable := workspace.PublishedHead(&workspace.Dashboard{Status: workspace.StatusPublished, AllowEmbed: true,
		Config: workspace.DashboardConfig{Title: &long}})
	if !embeddable || title == nil || len(*title) > workspace.MaxPublishedTitleBytes || !utf8.ValidString(*title) || !strings.HasPrefix(long, *title) ||
		len(*title) < workspace.MaxPublishedTitleBytes-1 {
		t.Fatalf("head title of %d bytes (valid %v), want the first %d bytes or one less", len(*title), utf8.ValidString(*title), workspace.MaxPublishedTitleBytes)
	}
	short := "Revenue"
	if title, _ := workspace.PublishedHead(&workspace.Dashboard{Title: &short}); title == nil || *title != short {
		t.Fatalf("short title %v", title)
	}
}
