package workspace_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// bulk moves refs into dest and fails unless the service answered the request.
func (f *fixture) bulk(p *identity.Principal, dest int64, refs ...workspace.ItemRef) workspace.BulkMoveResult {
	f.t.Helper()
	res, err := f.svc.BulkMove(f.ctx, p, f.dep, refs, dest)
	if err != nil {
		f.t.Fatalf("bulk move: %v", err)
	}
	return res
}

func movedIDs(res workspace.BulkMoveResult) []int64 {
	out := []int64{}
	for _, w := range res.Moved {
		out = append(out, w.ID)
	}
	return out
}

func failedRefs(res workspace.BulkMoveResult) []workspace.ItemRef {
	out := []workspace.ItemRef{}
	for _, fl := range res.Failed {
		out = append(out, fl.Ref)
	}
	return out
}

func (f *fixture) parentOf(typ workspace.ItemType, id int64) int64 {
	f.t.Helper()
	if typ == workspace.TypeFolder {
		fo, err := f.svc.GetFolder(f.ctx, admin, f.dep, id)
		if err != nil {
			f.t.Fatal(err)
		}
		if fo.ParentID == nil {
			return 0
		}
		return *fo.ParentID
	}
	w, err := f.svc.GetItem(f.ctx, admin, f.dep, typ, id)
	if err != nil {
		f.t.Fatal(err)
	}
	if w.FolderID == nil {
		return 0
	}
	return *w.FolderID
}

