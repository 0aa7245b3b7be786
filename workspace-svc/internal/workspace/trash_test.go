package workspace_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// subtree is a folder A with a subfolder B (granted, holding a workbook with content and
// a folder C), a workbook and a report in A.
type subtree struct {
	a, b, c, wbA, rpA, wbB int64
}

func (f *fixture) subtree(parent int64) subtree {
	f.t.Helper()
	var s subtree
	s.a = f.folder(admin, "A", parent)
	s.b = f.folder(admin, "B", s.a)
	s.c = f.folder(admin, "C", s.b)
	f.grant(s.b, workspace.Grant{UserID: ai.User.ID, Level: "edit"})
	s.wbA = f.item(admin, workspace.TypeWorkbook, "wbA", s.a)
	s.rpA = f.item(admin, workspace.TypeReport, "rpA", s.a)
	w, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "wbB", FolderID: s.b,
		Meta: json.RawMessage(`{"k":"v"}`), CalculatedFields: json.RawMessage(`{"c":1}`)})
	if err != nil {
		f.t.Fatal(err)
	}
	s.wbB = w.ID
	return s
}

func (s subtree) ids() []int64 { return []int64{s.a, s.b, s.c, s.wbA, s.rpA, s.wbB} }

// stored is what a restore must give back of each item: ids, names, parents, grants,
// ancestors and content (times of the last change aside).
func (f *fixture) stored(ids []int64) map[int64]workspace.Item {
	f.t.Helper()
	got, err := f.store.Items(f.ctx, f.dep, ids, workspace.AllParts)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[int64]workspace.Item{}
	for id, it := range got {
		c := *it
		c.UpdatedAt, c.UpdatedBy = time.Time{}, 0
		slices.Sort(c.Anc)
		out[id] = c
	}
	return out
}

func (f *fixture) restore(p *identity.Principal, folder *int64, refs ...workspace.ItemRef) workspace.TrashResult {
	f.t.Helper()
	res, err := f.svc.RestoreTrash(f.ctx, p, f.dep, refs, folder)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *fixture) trashIDs(p *identity.Principal) []int64 {
	f.t.Helper()
	page, err := f.svc.ListTrash(f.ctx, p, f.dep, 50, "")
	if err != nil {
		f.t.Fatal(err)
	}
	var out []int64
	for _, e := range page.Items {
		out = append(out, e.ID)
	}
	return out
}

