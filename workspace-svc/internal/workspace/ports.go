package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// The ports: what the service needs from storage, in the domain's terms. The MongoDB
// adapter (internal/store/mongostore) and the in-memory fake (internal/store/memstore)
// implement them with the same semantics, which one contract suite
// (internal/store/storetest) checks against both. Every method answers for the live
// items of one deployment unless it says otherwise; an adapter wraps an unreachable
// database into errs.ErrUnavailable.

// Item is a stored folder, workbook or report. Items point at their parent (0: the
// root); no path is stored, so moving a workbook is a single-item write.
type Item struct {
	ID           int64
	DeploymentID int64
	Type         ItemType
	Name         string
	Position     float64
	Parent       int64
	// Key is the client-chosen key ("" = none; KeyPattern): kept through renames, moves
	// and deletes, held (unique per deployment and type) only while the item is live.
	Key string
	// Version is 1 when the item is stored and grows by one with every change of the
	// item itself (ItemStore); 0 for an item stored before versions were kept.
	Version   int64
	CreatedBy int64
	UpdatedBy int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// Folders only: the grants set on the folder, every ancestor's id (in no particular
	// order) and the folder's level (1 at the root), kept by the structural ops (TreeOp).
	Grants []Grant
	Anc    []int64
	Depth  int
	// Folders and workbooks: their own embed grants (empty: none), read with the head.
	EmbedAccess embedaccess.Grants
	// Workbooks: the published dashboard's title (config.title, else the dashboard's
	// title; nil: none) and whether it is published with allowEmbed, kept with the head
	// by every write of the published dashboard, so the embed listing reads no dashboard.
	PublishedTitle *string
	Embeddable     bool
	// Workbooks and reports: JSON objects kept verbatim (nil: none).
	Meta             json.RawMessage
	CalculatedFields json.RawMessage
	// Workbooks: the dashboard draft and the published dashboard (nil: none), the
	// published version (0: never published), the dashboard's id and public id.
	Draft            *DashboardConfig
	Published        *Dashboard
	PublishedVersion int64
	DashboardID      int64
	PublicID         string
	// Bytes is the size of the large parts as stored (meta, calculated fields, the draft
	// and the published dashboard as JSON), known from every read, heads included, so a
	// request can bound what it will read before reading it; -1 when the store holds no
	// record of it (an item written before sizes were kept). Writes ignore it.
	Bytes int
	// Trash is set on an item read from the trash (TrashStore), nil on a live one.
	Trash *TrashInfo
}

// FolderNode is what a request keeps of a folder to check access and paths.
type FolderNode struct {
	ID        int64
	Parent    int64
	Name      string
	Position  float64
	CreatedBy int64
	Grants    []Grant
	Anc       []int64
	Depth     int
	// EmbedAccess is the folder's own embed grants (empty: none).
	EmbedAccess embedaccess.Grants
}

// TreeOpKind names a structural change of a deployment's folder tree.
type TreeOpKind string

// The structural changes.
const (
	OpCreate TreeOpKind = "create" // a folder created
	OpMove   TreeOpKind = "move"   // a folder moved, with its subtree
	OpNone   TreeOpKind = "none"   // nothing left to apply
)

// TreeOp is a structural change of the folder tree, recorded with the tree version
// before it is applied so that anyone can finish it. A move carries everything its
// application writes, computed when it was validated: the folder's new ancestors and
// depth, and for each folder below it the ancestors to pull and push and the depth
// shift, so applying it reads nothing.
type TreeOp struct {
	Kind    TreeOpKind
	Folder  int64
	To      int64
	By      int64
	At      time.Time
	Created *Item // OpCreate: the folder to insert
	Anc     []int64
	Depth   int
	Pull    []int64
	Push    []int64
	Delta   int
	IDs     []int64 // OpTrash: the items trashed with Folder
	N       int     // OpTrash: how many items that is, Folder included
}

// TreeVersion is a deployment's tree version and the op that made it (nil: none yet).
type TreeVersion struct {
	V  int64
	Op *TreeOp
}

// TreeStore keeps each deployment's tree version and the folders' ancestors: the
// tree-consistency protocol (docs/workspace.md, "Storage and consistency").
type TreeStore interface {
	// ReadTree returns the deployment's tree version, starting it at 0 on first use.
	ReadTree(ctx context.Context, deploymentID int64) (TreeVersion, error)
	// CommitTreeOp records op as version v+1 if the tree is still at version v
	// (compare-and-set); false when another change got in first.
	CommitTreeOp(ctx context.Context, deploymentID, v int64, op *TreeOp) (bool, error)
	// ApplyTreeOp applies the op recorded as version v: idempotent, and fenced so that a
	// folder already changed at version v or later is left alone (a late or repeated
	// application never undoes a newer change). A create inserts op.Created once (ids
	// of deleted folders included): an id already stored is "applied before" only when
	// the stored item is this op's folder (same deployment, creator and creation time,
	// changed at version v or later); another item's is ErrIDTaken, and the op is void
	// (nothing of it is stored, nor ever will be). A move writes the folder, then its
	// subfolders.
	//
	// Every statement is bounded by the deployment deploymentID, whose op it is: it reads only
	// that deployment's index keys.
	ApplyTreeOp(ctx context.Context, deploymentID, v int64, op *TreeOp) error
	// Folders returns the live folders among ids.
	Folders(ctx context.Context, deploymentID int64, ids []int64) ([]*FolderNode, error)
	// SubtreeFolders returns every live folder below any of ids.
	SubtreeFolders(ctx context.Context, deploymentID int64, ids []int64) ([]*FolderNode, error)
}

