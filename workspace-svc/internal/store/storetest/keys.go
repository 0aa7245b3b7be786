package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// keyed is an insert of a workbook or report of deploymentID with key.
func (f *fixture) keyed(deploymentID int64, typ workspace.ItemType, key string) *workspace.Item {
	f.t.Helper()
	return f.item(deploymentID, typ, key, 0, func(it *workspace.Item) { it.Key = key })
}

// keyedFolder creates a folder of deploymentID at the root with key through a create op and
// returns the error of its application.
func (f *fixture) keyedFolder(deploymentID int64, key string) (int64, *workspace.TreeOp, int64, error) {
	f.t.Helper()
	id := f.id()
	op := &workspace.TreeOp{Kind: workspace.OpCreate, Folder: id, By: 7, At: at, Created: &workspace.Item{
		ID: id, DeploymentID: deploymentID, Type: workspace.TypeFolder, Name: key, Key: key, CreatedBy: 7, UpdatedBy: 7,
		CreatedAt: at, UpdatedAt: at, Anc: []int64{}, Depth: 1, Version: 1}}
	tv, err := f.s.ReadTree(f.ctx, deploymentID)
	f.check(err)
	ok, err := f.s.CommitTreeOp(f.ctx, deploymentID, tv.V, op)
	f.check(err)
	if !ok {
		f.t.Fatalf("commit at version %d refused", tv.V)
	}
	return id, op, tv.V + 1, f.s.ApplyTreeOp(f.ctx, deploymentID, tv.V+1, op)
}

func (f *fixture) byKey(deploymentID int64, typ workspace.ItemType, parts workspace.Parts, keys ...string) map[string]*workspace.Item {
	f.t.Helper()
	got, err := f.s.ItemsByKey(f.ctx, deploymentID, typ, keys, parts)
	f.check(err)
	return got
}

// testKeysFound: ItemsByKey finds the live items of its deployment and type by key,
// with the parts asked for; the same key on another type or deployment is another item.
func testKeysFound(t *testing.T, f *fixture) {
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, func(it *workspace.Item) { it.Key, it.Meta = "sales.q1", []byte(`{"a":1}`) })
	rp := f.keyed(f.deploymentID, workspace.TypeReport, "sales.q1")
	other := f.keyed(f.other, workspace.TypeWorkbook, "sales.q1")
	folder, _, _, err := f.keyedFolder(f.deploymentID, "sales.q1")
	f.check(err)
	f.item(f.deploymentID, workspace.TypeWorkbook, "no key", 0, nil)
	got := f.byKey(f.deploymentID, workspace.TypeWorkbook, workspace.PartMeta, "sales.q1", "missing", "")
	if len(got) != 1 || got["sales.q1"] == nil || got["sales.q1"].ID != wb.ID {
		t.Fatalf("workbooks by key: %v, want only workbook %d", got, wb.ID)
	}
	if w := got["sales.q1"]; w.Key != "sales.q1" || string(w.Meta) != `{"a":1}` || w.Version != 1 {
		t.Fatalf("the workbook by key: key %q, meta %s, version %d", w.Key, w.Meta, w.Version)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "sales.q1")["sales.q1"]; got.Meta != nil || got.Bytes == 0 {
		t.Fatalf("a head read by key: meta %s, bytes %d, want no meta and its size", got.Meta, got.Bytes)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeReport, 0, "sales.q1"); got["sales.q1"] == nil || got["sales.q1"].ID != rp.ID {
		t.Fatalf("reports by key: %v, want report %d", got, rp.ID)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeFolder, 0, "sales.q1"); got["sales.q1"] == nil || got["sales.q1"].ID != folder ||
		got["sales.q1"].Key != "sales.q1" {
		t.Fatalf("folders by key: %v, want folder %d", got, folder)
	}
	if got := f.byKey(f.other, workspace.TypeWorkbook, 0, "sales.q1"); got["sales.q1"] == nil || got["sales.q1"].ID != other.ID {
		t.Fatalf("the other deployment's workbooks by key: %v, want %d", got, other.ID)
	}
	if got := f.byKey(nextDep(), workspace.TypeWorkbook, 0, "sales.q1"); len(got) != 0 {
		t.Fatalf("a deployment without the key found %v", got)
	}
	// Heads and listings carry the key and the version too.
	heads, err := f.s.Items(f.ctx, f.deploymentID, []int64{wb.ID, folder}, 0)
	f.check(err)
	if heads[wb.ID].Key != "sales.q1" || heads[folder].Key != "sales.q1" || heads[folder].Version != 1 {
		t.Fatalf("heads: %+v %+v", heads[wb.ID], heads[folder])
	}
	kids, err := f.s.Children(f.ctx, f.deploymentID, workspace.ChildrenQuery{Limit: 10})
	f.check(err)
	for _, k := range kids {
		if k.ID == wb.ID && (k.Key != "sales.q1" || k.Version != 1) {
			t.Fatalf("the listed workbook: key %q version %d", k.Key, k.Version)
		}
	}
	many := make([]string, workspace.MaxKeysPerRead+1)
	for i := range many {
		many[i] = fmt.Sprintf("k%d", i)
	}
	if _, err := f.s.ItemsByKey(f.ctx, f.deploymentID, workspace.TypeWorkbook, many, 0); err == nil {
		t.Fatalf("a read of %d keys succeeded, at most %d are allowed", len(many), workspace.MaxKeysPerRead)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, many[:workspace.MaxKeysPerRead]...); len(got) != 0 {
		t.Fatalf("%d absent keys found %v", workspace.MaxKeysPerRead, got)
	}
}

