// Package storetest is the contract of workspace.Store: one suite that every adapter
// runs (mongostore against FerretDB, memstore in memory), so the service's unit tests on
// the in-memory fake test what production does. Every case runs in parallel with a store
// of its own and deployments of its own.
package storetest

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// Run runs every case of the contract against a store newStore returns (one per case).
func Run(t *testing.T, newStore func(t *testing.T) workspace.Store) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &fixture{t: t, s: newStore(t), ctx: context.Background(), deploymentID: nextDep(), other: nextDep()})
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, f *fixture)
}{
	{"tree-version-starts-at-0-and-commits-compare-and-set", testTreeVersion},
	{"create-op-is-idempotent-and-keeps-ancestors", testCreateOp},
	{"move-op-rewrites-the-subtree-once-and-is-fenced", testMoveOp},
	{"move-op-touches-only-its-deployment", testMoveOpOfAnotherDeployment},
	{"folders-and-subtrees-are-live-folders-of-the-deployment", testFolders},
	{"items-are-found-live-and-by-deployment", testItems},
	{"items-come-with-only-the-parts-asked-for", testItemParts},
	{"update-item-sets-typed-fields-under-preconditions", testUpdateItem},
	{"move-item-only-from-where-the-check-saw-it", testMoveItem},
	{"has-children-counts-live-children-only", testContents},
	{"item-slots-count-the-items-stored-before-them", testSlotsBuiltFromACount},
	{"item-slots-hold-the-limit-under-concurrent-takes", testSlotsUnderConcurrency},
	{"item-slots-given-back-are-taken-again", testSlotsReturned},
	{"an-id-taken-by-another-item-is-never-applied", testIDTaken},
	{"children-come-in-listing-order-without-large-parts", testChildren},
	{"search-filters-sorts-and-pages", testSearch},
	{"leases-and-folder-deletes-exclude-each-other", testLeases},
	{"users-are-recorded-and-found", testUsers},
	{"favorites-are-per-user-and-deployment", testFavorites},
	{"ids-are-unique-under-concurrency", testIDs},
	{"embed-access-is-set-read-with-heads-and-cleared", testEmbedAccess},
	{"embed-access-only-on-a-live-folder-or-workbook-of-its-type", testEmbedAccessRefused},
	{"embed-access-follows-folder-moves", testEmbedAccessFollowsMoves},
	{"published-title-and-embeddable-follow-every-publish", testPublishedHead},
	{"workbook-by-public-id-is-of-its-deployment-and-live", testWorkbookByPublicID},
	{"workbook-heads-page-by-id", testWorkbookHeadsPage},
	{"promotion-links-are-made-once-and-change-by-compare-and-set", testPromotionLinks},
	{"promotion-history-lists-newest-first-in-pages", testPromotionHistory},
	{"keys-are-found-by-deployment-type-and-key", testKeysFound},
	{"a-key-is-held-once-per-deployment-and-type", testKeyTaken},
	{"a-key-is-held-once-under-concurrent-inserts", testKeyUnderConcurrency},
	{"a-folder-creation-whose-key-is-taken-is-void-for-good", testKeyTakenAtApply},
	{"a-deleted-item-gives-its-key-up-and-keeps-it", testKeyReleasedByDelete},
	{"a-key-is-set-once-and-kept-by-renames-and-moves", testKeySetOnce},
	{"versions-count-every-change-of-the-item", testVersions},
}

// deps hands out deployment ids no other case (or run) uses.
var deps atomic.Int64

func init() { deps.Store(time.Now().UnixNano()%1_000_000*1000 + 1_000_000_000) }

func nextDep() int64 { return deps.Add(1) }

// at is a time with MongoDB's precision (milliseconds).
var at = time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)

// fixture is one case's store and deployments (deploymentID, and other for isolation checks).
type fixture struct {
	t                   *testing.T
	s                   workspace.Store
	ctx                 context.Context
	deploymentID, other int64
}

func (f *fixture) check(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) id() int64 {
	f.t.Helper()
	id, err := f.s.NextID(f.ctx)
	f.check(err)
	return id
}