// ItemUpdate is a change of an item's fields; nil fields stay as they are. UpdatedAt and
// UpdatedBy are always set.
type ItemUpdate struct {
	Name             *string
	Position         *float64
	Grants           *[]Grant
	Meta             json.RawMessage
	CalculatedFields json.RawMessage
	Draft            *DashboardConfig
	// Published sets the published dashboard with its version (VersionNumber), id and
	// public id.
	Published *Dashboard
	UpdatedAt time.Time
	UpdatedBy int64
	// ClearDraft removes the dashboard draft (Draft is then ignored).
	ClearDraft bool
	// Key sets the key of an item that has none (an item with a key does not meet the
	// update); a key a live item of the type holds is ErrKeyTaken.
	Key *string
}

// ItemPrecondition is what an update requires of the item besides being live and of its
// type; nil fields require nothing.
type ItemPrecondition struct {
	Parent           *int64 // still in this folder (0: the root)
	PublishedVersion *int64 // still at this published version (0: never published)
	Version          *int64 // still at this version (Item.Version)
}

// Parts selects the large parts of an item that a read returns. Every read returns the
// item's head: ids, type, name, position, parent, creator, times, a folder's grants,
// ancestors and depth, a workbook's published version, dashboard id and public id, and
// the size of the large parts (Bytes).
type Parts uint8

// The large parts, each bounded by its own limit (Limits).
const (
	PartMeta             Parts = 1 << iota // Meta
	PartCalculatedFields                   // CalculatedFields
	PartDraft                              // Draft
	PartPublished                          // Published
	// AllParts is the item in full: what renders the Workbook shape.
	AllParts = PartMeta | PartCalculatedFields | PartDraft | PartPublished
)

// ListKey is a position in a folder's listing order: position, name, id.
type ListKey struct {
	Position float64
	Name     string
	ID       int64
}

// ChildrenQuery asks for a batch of a folder's children in listing order.
type ChildrenQuery struct {
	Parent  int64
	Folders bool     // folders, or else workbooks and reports
	After   *ListKey // nil: from the first
	Limit   int
}

// SearchSort is the order of a search: by name or by updatedAt, then id.
type SearchSort int

// The search orders.
const (
	ByName SearchSort = iota
	ByUpdatedAt
)

// SearchKey is a position in a search's order: the sort field's value and the id.
type SearchKey struct {
	Name      string
	UpdatedAt time.Time
	ID        int64
}

// SearchQuery asks for a batch of the items matching a filter, in a search's order.
type SearchQuery struct {
	Parent       *int64   // nil: anywhere
	NameContains string   // literal text, case-insensitive ("": any name)
	Type         ItemType // "": any type
	CreatedBy    int64    // 0: anyone
	IDs          []int64  // nil: any item; empty: none
	Sort         SearchSort
	Desc         bool
	After        *SearchKey // nil: from the first
	Limit        int
}

