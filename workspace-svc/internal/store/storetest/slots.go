package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// take takes n slots of deploymentID under limit, one after another, and returns how many it got.
func (f *fixture) take(deploymentID, limit int64, n int) int {
	f.t.Helper()
	got := 0
	for range n {
		ok, err := f.s.TakeItemSlot(f.ctx, deploymentID, limit)
		f.check(err)
		if ok {
			got++
		}
	}
	return got
}

// testSlotsBuiltFromACount: a deployment whose items were stored before it had a counter
// (folders, workbooks and reports; tombstones and other deployments' items aside) has
// them counted when its first slot is taken.
func testSlotsBuiltFromACount(t *testing.T, f *fixture) {
	folder := f.folder("f", 0)
	f.folder("g", folder)
	f.item(f.deploymentID, workspace.TypeWorkbook, "wb", folder, nil)
	rp := f.item(f.deploymentID, workspace.TypeReport, "rp", 0, nil)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, rp.ID, workspace.TypeReport, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	for range 3 {
		f.item(f.other, workspace.TypeWorkbook, "elsewhere", 0, nil)
	}
	// 3 live items: a limit of 5 leaves 2 slots.
	if got := f.take(f.deploymentID, 5, 4); got != 2 {
		t.Fatalf("took %d slots under a limit of 5 with 3 items stored, want 2", got)
	}
	// The other deployment's counter is its own.
	if got := f.take(f.other, 4, 2); got != 1 {
		t.Fatalf("the other deployment took %d slots under a limit of 4 with 3 items, want 1", got)
	}
	// Once built, the counter is what counts: items stored without a slot are not seen.
	f.item(f.deploymentID, workspace.TypeWorkbook, "unslotted", 0, nil)
	if got := f.take(f.deploymentID, 6, 2); got != 1 {
		t.Fatalf("took %d slots under a limit of 6 with 5 taken, want 1", got)
	}
}

// testSlotsUnderConcurrency: concurrent takes never pass the limit together, the first
// ones included (they build the counter at once, from a count of 2 items).
func testSlotsUnderConcurrency(t *testing.T, f *fixture) {
	f.item(f.deploymentID, workspace.TypeWorkbook, "a", 0, nil)
	f.folder("b", 0)
	const limit = 12
	var took atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				ok, err := f.s.TakeItemSlot(f.ctx, f.deploymentID, limit)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					took.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := took.Load(); got != limit-2 {
		t.Fatalf("24 concurrent takes under a limit of %d with 2 items stored took %d slots, want %d", limit, got, limit-2)
	}
	if f.take(f.deploymentID, limit, 1) != 0 {
		t.Fatal("a take at the limit succeeded")
	}
}

// testSlotsReturned: a slot given back (a delete, a create that stored nothing) is taken
// again, and only as many as were taken come back.
func testSlotsReturned(t *testing.T, f *fixture) {
	if got := f.take(f.deploymentID, 3, 4); got != 3 {
		t.Fatalf("took %d of 3 slots", got)
	}
	f.check(f.s.ReturnItemSlot(f.ctx, f.deploymentID))
	if got := f.take(f.deploymentID, 3, 2); got != 1 {
		t.Fatalf("after one slot came back, took %d, want 1", got)
	}
	for range 5 { // more than were taken
		f.check(f.s.ReturnItemSlot(f.ctx, f.deploymentID))
	}
	if got := f.take(f.deploymentID, 3, 4); got != 3 {
		t.Fatalf("after every slot came back (and more), took %d, want 3", got)
	}
	// Returning to a deployment without a counter builds nothing: its first take counts.
	f.check(f.s.ReturnItemSlot(f.ctx, f.other))
	f.item(f.other, workspace.TypeWorkbook, "x", 0, nil)
	if got := f.take(f.other, 2, 2); got != 1 {
		t.Fatalf("the other deployment took %d slots under a limit of 2 with 1 item, want 1", got)
	}
}

