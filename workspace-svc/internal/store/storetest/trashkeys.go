package storetest

import (
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func init() {
	cases = append(cases, []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"a-recursive-delete-releases-the-keys-below", testTrashOpReleasesKeys},
	}...)
}

// testTrashOpReleasesKeys: the trash op gives up the key holds of every item it trashes
// and counts a version on each; another item may then take the key.
func testTrashOpReleasesKeys(t *testing.T, f *fixture) {
	a := f.folder("a", 0)
	wb := f.item(f.dep, workspace.TypeWorkbook, "wb", a, func(it *workspace.Item) { it.Key = "below.wb" })
	f.commit(f.dep, f.trashOp(a, wb.ID))
	if got := f.byKey(f.dep, workspace.TypeWorkbook, 0, "below.wb"); len(got) != 0 {
		t.Fatalf("a trashed workbook found by key: %v", got)
	}
	got := f.inTrash(f.dep, wb.ID)
	if it := got[wb.ID]; it == nil || it.Key != "below.wb" || it.Version != wb.Version+1 {
		t.Fatalf("trashed workbook %+v, want key below.wb at version %d", it, wb.Version+1)
	}
	next := f.keyed(f.dep, workspace.TypeWorkbook, "below.wb")
	if got := f.byKey(f.dep, workspace.TypeWorkbook, 0, "below.wb"); got["below.wb"] == nil || got["below.wb"].ID != next.ID {
		t.Fatalf("by key after a new workbook took a trashed one's key: %v, want %d", got, next.ID)
	}
}