// testKeyTaken: an insert whose key a live item of its type and deployment holds is
// ErrKeyTaken and stores nothing; an id taken stays ErrIDTaken.
func testKeyTaken(t *testing.T, f *fixture) {
	first := f.keyed(f.deploymentID, workspace.TypeWorkbook, "board")
	second := &workspace.Item{ID: f.id(), DeploymentID: f.deploymentID, Type: workspace.TypeWorkbook, Name: "second", Key: "board",
		CreatedBy: 7, UpdatedBy: 7, CreatedAt: at, UpdatedAt: at}
	if err := f.s.InsertItem(f.ctx, second); !errors.Is(err, workspace.ErrKeyTaken) {
		t.Fatalf("insert with a held key: %v, want ErrKeyTaken", err)
	}
	if got, err := f.s.Items(f.ctx, f.deploymentID, []int64{second.ID}, 0); err != nil || len(got) != 0 {
		t.Fatalf("the refused insert stored %v (%v)", got, err)
	}
	again := *first
	again.Key = "else"
	if err := f.s.InsertItem(f.ctx, &again); !errors.Is(err, workspace.ErrIDTaken) {
		t.Fatalf("insert of a taken id with a free key: %v, want ErrIDTaken", err)
	}
	dup := *first
	if err := f.s.InsertItem(f.ctx, &dup); !errors.Is(err, workspace.ErrIDTaken) {
		t.Fatalf("insert of a taken id with its own key: %v, want ErrIDTaken", err)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "board", "else"); len(got) != 1 || got["board"].ID != first.ID {
		t.Fatalf("by key after the refused inserts: %v", got)
	}
}

// testKeyUnderConcurrency: of concurrent inserts with one key, exactly one is stored.
func testKeyUnderConcurrency(t *testing.T, f *fixture) {
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	ids := make([]int64, n)
	for i := range n {
		ids[i] = f.id()
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.s.InsertItem(f.ctx, &workspace.Item{ID: ids[i], DeploymentID: f.deploymentID, Type: workspace.TypeReport, Name: "r",
				Key: "same", CreatedBy: 7, UpdatedBy: 7, CreatedAt: at, UpdatedAt: at})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, workspace.ErrKeyTaken):
			t.Fatalf("insert %d: %v, want success or ErrKeyTaken", i, err)
		}
	}
	got, err := f.s.Items(f.ctx, f.deploymentID, ids, 0)
	f.check(err)
	if won != 1 || len(got) != 1 {
		t.Fatalf("%d of %d concurrent inserts with one key succeeded, %d stored; want exactly one", won, n, len(got))
	}
}