// TestRecursiveDeleteThenRestoreGivesBackTheSubtree: a folder deleted with recursive=true
// goes to the trash with everything below it (none of it live, its favorites dropped,
// its slots given back); the trash lists the folder alone, with the count of what went
// with it; a restore gives back the same subtree: ids, names, parents, ancestors, grants
// and content, and takes the slots again.
func TestRecursiveDeleteThenRestoreGivesBackTheSubtree(t *testing.T) {
	f := limited(t, 8)
	s := f.subtree(0)
	before := f.stored(s.ids())
	if err := f.svc.SetFavorite(f.ctx, ai, f.dep, ref(workspace.TypeWorkbook, s.wbB), true); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteFolder(f.ctx, admin, f.dep, s.a); err == nil {
		t.Fatal("a non-empty folder went without recursive")
	}
	if err := f.svc.DeleteFolderTree(f.ctx, admin, f.dep, s.a); err != nil {
		t.Fatal(err)
	}
	if live := f.stored(s.ids()); len(live) != 0 {
		t.Fatalf("live after the recursive delete: %v", live)
	}
	page, err := f.svc.ListTrash(f.ctx, admin, f.dep, 10, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != s.a || page.Items[0].TrashedWith == nil || *page.Items[0].TrashedWith != 5 ||
		page.Items[0].DeletedBy != admin.User.ID || page.Items[0].FolderID != nil {
		t.Fatalf("trash %+v %v, want folder %d with 5 trashed with it", page.Items, err, s.a)
	}
	// The six slots came back: six new items fit under the limit of 8.
	for i := range 6 {
		f.item(admin, workspace.TypeWorkbook, "new"+string(rune('a'+i)), 0)
	}
	res := f.restore(admin, nil, ref(workspace.TypeFolder, s.a))
	if len(res.Failed) != 1 || res.Failed[0].Err.Code != errs.CodeItemLimit {
		t.Fatalf("restore over the limit: %+v", res)
	}
	if got := f.trashIDs(admin); !slices.Equal(got, []int64{s.a}) {
		t.Fatalf("after a refused restore the trash holds %v", got)
	}
	// Make room by deleting four of the new ones (6+6 > 8 until then).
	var refs []workspace.ItemRef
	for _, id := range f.rootWorkbooks()[:4] {
		refs = append(refs, ref(workspace.TypeWorkbook, id))
	}
	if del, err := f.svc.BulkDelete(f.ctx, admin, f.dep, refs); err != nil || len(del.Done) != 4 {
		t.Fatalf("bulk delete: %+v %v", del, err)
	}
	res = f.restore(admin, nil, ref(workspace.TypeFolder, s.a))
	if len(res.Failed) != 0 || !reflect.DeepEqual(res.Done, []workspace.ItemRef{ref(workspace.TypeFolder, s.a)}) {
		t.Fatalf("restore: %+v", res)
	}
	for id, it := range before {
		it.Version += 2 // the trash and the restore each count one
		before[id] = it
	}
	if after := f.stored(s.ids()); !reflect.DeepEqual(after, before) {
		t.Fatalf("restored subtree\n got %+v\nwant %+v", after, before)
	}
	if g, err := f.svc.GetPermissions(f.ctx, admin, f.dep, s.b); err != nil || !reflect.DeepEqual(g, []workspace.Grant{{UserID: ai.User.ID, Level: "edit"}}) {
		t.Fatalf("grants of B after the restore: %v %v", g, err)
	}
	if w, err := f.svc.GetItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, s.wbB); err != nil || *w.IsFavorite {
		t.Fatalf("the favorite came back: %+v %v", w, err)
	}
	// The limit is exactly full again (8): one more create is refused.
	_, err = f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: "one more"})
	wantLimit(t, err)
}

// rootWorkbooks are the live workbooks at the root, by id.
func (f *fixture) rootWorkbooks() []int64 {
	f.t.Helper()
	page, err := f.svc.List(f.ctx, admin, f.dep, 0, 200, "")
	if err != nil {
		f.t.Fatal(err)
	}
	var out []int64
	for _, it := range page.Items {
		if it.Type == workspace.TypeWorkbook {
			out = append(out, it.ID)
		}
	}
	slices.Sort(out)
	return out
}

// TestPurgeRemovesForGood: a purged root and what went with it are out of the trash and
// never come back; purge takes no slot and gives none.
func TestPurgeRemovesForGood(t *testing.T) {
	f := limited(t, 7)
	s := f.subtree(0)
	wb := f.item(admin, workspace.TypeWorkbook, "single", 0)
	if err := f.svc.DeleteFolderTree(f.ctx, admin, f.dep, s.a); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, wb); err != nil {
		t.Fatal(err)
	}
	if got := f.trashIDs(admin); !slices.Equal(got, []int64{wb, s.a}) {
		t.Fatalf("trash %v, want newest first [%d %d]", got, wb, s.a)
	}
	res, err := f.svc.PurgeTrash(f.ctx, admin, f.dep, []workspace.ItemRef{ref(workspace.TypeWorkbook, s.wbB), ref(workspace.TypeFolder, s.a), ref(workspace.TypeWorkbook, wb)})
	if err != nil || len(res.Done) != 2 || len(res.Failed) != 1 || res.Failed[0].Err.Code != errs.CodeTrashedWithFolder {
		t.Fatalf("purge: %+v %v", res, err)
	}
	if got := f.trashIDs(admin); len(got) != 0 {
		t.Fatalf("trash after the purge: %v", got)
	}
	trashed, err := f.store.TrashedItems(f.ctx, f.dep, append(s.ids(), wb))
	if err != nil || len(trashed) != 0 {
		t.Fatalf("trashed items after the purge: %v %v", trashed, err)
	}
	res = f.restore(admin, nil, ref(workspace.TypeFolder, s.a), ref(workspace.TypeWorkbook, wb))
	for _, fl := range res.Failed {
		if fl.Err.Kind != errs.NotFound {
			t.Fatalf("restore after purge: %+v", fl.Err)
		}
	}
	if len(res.Failed) != 2 {
		t.Fatalf("restore after purge: %+v", res)
	}
	// 7 slots free: purge gave none back twice, took none.
	for i := range 7 {
		f.item(admin, workspace.TypeReport, "r"+string(rune('a'+i)), 0)
	}
	_, err = f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: "one more"})
	wantLimit(t, err)
}