// TestBulkMoveRules: the spec's bulk-move rules on the service itself, over the
// in-memory store.
func TestBulkMoveRules(t *testing.T) {
	t.Run("rule-1-repeats-collapse-to-one-entry-each", func(t *testing.T) {
		f := newFixture(t)
		dest := f.folder(admin, "dest", 0)
		wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
		res := f.bulk(admin, dest, ref(workspace.TypeWorkbook, wb), ref(workspace.TypeWorkbook, wb), ref(workspace.TypeReport, 999), ref(workspace.TypeReport, 999))
		if !reflect.DeepEqual(movedIDs(res), []int64{wb}) || !reflect.DeepEqual(failedRefs(res), []workspace.ItemRef{ref(workspace.TypeReport, 999)}) {
			t.Fatalf("moved %v, failed %v", movedIDs(res), failedRefs(res))
		}
	})
	t.Run("rule-3-in-order-and-earlier-moves-kept", func(t *testing.T) {
		f := newFixture(t)
		a := f.folder(admin, "a", 0)
		b := f.folder(admin, "b", a)
		wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
		rp := f.item(admin, workspace.TypeReport, "rp", 0)
		res := f.bulk(admin, b, ref(workspace.TypeWorkbook, wb), ref(workspace.TypeFolder, a), ref(workspace.TypeReport, rp))
		if !reflect.DeepEqual(movedIDs(res), []int64{wb, rp}) {
			t.Fatalf("moved %v, want [%d %d] in request order", movedIDs(res), wb, rp)
		}
		if len(res.Failed) != 1 || res.Failed[0].Ref != ref(workspace.TypeFolder, a) || res.Failed[0].Err.Code != errs.CodeFolderCycle {
			t.Fatalf("failed %+v, want folder %d as a cycle", res.Failed, a)
		}
		if got := f.parentOf(workspace.TypeWorkbook, wb); got != b {
			t.Fatalf("the earlier move was undone: workbook in %d, want %d", got, b)
		}
	})
	t.Run("rule-4-an-empty-failed-means-everything-applied", func(t *testing.T) {
		f := newFixture(t)
		dest := f.folder(admin, "dest", 0)
		refs := []workspace.ItemRef{ref(workspace.TypeFolder, f.folder(admin, "f", 0)),
			ref(workspace.TypeWorkbook, f.item(admin, workspace.TypeWorkbook, "wb", 0)), ref(workspace.TypeReport, f.item(admin, workspace.TypeReport, "rp", 0))}
		res := f.bulk(admin, dest, refs...)
		if len(res.Failed) != 0 || len(res.Moved) != 3 {
			t.Fatalf("moved %v, failed %+v", movedIDs(res), res.Failed)
		}
		for _, r := range refs {
			if got := f.parentOf(r.Type, r.ID); got != dest {
				t.Fatalf("%v is in %d, want %d", r, got, dest)
			}
		}
		if res.Moved[0].FolderPath[0].ID != dest || res.From[refs[1]] != 0 {
			t.Fatalf("moved entry %+v, from %v", res.Moved[0], res.From)
		}
	})
	t.Run("rule-5-access-is-checked-per-item", func(t *testing.T) {
		f := newFixture(t)
		dest := f.folder(ai, "dest", 0)
		own := f.item(ai, workspace.TypeWorkbook, "own", 0)
		private := f.folder(admin, "private", 0)
		theirs := f.item(admin, workspace.TypeWorkbook, "theirs", private)
		res := f.bulk(ai, dest, ref(workspace.TypeWorkbook, own), ref(workspace.TypeWorkbook, theirs))
		if !reflect.DeepEqual(movedIDs(res), []int64{own}) || len(res.Failed) != 1 || res.Failed[0].Err.Kind != errs.Forbidden {
			t.Fatalf("moved %v, failed %+v", movedIDs(res), res.Failed)
		}
	})
	t.Run("rule-6-a-moved-entry-is-the-single-moves-answer", func(t *testing.T) {
		f := newFixture(t)
		d1 := f.folder(admin, "d1", 0)
		d2 := f.folder(admin, "d2", d1)
		wb := f.item(admin, workspace.TypeWorkbook, "wb", 0)
		bulk := f.bulk(admin, d2, ref(workspace.TypeWorkbook, wb)).Moved[0]
		res, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeWorkbook, wb), d2) // already there: a no-op
		if err != nil {
			t.Fatal(err)
		}
		if single := res.Item; !reflect.DeepEqual(bulk, single) {
			t.Fatalf("bulk entry %+v, single move %+v", bulk, single)
		}
	})
	t.Run("rule-7-a-failed-entry-is-the-single-moves-error", func(t *testing.T) {
		f := newFixture(t)
		outer := f.folder(admin, "outer", 0)
		inner := f.folder(admin, "inner", outer)
		private := f.folder(admin, "private", 0)
		theirs := f.item(admin, workspace.TypeReport, "theirs", private)
		for _, c := range []struct {
			name string
			p    *identity.Principal
			dest int64
			ref  workspace.ItemRef
			kind errs.Kind
		}{
			{"400-cycle", admin, inner, ref(workspace.TypeFolder, outer), errs.Invalid},
			{"403-no-access", ai, 0, ref(workspace.TypeReport, theirs), errs.Forbidden},
			{"403-viewer", viewer, 0, ref(workspace.TypeReport, theirs), errs.Forbidden},
			{"404-missing", admin, 0, ref(workspace.TypeWorkbook, 777), errs.NotFound},
			{"404-wrong-type", admin, 0, ref(workspace.TypeReport, outer), errs.NotFound},
			{"404-destination", admin, 888, ref(workspace.TypeReport, theirs), errs.NotFound},
		} {
			t.Run(c.name, func(t *testing.T) {
				res := f.bulk(c.p, c.dest, c.ref)
				_, err := f.svc.Move(f.ctx, c.p, f.dep, c.ref, c.dest)
				single := wantErr(t, err, c.kind, "")
				if len(res.Failed) != 1 || res.Failed[0].Ref != c.ref || !reflect.DeepEqual(res.Failed[0].Err, single) {
					t.Fatalf("bulk failure %+v, single move's error %+v", res.Failed, single)
				}
			})
		}
	})
}

