package workspace_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// racingStore is the in-memory store with another client's requests run at set points of
// a request of the service over it: right after a workbook or report move's write
// (afterMoveItem), and right before a tree commit (beforeCommit, with the number of the
// commit, from 1). The other client is a second service over the undecorated store.
type racingStore struct {
	*memstore.Store
	afterMoveItem func(id int64)
	beforeCommit  func(n int)
	commits       int
}

func (s *racingStore) MoveItem(ctx context.Context, dep, id, from, to, by int64, at time.Time) (bool, error) {
	ok, err := s.Store.MoveItem(ctx, dep, id, from, to, by, at)
	if ok && err == nil && s.afterMoveItem != nil {
		s.afterMoveItem(id)
	}
	return ok, err
}

func (s *racingStore) CommitTreeOp(ctx context.Context, dep, v int64, op *workspace.TreeOp) (bool, error) {
	s.commits++
	if s.beforeCommit != nil {
		s.beforeCommit(s.commits)
	}
	return s.Store.CommitTreeOp(ctx, dep, v, op)
}

// otherAdmin is the other client: another admin of the fixture's account.
var otherAdmin = principal(9, identity.RoleAdmin)

func pathIDs(path []workspace.FolderPathEntry) []int64 {
	out := []int64{}
	for _, e := range path {
		out = append(out, e.ID)
	}
	return out
}

func folderOf(w workspace.Workbook) int64 {
	if w.FolderID == nil {
		return 0
	}
	return *w.FolderID
}

// TestMoveAnswersTheStateItsOwnMoveMade: a move, single or per item of a bulk, answers
// the item as its own move left it: folderId its destination and folderPath that
// destination's path as the move checked it, even when another client moves the item
// and the destination right after the move's write, before the answer is rendered, or
// when a later item of the same bulk move reads the tree again.
func TestMoveAnswersTheStateItsOwnMoveMade(t *testing.T) {
	setup := func(t *testing.T) (*fixture, *racingStore, workspace.Service) {
		f := newFixture(t)
		rs := &racingStore{Store: f.store}
		return f, rs, workspace.NewService(workspace.Ports{Store: rs}, workspace.Options{})
	}
	for _, bulk := range []bool{false, true} {
		name := map[bool]string{false: "single-workbook-move", true: "bulk-workbook-move"}[bulk]
		t.Run(name, func(t *testing.T) {
			f, rs, svc := setup(t)
			a, b, x := f.folder(admin, "a", 0), f.folder(admin, "b", 0), f.folder(admin, "x", 0)
			dest := f.folder(admin, "dest", a)
			meta := json.RawMessage(`{"k":"v"}`)
			w, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "wb", Meta: meta})
			if err != nil {
				t.Fatal(err)
			}
			rs.afterMoveItem = func(id int64) {
				rs.afterMoveItem = nil
				// Another client: the workbook on to x, then dest under b.
				if _, err := f.svc.Move(f.ctx, otherAdmin, f.dep, ref(workspace.TypeWorkbook, id), x); err != nil {
					t.Errorf("the other client's workbook move: %v", err)
				}
				if _, err := f.svc.Move(f.ctx, otherAdmin, f.dep, ref(workspace.TypeFolder, dest), b); err != nil {
					t.Errorf("the other client's folder move: %v", err)
				}
			}
			var got workspace.Workbook
			if bulk {
				res, err := svc.BulkMove(f.ctx, admin, f.dep, []workspace.ItemRef{ref(workspace.TypeWorkbook, w.ID)}, dest)
				if err != nil || len(res.Moved) != 1 {
					t.Fatalf("bulk move: %+v %v", res, err)
				}
				got = res.Moved[0]
			} else {
				res, err := svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeWorkbook, w.ID), dest)
				if err != nil {
					t.Fatal(err)
				}
				got = res.Item
			}
			if rs.afterMoveItem != nil {
				t.Fatal("the other client never ran")
			}
			if folderOf(got) != dest || !reflect.DeepEqual(pathIDs(got.FolderPath), []int64{a, dest}) {
				t.Fatalf("answered folderId %d folderPath %v, want %d %v (the move's own destination and path)", folderOf(got), pathIDs(got.FolderPath), dest, []int64{a, dest})
			}
			if got.Name != "wb" || string(got.Meta) != string(meta) || got.User == nil || got.User.ID != admin.User.ID {
				t.Fatalf("answered name %q meta %s user %+v, want the workbook's", got.Name, got.Meta, got.User)
			}
			// The other client's moves did land: a read shows them.
			if p := f.parentOf(workspace.TypeWorkbook, w.ID); p != x {
				t.Fatalf("workbook now in %d, want %d", p, x)
			}
		})
	}
	t.Run("bulk-folder-moves-across-a-reload", func(t *testing.T) {
		f, rs, svc := setup(t)
		a, b := f.folder(admin, "a", 0), f.folder(admin, "b", 0)
		dest := f.folder(admin, "dest", a)
		f1, f2 := f.folder(admin, "f1", 0), f.folder(admin, "f2", 0)
		w := f.item(admin, workspace.TypeWorkbook, "wb", 0)
		rs.commits = 0
		rs.beforeCommit = func(n int) {
			if n != 2 { // f2's first commit: dest moves under b first, so it conflicts
				return
			}
			if _, err := f.svc.Move(f.ctx, otherAdmin, f.dep, ref(workspace.TypeFolder, dest), b); err != nil {
				t.Errorf("the other client's folder move: %v", err)
			}
		}
		res, err := svc.BulkMove(f.ctx, admin, f.dep, []workspace.ItemRef{ref(workspace.TypeFolder, f1), ref(workspace.TypeWorkbook, w), ref(workspace.TypeFolder, f2)}, dest)
		if err != nil || len(res.Moved) != 3 || len(res.Failed) != 0 {
			t.Fatalf("bulk move: %+v %v", res, err)
		}
		if rs.commits < 3 {
			t.Fatalf("%d commits, want f2's first to conflict", rs.commits)
		}
		want := map[int64][]int64{f1: {a, dest}, w: {a, dest}, f2: {b, dest}}
		for _, m := range res.Moved {
			if folderOf(m) != dest || !reflect.DeepEqual(pathIDs(m.FolderPath), want[m.ID]) {
				t.Errorf("item %d answered folderId %d folderPath %v, want %d %v", m.ID, folderOf(m), pathIDs(m.FolderPath), dest, want[m.ID])
			}
		}
	})
}
