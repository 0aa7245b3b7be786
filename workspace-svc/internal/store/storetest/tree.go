package storetest

import (
	"slices"
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func testTreeVersion(t *testing.T, f *fixture) {
	tv, err := f.s.ReadTree(f.ctx, f.deploymentID)
	f.check(err)
	if tv.V != 0 || tv.Op != nil {
		t.Fatalf("a new deployment's tree: %+v, want version 0 without an op", tv)
	}
	if ok, err := f.s.CommitTreeOp(f.ctx, f.other, 5, &workspace.TreeOp{Kind: workspace.OpNone}); err != nil || ok {
		t.Fatalf("commit on a tree never read at version 5: %v %v, want refused", ok, err)
	}
	op := &workspace.TreeOp{Kind: workspace.OpMove, Folder: 11, To: 12, By: 7, At: at, Anc: []int64{12, 13}, Depth: 3,
		Pull: []int64{14}, Push: []int64{12, 13}, Delta: 1}
	if ok, err := f.s.CommitTreeOp(f.ctx, f.deploymentID, 0, op); err != nil || !ok {
		t.Fatalf("commit at version 0: %v %v", ok, err)
	}
	if ok, err := f.s.CommitTreeOp(f.ctx, f.deploymentID, 0, &workspace.TreeOp{Kind: workspace.OpNone}); err != nil || ok {
		t.Fatalf("a second commit at version 0: %v %v, want refused", ok, err)
	}
	tv, err = f.s.ReadTree(f.ctx, f.deploymentID)
	f.check(err)
	got := tv.Op
	if tv.V != 1 || got == nil || got.Kind != op.Kind || got.Folder != 11 || got.To != 12 || got.By != 7 || !got.At.Equal(at) ||
		!slices.Equal(got.Anc, op.Anc) || got.Depth != 3 || !slices.Equal(got.Pull, op.Pull) || !slices.Equal(got.Push, op.Push) || got.Delta != 1 {
		t.Fatalf("tree after the commit: version %d op %+v, want version 1 op %+v", tv.V, got, op)
	}
	if other, err := f.s.ReadTree(f.ctx, f.other); err != nil || other.V != 0 {
		t.Fatalf("another deployment's tree: %+v %v", other, err)
	}
}

func testCreateOp(t *testing.T, f *fixture) {
	a := f.folder("a", 0)
	b := f.folder("b", a)
	f.wantAncestors(a, 1)
	f.wantAncestors(b, 2, a)
	// The op of the last version, applied again (the next request finishes it): nothing
	// changes, and no second folder appears.
	tv, err := f.s.ReadTree(f.ctx, f.deploymentID)
	f.check(err)
	if tv.Op == nil || tv.Op.Kind != workspace.OpCreate || tv.Op.Created == nil || tv.Op.Created.ID != b {
		t.Fatalf("recorded op: %+v, want the creation of %d", tv.Op, b)
	}
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, tv.V, tv.Op))
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{a, b}, workspace.AllParts)
	f.check(err)
	want := &workspace.Item{ID: b, DeploymentID: f.deploymentID, Type: workspace.TypeFolder, Name: "b", Parent: a, CreatedBy: 7, UpdatedBy: 7,
		CreatedAt: at, UpdatedAt: at, Anc: []int64{a}, Depth: 2}
	f.wantItem(got[b], want)
	// A tombstone keeps its id: re-applying its creation does not bring it back.
	c := f.folder("c", 0)
	ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, c, at, at.Add(1))
	f.check(err)
	if !ok {
		t.Fatal("begin delete of an unleased folder refused")
	}
	_, err = f.s.EndFolderDelete(f.ctx, f.deploymentID, c, true, 7, at)
	f.check(err)
	tv, err = f.s.ReadTree(f.ctx, f.deploymentID)
	f.check(err)
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, tv.V, tv.Op))
	if got, _ := f.s.Folders(f.ctx, f.deploymentID, []int64{c}); len(got) != 0 {
		t.Fatalf("a deleted folder came back: %+v", got[0])
	}
}

