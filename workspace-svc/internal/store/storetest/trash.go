package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func init() {
	cases = append(cases, []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"trash-op-trashes-what-it-lists-once-and-is-fenced", testTrashOp},
		{"restore-op-brings-back-the-set-moved-and-is-fenced", testRestoreOp},
		{"purge-op-removes-the-set-for-good", testPurgeOp},
		{"single-deletes-are-roots-restored-and-purged-once", testTrashSingle},
		{"trash-roots-page-newest-first-per-deployment", testTrashRoots},
		{"item-slots-are-taken-and-given-back-n-at-once", testSlotsN},
		{"subtree-delete-marks-all-or-none", testSubtreeMarks},
		{"subtree-items-are-live-workbooks-and-reports-bounded", testSubtreeItems},
		{"favorites-of-trashed-items-are-removed-together", testRemoveFavoritesOf},
	}...)
}

// tree3 is a folder a with a subfolder b, a workbook in a and a report in b.
func (f *fixture) tree3() (a, b int64, wb, rp *workspace.Item) {
	a = f.folder("a", 0)
	b = f.folder("b", a)
	wb = f.item(f.deploymentID, workspace.TypeWorkbook, "wb", a, func(it *workspace.Item) { it.Meta = []byte(`{"x":1}`) })
	rp = f.item(f.deploymentID, workspace.TypeReport, "rp", b, nil)
	return
}

func (f *fixture) trashOp(root int64, ids ...int64) *workspace.TreeOp {
	return &workspace.TreeOp{Kind: workspace.OpTrash, Folder: root, IDs: ids, N: len(ids) + 1, By: 9, At: at.Add(time.Hour)}
}

func (f *fixture) live(ids ...int64) []int64 {
	f.t.Helper()
	got, err := f.s.Items(f.ctx, f.deploymentID, ids, 0)
	f.check(err)
	var out []int64
	for id := range got {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (f *fixture) inTrash(deploymentID int64, ids ...int64) map[int64]*workspace.Item {
	f.t.Helper()
	got, err := f.s.TrashedItems(f.ctx, deploymentID, ids)
	f.check(err)
	return got
}

func testTrashOp(t *testing.T, f *fixture) {
	a, b, wb, rp := f.tree3()
	op := f.trashOp(a, b, wb.ID, rp.ID)
	v := f.commit(f.deploymentID, op)
	if live := f.live(a, b, wb.ID, rp.ID); len(live) != 0 {
		t.Fatalf("live after the trash op: %v", live)
	}
	got := f.inTrash(f.deploymentID, a, b, wb.ID, rp.ID)
	for _, id := range []int64{a, b, wb.ID, rp.ID} {
		it := got[id]
		if it == nil || it.Trash == nil || it.Trash.Root != a || it.Trash.By != 9 || !it.Trash.At.Equal(op.At) {
			t.Fatalf("trashed %d: %+v", id, it)
		}
	}
	if got[a].Trash.Items != 4 || got[wb.ID].Parent != a || got[rp.ID].Parent != b {
		t.Fatalf("trashed root %+v, workbook parent %d, report parent %d", got[a].Trash, got[wb.ID].Parent, got[rp.ID].Parent)
	}
	if n, err := f.s.CountTrashed(f.ctx, f.deploymentID, a, v); err != nil || n != 4 {
		t.Fatalf("count of what the op trashed: %d %v", n, err)
	}
	if n, err := f.s.CountTrashed(f.ctx, f.other, a, 0); err != nil || n != 0 {
		t.Fatalf("count from another deployment: %d %v", n, err)
	}
	nodes, err := f.s.TrashedFolders(f.ctx, f.deploymentID, a)
	f.check(err)
	if got := nodeIDs(nodes); !slices.Equal(got, sorted(a, b)) {
		t.Fatalf("trashed folders %v", got)
	}
	// Applied again: nothing changes (the count of its version stays).
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, v, op))
	if n, _ := f.s.CountTrashed(f.ctx, f.deploymentID, a, v); n != 4 {
		t.Fatalf("count after a second application: %d", n)
	}
	// Of another deployment, the op touches nothing.
	d := f.folder("d", 0)
	f.folderIn(f.other, "c", 0)
	f.commit(f.other, f.trashOp(d))
	if len(f.live(d)) != 1 {
		t.Fatal("another deployment's trash op trashed a folder")
	}
}