// ItemStore keeps the items.
type ItemStore interface {
	// NextID allocates an id unique across the platform. An insert that finds its id
	// taken by another item (an id handed out twice) fails with ErrIDTaken.
	NextID(ctx context.Context) (int64, error)
	// Items returns the live items among ids, by id, with the large parts that parts
	// names; Items(..., 0) is a head read: what access and moves are decided on, never
	// an item's content.
	Items(ctx context.Context, deploymentID int64, ids []int64, parts Parts) (map[int64]*Item, error)
	// InsertItem stores a new workbook or report; ErrIDTaken when its id is another
	// item's.
	InsertItem(ctx context.Context, it *Item) error
	// UpdateItem changes a live item of type typ that meets pre and returns it as
	// changed, or nil when there is no such item. It answers the whole item: what every
	// caller answers with (a workbook or report in full; a folder is all head).
	UpdateItem(ctx context.Context, deploymentID, id int64, typ ItemType, pre ItemPrecondition, u ItemUpdate) (*Item, error)
	// DeleteItem tombstones a live item of type typ that meets pre (by, at: its
	// updatedBy and updatedAt); false when there is no such item. It answers nothing of
	// the item, which a delete does not need.
	DeleteItem(ctx context.Context, deploymentID, id int64, typ ItemType, pre ItemPrecondition, by int64, at time.Time) (bool, error)
	// MoveItem re-parents a workbook or report if it is still in folder from.
	MoveItem(ctx context.Context, deploymentID, id, from, to, by int64, at time.Time) (bool, error)
	// TakeItemSlot takes one of the deployment's limit item slots (folders, workbooks
	// and reports together) in one atomic step: false, and nothing taken, when all are
	// taken. The slots taken are a per-deployment counter kept beside the items, never
	// a count of them: a deployment without a counter (its items stored before there was
	// one) has it built once from a count of its live items, by whichever request gets
	// there first. Every live item holds one slot: a create takes it before storing the
	// item and gives it back (ReturnItemSlot) when nothing was stored; a delete gives it
	// back once the item is a tombstone.
	TakeItemSlot(ctx context.Context, deploymentID, limit int64) (bool, error)
	// ReturnItemSlot gives one slot back (never below none taken).
	ReturnItemSlot(ctx context.Context, deploymentID int64) error
	// HasChildren reports whether anything is inside folder.
	HasChildren(ctx context.Context, deploymentID, folder int64) (bool, error)
	// Children returns at most q.Limit children of q.Parent after q.After, by position,
	// name and id, without the parts that can be large (meta, calculated fields,
	// dashboards).
	Children(ctx context.Context, deploymentID int64, q ChildrenQuery) ([]*Item, error)
	// Search returns at most q.Limit items matching q after q.After, in q's order
	// (Desc reverses the field and the id), projected like Children.
	Search(ctx context.Context, deploymentID int64, q SearchQuery) ([]*Item, error)
}

// LeaseStore keeps folder deletes from racing the requests that put items into them.
type LeaseStore interface {
	// LeaseFolder marks folder as receiving items until `until`, unless it is gone or
	// being deleted; false means the folder is not there for the request.
	LeaseFolder(ctx context.Context, deploymentID, folder int64, now, until time.Time) (bool, error)
	// ReleaseFolder gives a lease back. A holder that never does (a crash) only delays
	// deletes until the lease has lapsed.
	ReleaseFolder(ctx context.Context, deploymentID, folder int64) error
	// BeginFolderDelete marks folder as being deleted until `until` if no lease on it is
	// live; false when one is (or the folder is gone).
	BeginFolderDelete(ctx context.Context, deploymentID, folder int64, now, until time.Time) (bool, error)
	// EndFolderDelete tombstones the folder (deleted) or lifts the delete mark; true
	// when it tombstoned a live folder (a second delete of the same folder is false, so
	// exactly one delete gives the folder's item slot back).
	EndFolderDelete(ctx context.Context, deploymentID, folder int64, deleted bool, by int64, at time.Time) (bool, error)
}

// User is what the service keeps of a user it has seen: what renders an item's `user`,
// and the role a move checks to keep an item visible to its creator.
type User struct {
	ID        int64
	Account   int64
	Email     string
	FirstName string
	Picture   string
	Role      string // the role when a request of theirs was last seen
}

// UserStore keeps the users seen (platform-wide, by id).
type UserStore interface {
	// RecordUser creates or replaces the user's details.
	RecordUser(ctx context.Context, u User) error
	// Users returns the known users among ids, by id.
	Users(ctx context.Context, ids []int64) (map[int64]User, error)
}

// FavoriteStore keeps each user's favorite items, per deployment.
type FavoriteStore interface {
	// AddFavorite records ref as a favorite of user (idempotent).
	AddFavorite(ctx context.Context, deploymentID, user int64, ref ItemRef, at time.Time) error
	// RemoveFavorite forgets one favorite (idempotent).
	RemoveFavorite(ctx context.Context, deploymentID, user, item int64) error
	// RemoveItemFavorites forgets every user's favorite of item.
	RemoveItemFavorites(ctx context.Context, deploymentID, item int64) error
	// FavoriteIDs returns the ids of user's favorites, at most max+1 (so a caller tells
	// "at the limit" from "over it").
	FavoriteIDs(ctx context.Context, deploymentID, user int64, max int) ([]int64, error)
	// FavoriteSet tells which of ids are favorites of user.
	FavoriteSet(ctx context.Context, deploymentID, user int64, ids []int64) (map[int64]bool, error)
}

// ErrIDTaken is an insert that found its allocated id stored for another item: the id
// was handed out twice (an id block reserved again after a failover rolled the first
// reservation back). Nothing of the insert is stored, and the store has dropped the rest
// of its id block, so the next id is a fresh one. It is never a success.
var ErrIDTaken = errors.New("the allocated id is already another item's")

// Store is everything the service keeps.
type Store interface {
	TreeStore
	ItemStore
	LeaseStore
	KeyStore
	UserStore
	FavoriteStore
	EmbedAccessStore
	VersionStore
	TrashStore
	PromotionStore // promotion_ports.go
}