func TestBulkMoveOfFolders(t *testing.T) {
	// chain[i] is at level i+1; sub has a child, so it is two levels high.
	setup := func(t *testing.T) (f *fixture, chain []int64, sub int64) {
		f = newFixture(t)
		parent := int64(0)
		for i := 1; i <= 7; i++ {
			parent = f.folder(admin, fmt.Sprintf("level-%d", i), parent)
			chain = append(chain, parent)
		}
		sub = f.folder(admin, "sub", 0)
		f.folder(admin, "sub-child", sub)
		return f, chain, sub
	}
	t.Run("depth-limit-counts-the-whole-moved-subtree", func(t *testing.T) {
		f, chain, sub := setup(t)
		res := f.bulk(admin, chain[6], ref(workspace.TypeFolder, sub))
		if len(res.Failed) != 1 || res.Failed[0].Err.Code != errs.CodeDepthLimit || !strings.Contains(res.Failed[0].Err.Message, "8 levels") {
			t.Fatalf("into level 7 (child at 9): %+v", res.Failed)
		}
		res = f.bulk(admin, chain[5], ref(workspace.TypeFolder, sub))
		if len(res.Failed) != 0 || len(res.Moved[0].FolderPath) != 6 || res.Moved[0].FolderPath[0].ID != chain[0] {
			t.Fatalf("into level 6 (child at 8): %+v", res)
		}
	})
	t.Run("a-folder-into-its-own-descendant-is-a-cycle", func(t *testing.T) {
		f, chain, _ := setup(t)
		res := f.bulk(admin, chain[4], ref(workspace.TypeFolder, chain[1]))
		if len(res.Failed) != 1 || res.Failed[0].Err.Code != errs.CodeFolderCycle {
			t.Fatalf("%+v", res.Failed)
		}
		if got := f.parentOf(workspace.TypeFolder, chain[1]); got != chain[0] {
			t.Fatalf("a refused move moved the folder to %d", got)
		}
	})
	t.Run("moved-subtree-keeps-its-paths", func(t *testing.T) {
		f, chain, sub := setup(t)
		f.bulk(admin, chain[2], ref(workspace.TypeFolder, sub))
		page, err := f.svc.List(f.ctx, admin, f.dep, sub, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 1 || len(page.Items[0].FolderPath) != 4 || page.Items[0].FolderPath[3].ID != sub {
			t.Fatalf("the subfolder's listing after the move: %+v", page.Items)
		}
	})
}

// TestBulkMoveWhenTheStoreFails: a store that fails midway still gets a 200 with one
// entry per item: those moved before the fault, then every other one not applied.
func TestBulkMoveWhenTheStoreFails(t *testing.T) {
	f := newFixture(t)
	dest := f.folder(admin, "dest", 0)
	var refs []workspace.ItemRef
	for i := range 3 {
		refs = append(refs, ref(workspace.TypeWorkbook, f.item(admin, workspace.TypeWorkbook, fmt.Sprint("wb", i), 0)))
	}
	moves := 0
	f.store.Fault = func(method string) error {
		if method == "MoveItem" {
			if moves++; moves == 2 {
				return errors.Join(errs.ErrUnavailable, errors.New("connection reset"))
			}
		}
		return nil
	}
	res := f.bulk(admin, dest, refs...)
	if !reflect.DeepEqual(movedIDs(res), []int64{refs[0].ID}) || !reflect.DeepEqual(failedRefs(res), refs[1:]) {
		t.Fatalf("moved %v, failed %v", movedIDs(res), failedRefs(res))
	}
	for i, fl := range res.Failed {
		want := []string{"may not have been moved", "was not moved"}[i]
		if fl.Err.Kind != errs.Unavailable || fl.Err.Code != errs.CodeNotApplied || !strings.Contains(fl.Err.Message, want) {
			t.Fatalf("failed entry %d: %+v, want not_applied saying %q", i, fl.Err, want)
		}
	}
}

// TestMoveKeepsItemsVisibleToTheirCreator: moving someone's workbook where its creator
// cannot see it needs manage on it.
func TestMoveKeepsItemsVisibleToTheirCreator(t *testing.T) {
	f := newFixture(t)
	private := f.folder(dev, "dev private", 0)
	wb := f.item(ai, workspace.TypeWorkbook, "ai's", 0)
	_, err := f.svc.Move(f.ctx, dev, f.dep, ref(workspace.TypeWorkbook, wb), private)
	if e := wantErr(t, err, errs.Forbidden, ""); !strings.Contains(e.Message, "hide it from its creator") {
		t.Fatalf("message %q", e.Message)
	}
	if _, err := f.svc.SetPermissions(f.ctx, dev, f.dep, private, []workspace.Grant{{UserID: ai.User.ID, Level: "view"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Move(f.ctx, dev, f.dep, ref(workspace.TypeWorkbook, wb), private); err != nil {
		t.Fatalf("with a grant the creator can view the folder: %v", err)
	}
}