// TestRestoreWhenTheOriginalFolderIsGone: without folderId the restore says the original
// folder is gone (409); with it the item goes there, a folder checked for depth.
func TestRestoreWhenTheOriginalFolderIsGone(t *testing.T) {
	f := newFixture(t)
	outer := f.folder(admin, "outer", 0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", outer)
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, wb); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteFolder(f.ctx, admin, f.dep, outer); err != nil {
		t.Fatal(err)
	}
	res := f.restore(admin, nil, ref(workspace.TypeWorkbook, wb))
	if len(res.Failed) != 1 || res.Failed[0].Err.Code != errs.CodeOriginalFolderGone || !strings.Contains(res.Failed[0].Err.Message, "folderId") {
		t.Fatalf("restore without folderId: %+v", res)
	}
	dest := f.folder(admin, "dest", 0)
	res = f.restore(admin, &dest, ref(workspace.TypeWorkbook, wb))
	if len(res.Done) != 1 || f.parentOf(workspace.TypeWorkbook, wb) != dest {
		t.Fatalf("restore into folderId: %+v", res)
	}
	// A subtree three levels high restored into a folder at level 6 would reach level 9.
	deep := int64(0)
	for i := range 6 {
		deep = f.folder(admin, "d"+string(rune('0'+i)), deep)
	}
	holder := f.folder(admin, "holder", 0)
	s := f.subtree(holder)
	if err := f.svc.DeleteFolderTree(f.ctx, admin, f.dep, s.a); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteFolder(f.ctx, admin, f.dep, holder); err != nil {
		t.Fatal(err)
	}
	res = f.restore(admin, &deep, ref(workspace.TypeFolder, s.a))
	if len(res.Failed) != 1 || res.Failed[0].Err.Code != errs.CodeDepthLimit {
		t.Fatalf("restore too deep: %+v", res)
	}
	res = f.restore(admin, &dest, ref(workspace.TypeFolder, s.a))
	if len(res.Failed) != 0 {
		t.Fatalf("restore into dest: %+v", res)
	}
	node, err := f.svc.GetFolder(f.ctx, admin, f.dep, s.c)
	if err != nil || len(node.FolderPath) != 3 || node.FolderPath[0].ID != dest {
		t.Fatalf("C after the restore into dest: %+v %v", node.FolderPath, err)
	}
}

// TestTrashAccess: the trash lists what the caller could view where it was, or trashed
// itself; a viewer restores nothing; another deployment's trash is out of reach.
func TestTrashAccess(t *testing.T) {
	f := newFixture(t)
	private := f.folder(admin, "private", 0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", private)
	mine := f.item(ai, workspace.TypeWorkbook, "mine", 0)
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, wb); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, mine); err != nil {
		t.Fatal(err)
	}
	if got := f.trashIDs(ai); !slices.Equal(got, []int64{mine}) {
		t.Fatalf("ai sees %v in the trash, want only its own %d", got, mine)
	}
	if got := f.trashIDs(admin); len(got) != 2 {
		t.Fatalf("admin sees %v", got)
	}
	res := f.restore(ai, nil, ref(workspace.TypeWorkbook, wb))
	if len(res.Failed) != 1 || res.Failed[0].Err.Kind != errs.Forbidden {
		t.Fatalf("ai restoring another's item from a private folder: %+v", res)
	}
	res = f.restore(viewer, nil, ref(workspace.TypeWorkbook, mine))
	if len(res.Failed) != 1 || res.Failed[0].Err.Kind != errs.Forbidden {
		t.Fatalf("viewer restoring: %+v", res)
	}
	other := *admin
	other.Deployment = &identity.Deployment{ID: 8}
	res, err := f.svc.RestoreTrash(f.ctx, &other, 8, []workspace.ItemRef{ref(workspace.TypeWorkbook, wb)}, nil)
	if err != nil || len(res.Failed) != 1 || res.Failed[0].Err.Kind != errs.NotFound {
		t.Fatalf("restore from another deployment: %+v %v", res, err)
	}
	pres, err := f.svc.PurgeTrash(f.ctx, &other, 8, []workspace.ItemRef{ref(workspace.TypeWorkbook, wb)})
	if err != nil || len(pres.Failed) != 1 || pres.Failed[0].Err.Kind != errs.NotFound {
		t.Fatalf("purge from another deployment: %+v %v", pres, err)
	}
	if err := f.svc.DeleteFolderTree(f.ctx, &other, 8, private); err == nil {
		t.Fatal("another deployment's folder deleted")
	}
	page, err := f.svc.ListTrash(f.ctx, &other, 8, 50, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("another deployment's trash: %+v %v", page.Items, err)
	}
}