// testIDTaken: an id handed out twice never passes for a success. An insert or a folder
// creation whose id is another item's fails with ErrIDTaken and changes nothing; the
// creation's own folder, applied again (renamed, moved, deleted since), is "applied
// before".
func testIDTaken(t *testing.T, f *fixture) {
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, func(it *workspace.Item) { it.Meta = json.RawMessage(`{"a":1}`) })
	again := *wb
	again.Name, again.CreatedBy = "another", 8
	if err := f.s.InsertItem(f.ctx, &again); !errors.Is(err, workspace.ErrIDTaken) {
		t.Fatalf("insert of a taken id: %v, want ErrIDTaken", err)
	}
	folder := &workspace.Item{ID: wb.ID, DeploymentID: f.deploymentID, Type: workspace.TypeFolder, Name: "f", CreatedBy: 7, UpdatedBy: 7,
		CreatedAt: at, UpdatedAt: at, Anc: []int64{}, Depth: 1}
	op := &workspace.TreeOp{Kind: workspace.OpCreate, Folder: wb.ID, By: 7, At: at, Created: folder}
	tv, err := f.s.ReadTree(f.ctx, f.deploymentID)
	f.check(err)
	ok, err := f.s.CommitTreeOp(f.ctx, f.deploymentID, tv.V, op)
	f.check(err)
	if !ok {
		t.Fatal("commit refused")
	}
	for range 2 { // and again, as the next request finishing it would
		if err := f.s.ApplyTreeOp(f.ctx, f.deploymentID, tv.V+1, op); !errors.Is(err, workspace.ErrIDTaken) {
			t.Fatalf("creation of a folder with a workbook's id: %v, want ErrIDTaken", err)
		}
	}
	got, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID}, workspace.AllParts)
	f.check(err)
	f.wantItem(got[wb.ID], wb)
	if nodes, err := f.s.Folders(f.ctx, f.deploymentID, []int64{wb.ID}); err != nil || len(nodes) != 0 {
		t.Fatalf("folders with the workbook's id: %v %v", nodes, err)
	}
	// The id handed out again and created by another op at a later version before this
	// one was applied: in another deployment, by another user, at another time. The
	// stored folder is changed at a version above this op's, yet not this op's.
	for _, c := range []struct {
		name         string
		deploymentID int64
		by           int64
		at           time.Time
	}{
		{"other-deployment", f.other, 7, at},
		{"other-creator", f.deploymentID, 8, at},
		{"other-time", f.deploymentID, 7, at.Add(time.Millisecond)},
	} {
		id := f.id()
		mk := func(deploymentID, by int64, when time.Time) *workspace.TreeOp {
			return &workspace.TreeOp{Kind: workspace.OpCreate, Folder: id, By: by, At: when, Created: &workspace.Item{ID: id, DeploymentID: deploymentID,
				Type: workspace.TypeFolder, Name: "twice", CreatedBy: by, UpdatedBy: by, CreatedAt: when, UpdatedAt: when, Anc: []int64{}, Depth: 1}}
		}
		first := mk(f.deploymentID, 7, at)
		v := f.commitOnly(first)
		f.commit(c.deploymentID, mk(c.deploymentID, c.by, c.at))
		if err := f.s.ApplyTreeOp(f.ctx, f.deploymentID, v, first); !errors.Is(err, workspace.ErrIDTaken) {
			t.Fatalf("%s: %v, want ErrIDTaken", c.name, err)
		}
	}
	// This op's own folder, renamed and moved since, then deleted: applied before.
	created := f.folder("created", 0)
	tv, err = f.s.ReadTree(f.ctx, f.deploymentID)
	f.check(err)
	createV, createOp := tv.V, tv.Op
	if _, err := f.s.UpdateItem(f.ctx, f.deploymentID, created, workspace.TypeFolder, workspace.ItemPrecondition{},
		workspace.ItemUpdate{Name: ptr("renamed"), Position: ptr(9.0), UpdatedAt: at, UpdatedBy: 8}); err != nil {
		t.Fatal(err)
	}
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, createV, createOp))
	dest := f.folder("dest", 0)
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpMove, Folder: created, To: dest, By: 7, At: at, Anc: []int64{dest}, Depth: 2,
		Pull: []int64{}, Push: []int64{dest}, Delta: 1})
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, createV, createOp))
	f.wantAncestors(created, 2, dest)
	if n := f.node(f.deploymentID, created); n.Name != "renamed" || n.Parent != dest {
		t.Fatalf("the folder after its creation was applied again: %+v", n)
	}
}

// commitOnly records op as the deployment's next tree version without applying it.
func (f *fixture) commitOnly(op *workspace.TreeOp) int64 {
	f.t.Helper()
	deploymentID := op.Created.DeploymentID
	tv, err := f.s.ReadTree(f.ctx, deploymentID)
	f.check(err)
	ok, err := f.s.CommitTreeOp(f.ctx, deploymentID, tv.V, op)
	f.check(err)
	if !ok {
		f.t.Fatalf("commit at version %d refused", tv.V)
	}
	return tv.V + 1
}