func testRestoreOp(t *testing.T, f *fixture) {
	a, b, wb, rp := f.tree3()
	dest := f.folder("dest", 0)
	v := f.commit(f.deploymentID, f.trashOp(a, b, wb.ID, rp.ID))
	// Restored into dest: a at level 2 under dest, b at level 3.
	op := &workspace.TreeOp{Kind: workspace.OpRestore, Folder: a, To: dest, Anc: []int64{dest}, Depth: 2, Pull: []int64{}, Push: []int64{dest}, Delta: 1, By: 8, At: at}
	rv := f.commit(f.deploymentID, op)
	if rv != v+1 {
		t.Fatalf("versions %d then %d", v, rv)
	}
	if live := f.live(a, b, wb.ID, rp.ID); !slices.Equal(live, sorted(a, b, wb.ID, rp.ID)) {
		t.Fatalf("live after the restore: %v", live)
	}
	f.wantAncestors(a, 2, dest)
	f.wantAncestors(b, 3, dest, a)
	items, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID, rp.ID}, workspace.AllParts)
	f.check(err)
	if items[wb.ID].Parent != a || string(items[wb.ID].Meta) != `{"x":1}` || items[rp.ID].Parent != b || items[wb.ID].Trash != nil {
		t.Fatalf("restored items %+v %+v", items[wb.ID], items[rp.ID])
	}
	if len(f.inTrash(f.deploymentID, a, b, wb.ID, rp.ID)) != 0 {
		t.Fatal("restored items still in the trash")
	}
	// A folder of the set can take leases again (its delete mark is gone).
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, b, at, at.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("lease on a restored folder: %v %v", ok, err)
	}
	f.check(f.s.ReleaseFolder(f.ctx, f.deploymentID, b))
	// Applied again, also after the workbook was deleted on its own: nothing changes.
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, rv, op))
	f.wantAncestors(b, 3, dest, a)
	if live := f.live(wb.ID); len(live) != 0 {
		t.Fatal("a late restore brought back a workbook deleted since")
	}
	// The trash op applied late does not trash the restored set again.
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, v, f.trashOp(a, b, rp.ID)))
	if live := f.live(a, b, rp.ID); len(live) != 3 {
		t.Fatalf("a late trash op undid the restore: live %v", live)
	}
}

func testPurgeOp(t *testing.T, f *fixture) {
	a, b, wb, rp := f.tree3()
	f.commit(f.deploymentID, f.trashOp(a, b, wb.ID, rp.ID))
	// b was created after the op's At: it stays, as a bare tombstone out of the trash.
	c := f.folder("c", 0)
	f.commit(f.deploymentID, f.trashOp(c))
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpPurge, Folder: a, At: at.Add(-time.Hour)})
	if got := f.inTrash(f.deploymentID, a, b, wb.ID, rp.ID); len(got) != 0 {
		t.Fatalf("in the trash after the purge: %v", got)
	}
	if n, err := f.s.CountTrashed(f.ctx, f.deploymentID, a, 0); err != nil || n != 0 {
		t.Fatalf("count after the purge: %d %v", n, err)
	}
	if len(f.inTrash(f.deploymentID, c)) != 1 {
		t.Fatal("the purge of a reached another root")
	}
	// A folder younger than At is kept as a bare tombstone: out of the trash, its id
	// still taken, so a late application of its creation changes nothing.
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpPurge, Folder: c, At: at.Add(-time.Hour)})
	if len(f.inTrash(f.deploymentID, c)) != 0 || len(f.live(c)) != 0 {
		t.Fatal("a purged young folder is still in the trash or live")
	}
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, 1, &workspace.TreeOp{Kind: workspace.OpCreate, Folder: c, By: 7, At: at, Created: &workspace.Item{
		ID: c, DeploymentID: f.deploymentID, Type: workspace.TypeFolder, Name: "c", CreatedBy: 7, UpdatedBy: 7, CreatedAt: at, UpdatedAt: at, Depth: 1}}))
	if len(f.live(c)) != 0 {
		t.Fatal("a late creation brought back a purged folder")
	}
}

