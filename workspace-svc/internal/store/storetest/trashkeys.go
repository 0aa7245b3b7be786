package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func init() {
	cases = append(cases, []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"a-recursive-delete-keeps-the-keys-below-held", testTrashOpKeepsKeysHeld},
		{"a-restored-item-takes-its-key-back", testRestoreTakesKey},
		{"a-restore-whose-key-is-taken-fails-key-taken", testRestoreKeyTaken},
	}...)
}

// testTrashOpKeepsKeysHeld: the items a recursive delete trashes keep their keys held
// while they are in the trash (not found by key, but no other item may take the key),
// so restoring the folder never meets a key taken meanwhile; the trash op counts a
// version on each; the restore op brings them back by key, and the purge op frees the
// keys for good.
func testTrashOpKeepsKeysHeld(t *testing.T, f *fixture) {
	a := f.folder("a", 0)
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", a, func(it *workspace.Item) { it.Key = "below.wb" })
	f.commit(f.deploymentID, f.trashOp(a, wb.ID))
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "below.wb"); len(got) != 0 {
		t.Fatalf("a trashed workbook found by key: %v", got)
	}
	got := f.inTrash(f.deploymentID, wb.ID)
	if it := got[wb.ID]; it == nil || it.Key != "below.wb" || it.Version != wb.Version+1 {
		t.Fatalf("trashed workbook %+v, want key below.wb at version %d", it, wb.Version+1)
	}
	other := &workspace.Item{ID: f.id(), DeploymentID: f.deploymentID, Type: workspace.TypeWorkbook, Name: "other", Key: "below.wb",
		CreatedBy: 7, UpdatedBy: 7, CreatedAt: at, UpdatedAt: at, Version: 1}
	if err := f.s.InsertItem(f.ctx, other); !errors.Is(err, workspace.ErrKeyTaken) {
		t.Fatalf("insert with the key of an item trashed with a folder: %v, want ErrKeyTaken", err)
	}
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpRestore, Folder: a, To: 0, Anc: []int64{}, Depth: 1, Pull: []int64{}, Push: []int64{}, By: 8, At: at})
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "below.wb"); got["below.wb"] == nil || got["below.wb"].ID != wb.ID {
		t.Fatalf("by key after the folder's restore: %v, want %d", got, wb.ID)
	}
	b := f.folder("b", 0)
	w2 := f.item(f.deploymentID, workspace.TypeWorkbook, "w2", b, func(it *workspace.Item) { it.Key = "purged.wb" })
	f.commit(f.deploymentID, f.trashOp(b, w2.ID))
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpPurge, Folder: b, At: at.Add(-time.Hour)})
	next := f.keyed(f.deploymentID, workspace.TypeWorkbook, "purged.wb")
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "purged.wb"); got["purged.wb"] == nil || got["purged.wb"].ID != next.ID {
		t.Fatalf("by key after a purged workbook's key was taken again: %v, want %d", got, next.ID)
	}
}

func (f *fixture) trashKeyed(key string) *workspace.Item {
	f.t.Helper()
	wb := f.keyed(f.deploymentID, workspace.TypeWorkbook, key)
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		f.t.Fatalf("delete: %v %v", ok, err)
	}
	return wb
}

// testRestoreTakesKey: a restored workbook holds its key again (found by key, a new
// item cannot take it) and counts a version.
func testRestoreTakesKey(t *testing.T, f *fixture) {
	wb := f.trashKeyed("back.wb")
	if ok, err := f.s.RestoreItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, 0, 0, 7, at); err != nil || !ok {
		t.Fatalf("restore: %v %v", ok, err)
	}
	got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "back.wb")
	if it := got["back.wb"]; it == nil || it.ID != wb.ID || it.Version != wb.Version+2 {
		t.Fatalf("by key after the restore: %+v, want %d at version %d", got["back.wb"], wb.ID, wb.Version+2)
	}
	it := &workspace.Item{ID: f.id(), DeploymentID: f.deploymentID, Type: workspace.TypeWorkbook, Name: "again", Key: "back.wb",
		CreatedBy: 7, UpdatedBy: 7, CreatedAt: at, UpdatedAt: at, Version: 1}
	if err := f.s.InsertItem(f.ctx, it); !errors.Is(err, workspace.ErrKeyTaken) {
		t.Fatalf("insert with a restored item's key: %v, want ErrKeyTaken", err)
	}
}

// testRestoreKeyTaken: a restore whose key a live item now holds is ErrKeyTaken and
// leaves the item in the trash.
func testRestoreKeyTaken(t *testing.T, f *fixture) {
	wb := f.trashKeyed("taken.wb")
	next := f.keyed(f.deploymentID, workspace.TypeWorkbook, "taken.wb")
	if _, err := f.s.RestoreItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, 0, 0, 7, at); !errors.Is(err, workspace.ErrKeyTaken) {
		t.Fatalf("restore of a taken key: %v, want ErrKeyTaken", err)
	}
	if got := f.inTrash(f.deploymentID, wb.ID); got[wb.ID] == nil {
		t.Fatalf("a restore refused took the workbook out of the trash")
	}
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "taken.wb"); got["taken.wb"] == nil || got["taken.wb"].ID != next.ID {
		t.Fatalf("by key after a refused restore: %v, want %d", got, next.ID)
	}
}