// commit records op as the deployment's next tree version and applies it; it returns
// the version.
func (f *fixture) commit(deploymentID int64, op *workspace.TreeOp) int64 {
	f.t.Helper()
	tv, err := f.s.ReadTree(f.ctx, deploymentID)
	f.check(err)
	ok, err := f.s.CommitTreeOp(f.ctx, deploymentID, tv.V, op)
	f.check(err)
	if !ok {
		f.t.Fatalf("commit at version %d refused", tv.V)
	}
	f.check(f.s.ApplyTreeOp(f.ctx, deploymentID, tv.V+1, op))
	return tv.V + 1
}

// node reads one live folder of deploymentID.
func (f *fixture) node(deploymentID, id int64) *workspace.FolderNode {
	f.t.Helper()
	got, err := f.s.Folders(f.ctx, deploymentID, []int64{id})
	f.check(err)
	if len(got) != 1 {
		f.t.Fatalf("folder %d: %d found", id, len(got))
	}
	return got[0]
}

// folderIn creates a folder of deploymentID inside parent (0: the root) as the service does: a
// create op with the ancestors and depth its parent implies.
func (f *fixture) folderIn(deploymentID int64, name string, parent int64) int64 {
	f.t.Helper()
	anc, depth := []int64{}, 1
	if parent != 0 {
		p := f.node(deploymentID, parent)
		anc, depth = append(slices.Clone(p.Anc), parent), p.Depth+1
	}
	id := f.id()
	f.commit(deploymentID, &workspace.TreeOp{Kind: workspace.OpCreate, Folder: id, To: parent, By: 7, At: at, Created: &workspace.Item{
		ID: id, DeploymentID: deploymentID, Type: workspace.TypeFolder, Name: name, Parent: parent, CreatedBy: 7, UpdatedBy: 7,
		CreatedAt: at, UpdatedAt: at, Anc: anc, Depth: depth, Version: 1}})
	return id
}

func (f *fixture) folder(name string, parent int64) int64 {
	f.t.Helper()
	return f.folderIn(f.deploymentID, name, parent)
}

// item inserts a workbook or report of deploymentID into folder and returns it as inserted.
func (f *fixture) item(deploymentID int64, typ workspace.ItemType, name string, folder int64, mod func(*workspace.Item)) *workspace.Item {
	f.t.Helper()
	it := &workspace.Item{ID: f.id(), DeploymentID: deploymentID, Type: typ, Name: name, Parent: folder, CreatedBy: 7, UpdatedBy: 7,
		CreatedAt: at, UpdatedAt: at, Version: 1}
	if mod != nil {
		mod(it)
	}
	f.check(f.s.InsertItem(f.ctx, it))
	return it
}

// wantAncestors fails unless folder id keeps exactly anc (in any order) at depth.
func (f *fixture) wantAncestors(id int64, depth int, anc ...int64) {
	f.t.Helper()
	n := f.node(f.deploymentID, id)
	got, want := slices.Sorted(slices.Values(n.Anc)), slices.Sorted(slices.Values(anc))
	if n.Depth != depth || !slices.Equal(got, want) {
		f.t.Fatalf("folder %d keeps ancestors %v at depth %d, want %v at depth %d", id, got, n.Depth, want, depth)
	}
}

// normal is it with what adapters may represent differently made equal: times in UTC,
// empty slices as nil; Bytes, which only reads set, is checked on its own
// (testItemParts), and so is Version, which every change counts (testVersions).
func normal(it *workspace.Item) workspace.Item {
	out := *it
	out.Bytes, out.Version = 0, 0
	out.CreatedAt, out.UpdatedAt = it.CreatedAt.UTC(), it.UpdatedAt.UTC()
	if len(out.Grants) == 0 {
		out.Grants = nil
	}
	if len(out.Anc) == 0 {
		out.Anc = nil
	}
	out.EmbedAccess = normalGrants(out.EmbedAccess)
	return out
}

func (f *fixture) wantItem(got, want *workspace.Item) {
	f.t.Helper()
	if got == nil {
		f.t.Fatalf("item %d not found", want.ID)
	}
	g, w := normal(got), normal(want)
	if !reflect.DeepEqual(g, w) {
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		f.t.Fatalf("item\n got %s\nwant %s", gj, wj)
	}
}

func ids(its []*workspace.Item) []int64 {
	out := make([]int64, len(its))
	for i, it := range its {
		out[i] = it.ID
	}
	return out
}

func nodeIDs(ns []*workspace.FolderNode) []int64 {
	out := make([]int64, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	slices.Sort(out)
	return out
}

func sorted(ids ...int64) []int64 { return slices.Sorted(slices.Values(ids)) }