func testMoveOp(t *testing.T, f *fixture) {
	// a/b/c and d; move b (with c) under d.
	a := f.folder("a", 0)
	b := f.folder("b", a)
	c := f.folder("c", b)
	d := f.folder("d", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", c, nil)
	op := &workspace.TreeOp{Kind: workspace.OpMove, Folder: b, To: d, By: 8, At: at.Add(1e9), Anc: []int64{d}, Depth: 2,
		Pull: []int64{a}, Push: []int64{d}, Delta: 0}
	v := f.commit(f.deploymentID, op)
	f.wantAncestors(b, 2, d)
	f.wantAncestors(c, 3, b, d)
	if n := f.node(f.deploymentID, b); n.Parent != d {
		t.Fatalf("moved folder's parent %d, want %d", n.Parent, d)
	}
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{b, wb.ID}, workspace.AllParts)
	f.check(err)
	if it := got[b]; it.UpdatedBy != 8 || !it.UpdatedAt.Equal(at.Add(1e9)) {
		t.Fatalf("moved folder: updated by %d at %v, want 8 at %v", it.UpdatedBy, it.UpdatedAt, at.Add(1e9))
	}
	f.wantItem(got[wb.ID], wb) // a workbook inside moves with its folder: nothing of it changes
	// Applied again: idempotent.
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, v, op))
	f.wantAncestors(b, 2, d)
	f.wantAncestors(c, 3, b, d)
	// A newer move (b under a, one level deeper: c at 4), then the older op applied
	// late: the fence leaves the newer state alone.
	back := &workspace.TreeOp{Kind: workspace.OpMove, Folder: b, To: a, By: 8, At: at, Anc: []int64{a}, Depth: 2,
		Pull: []int64{d}, Push: []int64{a}, Delta: 0}
	f.commit(f.deploymentID, back)
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, v, op))
	f.wantAncestors(b, 2, a)
	f.wantAncestors(c, 3, a, b)
	// A move that changes depth shifts the subtree: b (with c) into c's sibling e at
	// level 3.
	e := f.folder("e", d)
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpMove, Folder: b, To: e, By: 8, At: at, Anc: []int64{d, e}, Depth: 3,
		Pull: []int64{a}, Push: []int64{d, e}, Delta: 1})
	f.wantAncestors(b, 3, d, e)
	f.wantAncestors(c, 4, b, d, e)
}

func testFolders(t *testing.T, f *fixture) {
	a := f.folder("a", 0)
	b := f.folder("b", a)
	c := f.folder("c", b)
	d := f.folder("d", a)
	x := f.folder("x", 0)
	o := f.folderIn(f.other, "o", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", a, nil)
	got, err := f.s.Folders(f.ctx, f.deploymentID, []int64{a, c, x, o, wb.ID, 999_999_999_999})
	f.check(err)
	if want := sorted(a, c, x); !slices.Equal(nodeIDs(got), want) {
		t.Fatalf("folders among ids: %v, want %v (not another deployment's, not a workbook, not a missing id)", nodeIDs(got), want)
	}
	for _, n := range got {
		if n.ID == c && (n.Name != "c" || n.Parent != b || n.CreatedBy != 7 || n.Depth != 3) {
			t.Fatalf("folder node %+v", n)
		}
	}
	sub, err := f.s.SubtreeFolders(f.ctx, f.deploymentID, []int64{a, x})
	f.check(err)
	if want := sorted(b, c, d); !slices.Equal(nodeIDs(sub), want) {
		t.Fatalf("subtrees of a and x: %v, want %v", nodeIDs(sub), want)
	}
	if none, err := f.s.SubtreeFolders(f.ctx, f.deploymentID, nil); err != nil || len(none) != 0 {
		t.Fatalf("subtree of nothing: %v %v", none, err)
	}
	// A tombstone is not live.
	ok, err := f.s.BeginFolderDelete(f.ctx, f.deploymentID, d, at, at.Add(1))
	f.check(err)
	if !ok {
		t.Fatal("begin delete refused")
	}
	_, err = f.s.EndFolderDelete(f.ctx, f.deploymentID, d, true, 7, at)
	f.check(err)
	sub, err = f.s.SubtreeFolders(f.ctx, f.deploymentID, []int64{a})
	f.check(err)
	if want := sorted(b, c); !slices.Equal(nodeIDs(sub), want) {
		t.Fatalf("subtree after deleting d: %v, want %v", nodeIDs(sub), want)
	}
}