// TestRecursiveDeleteIsBounded: a subtree over the configured limit is refused naming it,
// and nothing is trashed (the delete marks lifted: items can go in again).
func TestRecursiveDeleteIsBounded(t *testing.T) {
	f := newFixture(t)
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{RecursiveDeleteItems: 5}})
	s := f.subtree(0)
	err := f.svc.DeleteFolderTree(f.ctx, admin, f.dep, s.a)
	if e := wantErr(t, err, errs.Invalid, errs.CodeRecursiveDeleteLimit); !strings.Contains(e.Message, "recursive delete") || !strings.Contains(e.Message, " 5 ") {
		t.Fatalf("message %q", e.Message)
	}
	if live := f.stored(s.ids()); len(live) != 6 {
		t.Fatalf("%d of 6 items live after a refused delete", len(live))
	}
	f.item(admin, workspace.TypeWorkbook, "still fits", s.c)
}

// TestBulkDeleteAnswersPerItem: each item as its single delete answers it; one failure
// does not undo the others.
func TestBulkDeleteAnswersPerItem(t *testing.T) {
	f := newFixture(t)
	full := f.folder(admin, "full", 0)
	f.item(admin, workspace.TypeWorkbook, "inside", full)
	empty := f.folder(admin, "empty", 0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
	refs := []workspace.ItemRef{ref(workspace.TypeFolder, full), ref(workspace.TypeWorkbook, wb), ref(workspace.TypeReport, wb), ref(workspace.TypeFolder, empty), ref(workspace.TypeWorkbook, wb)}
	res, err := f.svc.BulkDelete(f.ctx, admin, f.dep, refs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Done, []workspace.ItemRef{refs[1], refs[3]}) || len(res.Failed) != 2 {
		t.Fatalf("bulk delete: %+v", res)
	}
	single := f.svc.DeleteFolder(f.ctx, admin, f.dep, full)
	if e, _ := errs.As(single); res.Failed[0].Err.Code != errs.CodeFolderNotEmpty || res.Failed[0].Err.Message != e.Message {
		t.Fatalf("failed %+v, the single delete %v", res.Failed[0].Err, single)
	}
	if res.Failed[1].Err.Kind != errs.NotFound {
		t.Fatalf("failed %+v", res.Failed[1].Err)
	}
	if got := f.trashIDs(admin); !slices.Contains(got, wb) || !slices.Contains(got, empty) {
		t.Fatalf("trash %v", got)
	}
}

// TestBulkDeleteWhenTheStoreFails: the items deleted before a fault stay deleted and are
// answered so; the one in flight may or may not have gone, the rest were not touched
// (503 not_applied each), as a bulk move answers.
func TestBulkDeleteWhenTheStoreFails(t *testing.T) {
	f := newFixture(t)
	var refs []workspace.ItemRef
	for i := range 3 {
		refs = append(refs, ref(workspace.TypeWorkbook, f.item(admin, workspace.TypeWorkbook, "wb"+string(rune('0'+i)), 0)))
	}
	deletes := 0
	f.store.Fault = func(method string) error {
		if method == "DeleteItem" {
			if deletes++; deletes == 2 {
				return errors.Join(errs.ErrUnavailable, errors.New("connection reset"))
			}
		}
		return nil
	}
	res, err := f.svc.BulkDelete(f.ctx, admin, f.dep, refs)
	if err != nil || !reflect.DeepEqual(res.Done, refs[:1]) || len(res.Failed) != 2 {
		t.Fatalf("deleted %+v, failed %+v (%v)", res.Done, res.Failed, err)
	}
	for i, fl := range res.Failed {
		want := []string{"may not have been deleted", "was not deleted"}[i]
		if fl.Ref != refs[i+1] || fl.Err.Kind != errs.Unavailable || fl.Err.Code != errs.CodeNotApplied || !strings.Contains(fl.Err.Message, want) {
			t.Fatalf("failed entry %d: %+v %+v, want not_applied saying %q", i, fl.Ref, fl.Err, want)
		}
	}
	f.store.Fault = nil
	if got := f.trashIDs(admin); !slices.Equal(got, []int64{refs[0].ID}) {
		t.Fatalf("trash %v, want only %d", got, refs[0].ID)
	}
}

// TestTrashSweepPurgesWhatOutlivedTheRetention: the sweep purges the roots trashed
// before the retention and leaves the later ones.
func TestTrashSweepPurgesWhatOutlivedTheRetention(t *testing.T) {
	f := newFixture(t)
	s := f.subtree(0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
	if err := f.svc.DeleteFolderTree(f.ctx, admin, f.dep, s.a); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, wb); err != nil {
		t.Fatal(err)
	}
	keep := workspace.NewTrashSweeper(workspace.Ports{Store: f.store}, workspace.Options{}, workspace.SweepOptions{Retention: time.Hour})
	if n, err := keep.Sweep(f.ctx); err != nil || n != 0 {
		t.Fatalf("a sweep within the retention purged %d (%v)", n, err)
	}
	// A retention in the future's past: everything trashed so far is older than it.
	all := workspace.NewTrashSweeper(workspace.Ports{Store: f.store}, workspace.Options{}, workspace.SweepOptions{Retention: -time.Minute})
	if n, err := all.Sweep(f.ctx); err != nil || n != 2 {
		t.Fatalf("the sweep purged %d (%v), want 2 roots", n, err)
	}
	if got := f.trashIDs(admin); len(got) != 0 {
		t.Fatalf("trash after the sweep: %v", got)
	}
	if n, err := all.Sweep(f.ctx); err != nil || n != 0 {
		t.Fatalf("a second sweep purged %d (%v)", n, err)
	}
}

// TestTrashListPages: the trash pages newest first with a cursor that goes on.
func TestTrashListPages(t *testing.T) {
	f := newFixture(t)
	var want []int64
	for i := range 5 {
		wb := f.item(admin, workspace.TypeWorkbook, "wb"+string(rune('0'+i)), 0)
		if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, wb); err != nil {
			t.Fatal(err)
		}
		want = append([]int64{wb}, want...)
	}
	var got []int64
	after := ""
	for range 5 {
		page, err := f.svc.ListTrash(f.ctx, admin, f.dep, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			got = append(got, e.ID)
		}
		if !page.PageInfo.HasNextPage {
			break
		}
		after = *page.PageInfo.EndCursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	if _, err := f.svc.ListTrash(f.ctx, admin, f.dep, 2, "not a cursor"); err == nil {
		t.Fatal("a bad cursor was accepted")
	}
}

// TestTrashEntriesShowTheKey: a trashed item's entry names its key, which a restore
// takes back.
func TestTrashEntriesShowTheKey(t *testing.T) {
	f := newFixture(t)
	w, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "w", Key: "sales.board"})
	if err != nil {
		t.Fatal(err)
	}
	plain := f.item(admin, workspace.TypeWorkbook, "plain", 0)
	for _, id := range []int64{w.ID, plain} {
		if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, id); err != nil {
			t.Fatal(err)
		}
	}
	page, err := f.svc.ListTrash(f.ctx, admin, f.dep, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[int64]*string{}
	for _, e := range page.Items {
		keys[e.ID] = e.Key
	}
	if k := keys[w.ID]; k == nil || *k != "sales.board" {
		t.Fatalf("the keyed workbook's entry has key %v, want sales.board", k)
	}
	if k, ok := keys[plain]; !ok || k != nil {
		t.Fatalf("the workbook without a key has entry key %v (listed %v), want null", k, ok)
	}
}
