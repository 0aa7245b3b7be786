package storetest

import (
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// testMoveOpOfAnotherDeployment: a move applied for another deployment than its folder's
// changes nothing: every statement of a move is bounded by its deployment, which is what
// lets MongoDB serve the subtree's from dep_1_anc_1 instead of scanning every tenant's
// items.
func testMoveOpOfAnotherDeployment(t *testing.T, f *fixture) {
	a := f.folder("a", 0)
	b := f.folder("b", a)
	c := f.folder("c", b)
	d := f.folder("d", 0)
	op := &workspace.TreeOp{Kind: workspace.OpMove, Folder: b, To: d, By: 8, At: at, Anc: []int64{d}, Depth: 2,
		Pull: []int64{a}, Push: []int64{d}, Delta: 0}
	tv, err := f.s.ReadTree(f.ctx, f.deploymentID)
	f.check(err)
	f.check(f.s.ApplyTreeOp(f.ctx, f.other, tv.V+1, op))
	f.wantAncestors(b, 2, a)
	f.wantAncestors(c, 3, a, b)
	if n := f.node(f.deploymentID, b); n.Parent != a {
		t.Fatalf("a move applied for another deployment re-parented the folder under %d", n.Parent)
	}
	f.commit(f.deploymentID, op)
	f.wantAncestors(b, 2, d)
	f.wantAncestors(c, 3, b, d)
}
