package workspace_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// limited is the fixture's service with a limit of n items per deployment.
func limited(t *testing.T, n int64) *fixture {
	f := newFixture(t)
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{ItemsPerDeployment: n}})
	return f
}

// wantLimit fails unless err is the item limit's refusal.
func wantLimit(t *testing.T, err error) {
	t.Helper()
	wantErr(t, err, errs.Invalid, errs.CodeItemLimit)
}

// TestItemLimitHoldsUnderConcurrentCreates: creates of every kind racing for the last
// slots: exactly the limit succeed, the others are refused with the limit's code.
func TestItemLimitHoldsUnderConcurrentCreates(t *testing.T) {
	f := limited(t, 10)
	parent := f.folder(admin, "parent", 0)
	var made, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				var err error
				switch i % 3 {
				case 0:
					_, err = f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: fmt.Sprintf("f%d-%d", g, i), ParentID: parent})
				case 1:
					_, err = f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "wb"})
				default:
					_, err = f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: "rp", FolderID: parent})
				}
				if e, ok := errs.As(err); ok && e.Code == errs.CodeItemLimit {
					refused.Add(1)
				} else if err != nil {
					t.Error(err)
				} else {
					made.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if made.Load() != 9 || refused.Load() != 24-9 {
		t.Fatalf("24 creates under a limit of 10 with 1 item: %d made, %d refused; want 9 and 15", made.Load(), refused.Load())
	}
}

// TestDeletesGiveTheirSlotBack: deleting a workbook, a report or a folder frees a slot
// once (a second delete of the same item frees nothing); a refused create takes none.
func TestDeletesGiveTheirSlotBack(t *testing.T) {
	f := limited(t, 3)
	folder := f.folder(admin, "f", 0)
	wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
	rp := f.item(admin, workspace.TypeReport, "rp", folder)
	_, err := f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "x"})
	wantLimit(t, err)
	for _, c := range []struct {
		name string
		del  func() error
	}{
		{"workbook", func() error { return f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, wb) }},
		{"report", func() error { return f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeReport, rp) }},
		{"folder", func() error { return f.svc.DeleteFolder(f.ctx, admin, f.dep, folder) }},
	} {
		if err := c.del(); err != nil {
			t.Fatalf("delete %s: %v", c.name, err)
		}
		if err := c.del(); err == nil {
			t.Fatalf("a second delete of the %s succeeded", c.name)
		}
		f.item(admin, workspace.TypeWorkbook, "in its slot", 0)
		_, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "one more"})
		wantLimit(t, err)
	}
	// A create refused for access or depth takes no slot: at the limit it is refused
	// for what it is, and a delete then leaves exactly one slot.
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, f.item3(t)); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "x", ParentID: 999})
	wantErr(t, err, errs.NotFound, "")
	f.folder(admin, "the last slot", 0)
	_, err = f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "x"})
	wantLimit(t, err)
}

// item3 is the id of one of the fixture's live workbooks.
func (f *fixture) item3(t *testing.T) int64 {
	t.Helper()
	page, err := f.svc.Search(f.ctx, admin, f.dep, workspace.SearchInput{Type: workspace.TypeWorkbook, First: 1})
	if err != nil || len(page.Items) == 0 {
		t.Fatalf("no workbook: %v", err)
	}
	return page.Items[0].ID
}

// TestACreateWithAnIDHandedOutTwice: when the allocator repeats an id (a block handed out
// twice), a folder or workbook create answers 503 (retry), stores nothing, changes
// nothing of the item holding the id and gives its slot back.
func TestACreateWithAnIDHandedOutTwice(t *testing.T) {
	f := limited(t, 3)
	taken := f.folder(admin, "holds the id", 0)
	for _, c := range []struct {
		name   string
		create func() error
	}{
		{"folder", func() error {
			_, err := f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "twice"})
			return err
		}},
		{"workbook", func() error {
			_, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "twice"})
			return err
		}},
	} {
		f.store.RepeatIDs = func(int64) int64 { return taken }
		if e := wantErr(t, c.create(), errs.Unavailable, ""); e.Message == "" {
			t.Fatalf("%s: an empty message", c.name)
		}
		f.store.RepeatIDs = nil
		got, err := f.svc.GetFolder(f.ctx, admin, f.dep, taken)
		if err != nil || got.Name != "holds the id" {
			t.Fatalf("%s: the folder holding the id: %+v %v", c.name, got, err)
		}
	}
	// Both slots came back: two more creates fit under the limit of 3, a third does not.
	// (The first of them starts from the tree whose last op is the void creation.)
	f.folder(admin, "second", 0)
	f.item(admin, workspace.TypeWorkbook, "third", 0)
	_, err := f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "fourth"})
	wantLimit(t, err)
}

// TestFoldersWithoutAPositionListInCreationOrder: a folder created without a position
// lists after every folder created before it without one, wherever those were created or
// moved; a position given is kept.
func TestFoldersWithoutAPositionListInCreationOrder(t *testing.T) {
	f := newFixture(t)
	a := f.folder(admin, "z first", 0)
	other := f.folder(admin, "elsewhere", 0)
	f.folder(admin, "inside", other)
	b := f.folder(admin, "y second", 0)
	given := 0.5
	c, err := f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "x given", Position: &given})
	if err != nil || c.Position != 0.5 {
		t.Fatalf("a folder with a position: %+v %v", c, err)
	}
	moved := f.folder(admin, "w moved", other)
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeFolder, moved), 0); err != nil {
		t.Fatal(err)
	}
	d := f.folder(admin, "v last", 0)
	page, err := f.svc.List(f.ctx, admin, f.dep, 0, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	var positions []float64
	for _, it := range page.Items {
		got = append(got, it.ID)
		positions = append(positions, it.Position)
	}
	if want := []int64{c.ID, a, other, b, moved, d}; !slices.Equal(got, want) {
		t.Fatalf("root lists %v (positions %v), want %v: the given position first, then creation order", got, positions, want)
	}
}