func testTrashSingle(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	dest := f.folder("dest", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, nil)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 5, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	got := f.inTrash(f.deploymentID, wb.ID)[wb.ID]
	if got == nil || got.Trash.Root != wb.ID || got.Trash.By != 5 || got.Trash.Items != 1 || got.Parent != folder {
		t.Fatalf("a deleted workbook in the trash: %+v", got)
	}
	if ok, err := f.s.RestoreItem(f.ctx, f.other, wb.ID, workspace.TypeWorkbook, dest, 3, 8, at); err != nil || ok {
		t.Fatalf("restore from another deployment: %v %v", ok, err)
	}
	if ok, err := f.s.RestoreItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeReport, dest, 3, 8, at); err != nil || ok {
		t.Fatalf("restore as another type: %v %v", ok, err)
	}
	if ok, err := f.s.RestoreItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, dest, 3, 8, at); err != nil || !ok {
		t.Fatalf("restore: %v %v", ok, err)
	}
	if ok, err := f.s.RestoreItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, dest, 3, 8, at); err != nil || ok {
		t.Fatalf("a second restore: %v %v", ok, err)
	}
	live, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, 0)
	f.check(err)
	if live[wb.ID] == nil || live[wb.ID].Parent != dest || live[wb.ID].Trash != nil {
		t.Fatalf("restored workbook %+v", live[wb.ID])
	}
	if ok, err := f.s.PurgeItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook); err != nil || ok {
		t.Fatalf("purge of a live workbook: %v %v", ok, err)
	}
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 5, at); err != nil || !ok {
		t.Fatalf("delete again: %v %v", ok, err)
	}
	if ok, err := f.s.PurgeItem(f.ctx, f.other, wb.ID, workspace.TypeWorkbook); err != nil || ok {
		t.Fatalf("purge from another deployment: %v %v", ok, err)
	}
	if ok, err := f.s.PurgeItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook); err != nil || !ok {
		t.Fatalf("purge: %v %v", ok, err)
	}
	if ok, err := f.s.PurgeItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook); err != nil || ok {
		t.Fatalf("a second purge: %v %v", ok, err)
	}
	if len(f.inTrash(f.deploymentID, wb.ID)) != 0 {
		t.Fatal("a purged workbook in the trash")
	}
	// An empty folder deleted on its own is a root of the trash too.
	ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, folder, at, at.Add(time.Minute))
	f.check(err)
	if !ok {
		t.Fatal("begin delete refused")
	}
	if deleted, err := f.s.EndFolderDelete(f.ctx, f.deploymentID, folder, true, 5, at); err != nil || !deleted {
		t.Fatalf("end delete: %v %v", deleted, err)
	}
	if got := f.inTrash(f.deploymentID, folder)[folder]; got == nil || got.Trash.Root != folder || got.Trash.Items != 1 {
		t.Fatalf("a deleted folder in the trash: %+v", got)
	}
	if n, err := f.s.CountTrashed(f.ctx, f.deploymentID, folder, 0); err != nil || n != 1 {
		t.Fatalf("count of a folder deleted alone: %d %v", n, err)
	}
}

func testTrashRoots(t *testing.T, f *fixture) {
	var want []int64
	for i := range 5 {
		wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, nil)
		when := at.Add(time.Duration(i/2) * time.Minute) // pairs at the same time: then by id
		if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 5, when); err != nil || !ok {
			t.Fatalf("delete: %v %v", ok, err)
		}
		want = append([]int64{wb.ID}, want...)
	}
	a, b, wbA, _ := f.tree3()
	f.commit(f.deploymentID, f.trashOp(a, b, wbA.ID)) // a root; b and wbA are not
	want = append([]int64{a}, want...)
	other := f.item(f.other, workspace.TypeWorkbook, "elsewhere", 0, nil)
	if ok, err := f.s.DeleteItem(f.ctx, f.other, other.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 5, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	var got []int64
	var after *workspace.TrashKey
	for range 10 {
		page, err := f.s.TrashRoots(f.ctx, f.deploymentID, after, 2)
		f.check(err)
		for _, it := range page {
			if it.Trash == nil || it.Trash.Root != it.ID {
				t.Fatalf("a listed root %+v", it)
			}
			got = append(got, it.ID)
		}
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		after = &workspace.TrashKey{At: last.Trash.At, ID: last.ID}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("trash roots %v, want %v", got, want)
	}
	// The sweep's roots: of every deployment, oldest first, trashed before the cutoff.
	expired, err := f.s.ExpiredTrashRoots(f.ctx, at.Add(time.Minute), 1000)
	f.check(err)
	var mine []int64
	for _, r := range expired {
		if r.DeploymentID == f.deploymentID || r.DeploymentID == f.other {
			mine = append(mine, r.ID)
		}
	}
	if !slices.Contains(mine, other.ID) || !slices.Contains(mine, want[5]) || !slices.Contains(mine, want[4]) || slices.Contains(mine, want[3]) || slices.Contains(mine, a) {
		t.Fatalf("expired roots %v of %v", mine, want)
	}
}

