package workspace

import (
	"context"
	"time"
)

// The trash's structural ops (TreeOp.Kind). Each is recorded with the tree version
// before it is applied, applied idempotently and fenced by the treeV of every document
// it touches (a trashed or restored workbook or report keeps one too), as moves are.
const (
	// OpTrash sends folder Folder and everything listed in IDs (the folders below it and
	// the workbooks and reports inside them) to the trash, as one delete whose root is
	// Folder; N is how many items that is, Folder included.
	OpTrash TreeOpKind = "trash"
	// OpRestore brings back the items trashed with folder Folder, Folder into To: Anc,
	// Depth, Pull, Push and Delta as a move of Folder into To computes them.
	OpRestore TreeOpKind = "restore"
	// OpPurge removes the items trashed with folder Folder for good; folders created
	// after At stay as bare tombstones (see TrashStore.PurgeItem).
	OpPurge TreeOpKind = "purge"
)

// TrashInfo is what a trashed item keeps for its restore: when and by whom it was
// trashed, and the root of the delete it was part of (the item the delete was called
// on). Its original parent is its Parent, which trashing leaves as it was.
type TrashInfo struct {
	At   time.Time
	By   int64
	Root int64
	// Items, on a root: how many items the delete trashed, the root included.
	Items int
}

// TrashKey is a position in the trash listing: newest first, then by id descending.
type TrashKey struct {
	At time.Time
	ID int64
}

// TrashRoot names one trashed root of some deployment, for the retention sweep.
type TrashRoot struct {
	DeploymentID int64
	ID           int64
	Type         ItemType
}

// TrashStore keeps the trash: tombstones (deleted items) with their TrashInfo (Item.Trash).
// Every read is of one deployment unless it says otherwise.
type TrashStore interface {
	// TrashedItems returns the trashed items among ids, by id: heads with Trash set.
	TrashedItems(ctx context.Context, deploymentID int64, ids []int64) (map[int64]*Item, error)
	// TrashRoots returns at most limit trashed roots after `after` (nil: from the newest),
	// newest first and then by id descending, projected like Children, with Trash set.
	TrashRoots(ctx context.Context, deploymentID int64, after *TrashKey, limit int) ([]*Item, error)
	// TrashedFolders returns the folders trashed with root (root included when it is one).
	TrashedFolders(ctx context.Context, deploymentID, root int64) ([]*FolderNode, error)
	// CountTrashed counts the items trashed with root, root included; with treeV > 0
	// only those the structural op of that version trashed.
	CountTrashed(ctx context.Context, deploymentID, root, treeV int64) (int, error)
	// SubtreeItems returns the live workbooks and reports directly inside any of
	// folders, at most max+1 (so a caller tells "at the limit" from "over it").
	SubtreeItems(ctx context.Context, deploymentID int64, folders []int64, max int) ([]ItemRef, error)
	// BeginSubtreeDelete marks every folder of ids as being deleted until `until`, if
	// none of them has a live lease and all are live; false, and no mark of this call
	// left, otherwise.
	BeginSubtreeDelete(ctx context.Context, deploymentID int64, ids []int64, now, until time.Time) (bool, error)
	// EndSubtreeDelete lifts the delete marks of ids (tombstones included).
	EndSubtreeDelete(ctx context.Context, deploymentID int64, ids []int64) error
	// RestoreItem brings back a workbook or report trashed as a root, into parent, with
	// its fence at treeV (the tree version the restore was decided at); false when it
	// is no such item.
	RestoreItem(ctx context.Context, deploymentID, id int64, typ ItemType, parent, treeV, by int64, at time.Time) (bool, error)
	// PurgeItem removes a workbook or report trashed as a root, for good; false when it
	// is no such item. Folders are purged by OpPurge: a folder's document, removed
	// before a late application of its creation, would come back, so a folder created
	// after the op's At is kept as a bare tombstone (out of the trash) instead.
	PurgeItem(ctx context.Context, deploymentID, id int64, typ ItemType) (bool, error)
	// ExpiredTrashRoots returns at most limit trashed roots of any deployment trashed
	// before `before`, oldest first.
	ExpiredTrashRoots(ctx context.Context, before time.Time, limit int) ([]TrashRoot, error)
	// TakeItemSlots takes n of the deployment's limit item slots in one atomic step
	// (false, and nothing taken, when fewer are free); ReturnItemSlots gives n back
	// (never below none taken). See TakeItemSlot.
	TakeItemSlots(ctx context.Context, deploymentID, n, limit int64) (bool, error)
	ReturnItemSlots(ctx context.Context, deploymentID, n int64) error
	// RemoveFavoritesOf forgets every user's favorites of the items ids.
	RemoveFavoritesOf(ctx context.Context, deploymentID int64, ids []int64) error
}