// testKeyTakenAtApply: a folder creation whose key a live folder holds is ErrKeyTaken
// when applied and again when applied later, even once the key is free: the folder is
// never live.
func testKeyTakenAtApply(t *testing.T, f *fixture) {
	holder, _, _, err := f.keyedFolder(f.deploymentID, "team")
	f.check(err)
	id, op, v, err := f.keyedFolder(f.deploymentID, "team")
	if !errors.Is(err, workspace.ErrKeyTaken) {
		t.Fatalf("a creation with a held key: %v, want ErrKeyTaken", err)
	}
	if ok, err := f.s.EndFolderDelete(f.ctx, f.deploymentID, holder, true, 7, at); err != nil || !ok {
		t.Fatalf("delete of the holder: %v %v", ok, err)
	}
	if err := f.s.ApplyTreeOp(f.ctx, f.deploymentID, v, op); !errors.Is(err, workspace.ErrKeyTaken) {
		t.Fatalf("the void creation applied again once the key is free: %v, want ErrKeyTaken", err)
	}
	if got, err := f.s.Items(f.ctx, f.deploymentID, []int64{id}, 0); err != nil || len(got) != 0 {
		t.Fatalf("the void folder is live: %v (%v)", got, err)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeFolder, 0, "team"); len(got) != 0 {
		t.Fatalf("the key is held by %v, want nobody", got)
	}
	// A workbook may hold the same key as a folder, and a creation applied twice is
	// applied once.
	f.keyed(f.deploymentID, workspace.TypeWorkbook, "crew")
	id2, op2, v2, err := f.keyedFolder(f.deploymentID, "crew")
	f.check(err)
	f.check(f.s.ApplyTreeOp(f.ctx, f.deploymentID, v2, op2))
	if got := f.byKey(f.deploymentID, workspace.TypeFolder, 0, "crew"); got["crew"] == nil || got["crew"].ID != id2 {
		t.Fatalf("folders by key crew: %v, want %d", got, id2)
	}
}

// testKeyReleasedByDelete: a deleted item (a tombstone) no longer holds its key, so a
// new item takes it; the tombstone is not found by key.
func testKeyReleasedByDelete(t *testing.T, f *fixture) {
	wb := f.keyed(f.deploymentID, workspace.TypeWorkbook, "gone")
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, 7, at); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "gone"); len(got) != 0 {
		t.Fatalf("a deleted workbook found by key: %v", got)
	}
	next := f.keyed(f.deploymentID, workspace.TypeWorkbook, "gone")
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "gone"); got["gone"] == nil || got["gone"].ID != next.ID {
		t.Fatalf("by key after a new item took the key: %v, want %d", got, next.ID)
	}
	folder, _, _, err := f.keyedFolder(f.deploymentID, "old")
	f.check(err)
	if ok, err := f.s.EndFolderDelete(f.ctx, f.deploymentID, folder, true, 7, at); err != nil || !ok {
		t.Fatalf("folder delete: %v %v", ok, err)
	}
	if _, _, _, err := f.keyedFolder(f.deploymentID, "old"); err != nil {
		t.Fatalf("a folder with a deleted folder's key: %v", err)
	}
}

// testKeySetOnce: UpdateItem's Key sets the key of an item without one; an item with a
// key does not meet it; a held key is ErrKeyTaken and changes nothing. A rename, a move
// or a folder move keeps the key.
func testKeySetOnce(t *testing.T, f *fixture) {
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, nil)
	key := "later"
	got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, workspace.ItemUpdate{Key: &key, UpdatedAt: at, UpdatedBy: 7})
	f.check(err)
	if got == nil || got.Key != "later" || got.Version != 2 {
		t.Fatalf("after setting the key: %+v", got)
	}
	other := "other"
	if got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, workspace.ItemUpdate{Key: &other, UpdatedAt: at, UpdatedBy: 7}); err != nil || got != nil {
		t.Fatalf("setting the key of an item with one: %+v %v, want no such item", got, err)
	}
	f.keyed(f.deploymentID, workspace.TypeWorkbook, "held")
	plain := f.item(f.deploymentID, workspace.TypeWorkbook, "plain", 0, nil)
	held, name := "held", "renamed"
	if got, err := f.s.UpdateItem(f.ctx, f.deploymentID, plain.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, workspace.ItemUpdate{Key: &held, Name: &name, UpdatedAt: at, UpdatedBy: 7}); !errors.Is(err, workspace.ErrKeyTaken) {
		t.Fatalf("setting a held key: %+v %v, want ErrKeyTaken", got, err)
	}
	if h, _ := f.s.Items(f.ctx, f.deploymentID, []int64{plain.ID}, 0); h[plain.ID].Key != "" || h[plain.ID].Name != "plain" || h[plain.ID].Version != 1 {
		t.Fatalf("the refused update changed %+v", h[plain.ID])
	}
	// Renames and moves keep the key.
	if got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{}, workspace.ItemUpdate{Name: &name, UpdatedAt: at, UpdatedBy: 7}); err != nil || got.Key != "later" {
		t.Fatalf("after a rename: %+v %v", got, err)
	}
	dest := f.folder("dest", 0)
	if ok, err := f.s.MoveItem(f.ctx, f.deploymentID, wb.ID, 0, dest, 7, at); err != nil || !ok {
		t.Fatalf("move: %v %v", ok, err)
	}
	if got := f.byKey(f.deploymentID, workspace.TypeWorkbook, 0, "later"); got["later"] == nil || got["later"].Parent != dest {
		t.Fatalf("after a move: %v", got)
	}
	folder, _, _, err := f.keyedFolder(f.deploymentID, "moving")
	f.check(err)
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpMove, Folder: folder, To: dest, By: 7, At: at, Anc: []int64{dest}, Depth: 2})
	if got := f.byKey(f.deploymentID, workspace.TypeFolder, 0, "moving"); got["moving"] == nil || got["moving"].Parent != dest || got["moving"].Version != 2 {
		t.Fatalf("after a folder move: %+v", got["moving"])
	}
}

