package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func init() {
	cases = append(cases, []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"purging-a-workbook-removes-its-versions", testPurgeRemovesVersions},
	}...)
}

// testPurgeRemovesVersions: a workbook's kept versions survive its trash and restore,
// go with its purge (alone or with a folder's set) and another workbook's stay.
func testPurgeRemovesVersions(t *testing.T, f *fixture) {
	single := f.item(f.deploymentID, workspace.TypeWorkbook, "single", 0, nil)
	a := f.folder("a", 0)
	below := f.item(f.deploymentID, workspace.TypeWorkbook, "below", a, nil)
	other := f.item(f.deploymentID, workspace.TypeWorkbook, "other", 0, nil)
	for _, wb := range []int64{single.ID, below.ID, other.ID} {
		f.keep(f.version(f.deploymentID, wb, 1), 10)
	}
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, single.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := f.s.RestoreItem(f.ctx, f.deploymentID, single.ID, workspace.TypeWorkbook, 0, 0, 7, at); err != nil || !ok {
		t.Fatalf("restore: %v %v", ok, err)
	}
	if got := f.listVersions(f.deploymentID, single.ID, 0, 10); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("a restored workbook's versions: %v, want [1]", got)
	}
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, single.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete again: %v %v", ok, err)
	}
	if ok, err := f.s.PurgeItem(f.ctx, f.deploymentID, single.ID, workspace.TypeWorkbook); err != nil || !ok {
		t.Fatalf("purge: %v %v", ok, err)
	}
	if got := f.listVersions(f.deploymentID, single.ID, 0, 10); len(got) != 0 {
		t.Fatalf("a purged workbook's versions: %v", got)
	}
	f.commit(f.deploymentID, f.trashOp(a, below.ID))
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpPurge, Folder: a, At: at.Add(-time.Hour)})
	if got := f.listVersions(f.deploymentID, below.ID, 0, 10); len(got) != 0 {
		t.Fatalf("versions of a workbook purged with its folder: %v", got)
	}
	if got := f.listVersions(f.deploymentID, other.ID, 0, 10); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("another workbook's versions: %v, want [1]", got)
	}
}