func testSlotsN(t *testing.T, f *fixture) {
	f.item(f.deploymentID, workspace.TypeWorkbook, "a", 0, nil)
	// Built from a count of 1: 4 more fit under 5, not 5.
	if ok, err := f.s.TakeItemSlots(f.ctx, f.deploymentID, 5, 5); err != nil || ok {
		t.Fatalf("5 slots with 1 of 5 taken: %v %v", ok, err)
	}
	if ok, err := f.s.TakeItemSlots(f.ctx, f.deploymentID, 4, 5); err != nil || !ok {
		t.Fatalf("4 slots with 1 of 5 taken: %v %v", ok, err)
	}
	if got := f.take(f.deploymentID, 5, 1); got != 0 {
		t.Fatal("a slot past the limit")
	}
	f.check(f.s.ReturnItemSlots(f.ctx, f.deploymentID, 3))
	if got := f.take(f.deploymentID, 5, 4); got != 3 {
		t.Fatalf("took %d after 3 came back, want 3", got)
	}
	f.check(f.s.ReturnItemSlots(f.ctx, f.deploymentID, 100)) // never below none
	if ok, err := f.s.TakeItemSlots(f.ctx, f.deploymentID, 5, 5); err != nil || !ok {
		t.Fatalf("5 slots after all came back: %v %v", ok, err)
	}
}

func testSubtreeMarks(t *testing.T, f *fixture) {
	a := f.folder("a", 0)
	b := f.folder("b", a)
	now := at
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, b, now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	if ok, err := f.s.BeginSubtreeDelete(f.ctx, f.deploymentID, []int64{a, b}, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("marks while b is leased: %v %v", ok, err)
	}
	// None was left: a takes leases.
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, a, now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("lease on a after a refused marking: %v %v", ok, err)
	}
	f.check(f.s.ReleaseFolder(f.ctx, f.deploymentID, a))
	f.check(f.s.ReleaseFolder(f.ctx, f.deploymentID, b))
	if ok, err := f.s.BeginSubtreeDelete(f.ctx, f.other, []int64{a, b}, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("marks from another deployment: %v %v", ok, err)
	}
	if ok, err := f.s.BeginSubtreeDelete(f.ctx, f.deploymentID, []int64{a, b}, now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("marks: %v %v", ok, err)
	}
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, b, now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("lease on a marked folder: %v %v", ok, err)
	}
	f.check(f.s.EndSubtreeDelete(f.ctx, f.deploymentID, []int64{a, b}))
	if ok, err := f.s.LeaseFolder(f.ctx, f.deploymentID, b, now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("lease after the marks were lifted: %v %v", ok, err)
	}
}

func testSubtreeItems(t *testing.T, f *fixture) {
	a, b, wb, rp := f.tree3()
	f.item(f.other, workspace.TypeWorkbook, "elsewhere", a, nil)
	gone := f.item(f.deploymentID, workspace.TypeReport, "gone", b, nil)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, gone.ID, workspace.TypeReport, workspace.ItemPrecondition{}, 5, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	got, err := f.s.SubtreeItems(f.ctx, f.deploymentID, []int64{a, b}, 10)
	f.check(err)
	var gotIDs []int64
	for _, r := range got {
		gotIDs = append(gotIDs, r.ID)
	}
	slices.Sort(gotIDs)
	if !slices.Equal(gotIDs, sorted(wb.ID, rp.ID)) {
		t.Fatalf("subtree items %v, want %v", gotIDs, sorted(wb.ID, rp.ID))
	}
	if got, err := f.s.SubtreeItems(f.ctx, f.deploymentID, []int64{a, b}, 0); err != nil || len(got) != 1 {
		t.Fatalf("at most max+1: %v %v", got, err)
	}
}

func testRemoveFavoritesOf(t *testing.T, f *fixture) {
	for _, item := range []int64{1, 2, 3} {
		f.check(f.s.AddFavorite(f.ctx, f.deploymentID, 5, workspace.ItemRef{Type: workspace.TypeWorkbook, ID: item}, at))
		f.check(f.s.AddFavorite(f.ctx, f.other, 5, workspace.ItemRef{Type: workspace.TypeWorkbook, ID: item}, at))
	}
	f.check(f.s.RemoveFavoritesOf(f.ctx, f.deploymentID, []int64{1, 3}))
	if got, err := f.s.FavoriteIDs(f.ctx, f.deploymentID, 5, 10); err != nil || !slices.Equal(got, []int64{2}) {
		t.Fatalf("favorites left %v %v", got, err)
	}
	if got, err := f.s.FavoriteIDs(f.ctx, f.other, 5, 10); err != nil || len(got) != 3 {
		t.Fatalf("another deployment's favorites %v %v", got, err)
	}
}