// testVersions: an item is at version 1 when stored; every change of it (an update, a
// move, a folder move, its embed grants, a delete) adds one; a stale Version
// precondition meets nothing and changes nothing.
func testVersions(t *testing.T, f *fixture) {
	wb := f.item(f.deploymentID, workspace.TypeWorkbook, "wb", 0, func(it *workspace.Item) { it.Version = 0 })
	version := func(id int64) int64 {
		t.Helper()
		got, err := f.s.Items(f.ctx, f.deploymentID, []int64{id}, 0)
		f.check(err)
		if got[id] == nil {
			t.Fatalf("item %d not found", id)
		}
		return got[id].Version
	}
	if v := version(wb.ID); v != 1 {
		t.Fatalf("a new item at version %d, want 1", v)
	}
	name := "renamed"
	up := func(pre workspace.ItemPrecondition) *workspace.Item {
		t.Helper()
		got, err := f.s.UpdateItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, pre, workspace.ItemUpdate{Name: &name, UpdatedAt: at, UpdatedBy: 7})
		f.check(err)
		return got
	}
	if got := up(workspace.ItemPrecondition{Version: ptr(int64(1))}); got == nil || got.Version != 2 {
		t.Fatalf("an update at version 1: %+v, want version 2", got)
	}
	if got := up(workspace.ItemPrecondition{Version: ptr(int64(1))}); got != nil {
		t.Fatalf("an update expecting a stale version met %+v", got)
	}
	if v := version(wb.ID); v != 2 {
		t.Fatalf("after a refused update: version %d, want 2", v)
	}
	dest := f.folder("dest", 0)
	if ok, err := f.s.MoveItem(f.ctx, f.deploymentID, wb.ID, 0, dest, 7, at); err != nil || !ok {
		t.Fatalf("move: %v %v", ok, err)
	}
	if v := version(wb.ID); v != 3 {
		t.Fatalf("after a move: version %d, want 3", v)
	}
	g := embedaccess.Grants{AllEmbedUsers: embedaccess.Read}
	if ok, err := f.s.SetEmbedAccess(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, g, 7, at); err != nil || !ok {
		t.Fatalf("set embed access: %v %v", ok, err)
	}
	if v := version(wb.ID); v != 4 {
		t.Fatalf("after embed access: version %d, want 4", v)
	}
	if v := version(dest); v != 1 {
		t.Fatalf("a new folder at version %d, want 1", v)
	}
	sub := f.folder("sub", 0)
	f.commit(f.deploymentID, &workspace.TreeOp{Kind: workspace.OpMove, Folder: sub, To: dest, By: 7, At: at, Anc: []int64{dest}, Depth: 2})
	if v := version(sub); v != 2 {
		t.Fatalf("after a folder move: version %d, want 2", v)
	}
	if v := version(dest); v != 1 {
		t.Fatalf("the destination of a move at version %d, want 1 (unchanged)", v)
	}
	grants := []workspace.Grant{{UserID: 9, Level: "view"}}
	if got, err := f.s.UpdateItem(f.ctx, f.deploymentID, dest, workspace.TypeFolder, workspace.ItemPrecondition{Version: ptr(int64(1))},
		workspace.ItemUpdate{Grants: &grants, UpdatedAt: at, UpdatedBy: 7}); err != nil || got == nil || got.Version != 2 {
		t.Fatalf("grants at version 1: %+v %v", got, err)
	}
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{Version: ptr(int64(3))}, 7, at); err != nil || ok {
		t.Fatalf("a delete expecting a stale version: %v %v", ok, err)
	}
	if ok, err := f.s.DeleteItem(f.ctx, f.deploymentID, wb.ID, workspace.TypeWorkbook, workspace.ItemPrecondition{Version: ptr(int64(4))}, 7, at); err != nil || !ok {
		t.Fatalf("a delete at the version: %v %v", ok, err)
	}
}
