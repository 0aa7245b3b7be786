// Package memstore is an in-memory workspace.Store with the semantics of the MongoDB
// adapter (the contract suite, internal/store/storetest, runs against both): every method
// is atomic under one mutex, deleted items stay as tombstones, the structural ops are
// fenced by the tree version each folder last saw, and reads hand out copies. It lets
// the service's rules be tested without servers.
package memstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// Store keeps everything in maps behind one mutex.
type Store struct {
	// Fault, when set, is called at the start of every method with its name; an error it
	// returns is what the method fails with, as if the database had (tests of the
	// service's answers to a store failure).
	Fault func(method string) error

	// RepeatIDs, when set, is called by NextID with the id it would hand out; the id
	// returned instead is handed out (tests of an id handed out twice).
	RepeatIDs func(id int64) int64

	mu        sync.Mutex
	lastID    int64
	slots     map[int64]int64   // by deployment: the item slots taken
	items     map[int64]*record // by id, tombstones included
	trees     map[int64]*workspace.TreeVersion
	users     map[int64]workspace.User
	favorites map[string]*favorite // by dep:user:item
	favSeq    int64
	roots     map[int64]embedaccess.Grants // by deployment: the root's embed grants
	versions  map[int64]*versionRecord     // by versionId: the kept dashboard versions (versions.go)
	promo     promotions                   // promotions.go
}

var _ workspace.Store = (*Store)(nil)

// record is a stored item with what only storage keeps of it.
type record struct {
	item          workspace.Item
	treeV         int64 // the tree version of the last structural op applied to the folder
	leaseCount    int64
	leaseUntil    time.Time // zero: never leased
	deletingUntil time.Time // zero: not being deleted
	deleted       bool
	// void: a folder creation applied when its key was taken, kept as a tombstone that
	// was never live (no later application of its op makes it live).
	void bool
	// heldInTrash: trashed with a folder (a recursive delete), the item still holds its
	// key, until the folder is restored or purged.
	heldInTrash bool
}

type favorite struct {
	deploymentID, user, item int64
	typ                      workspace.ItemType
	at                       time.Time
	seq                      int64 // the order favorites were added in
}

// New returns an empty store.
func New() *Store {
	return &Store{items: map[int64]*record{}, trees: map[int64]*workspace.TreeVersion{}, users: map[int64]workspace.User{},
		favorites: map[string]*favorite{}, slots: map[int64]int64{}, roots: map[int64]embedaccess.Grants{}}
}

// begin locks the store for one method, or fails as the database would: on Fault, or on
// a context that has ended (a deadline is an unavailable database, as in mongostore).
func (s *Store) begin(ctx context.Context, method string) error {
	if s.Fault != nil {
		if err := s.Fault(method); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w: %w", method, errs.ErrUnavailable, err)
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	s.mu.Lock()
	return nil
}

// live returns the live item id of deployment deploymentID, or nil.
func (s *Store) live(deploymentID, id int64) *record {
	r := s.items[id]
	if r == nil || r.deleted || r.item.DeploymentID != deploymentID {
		return nil
	}
	return r
}

// clone is a deep copy of it: the draft and the published dashboard go through JSON, as
// they do in MongoDB. Its Bytes are those of its large parts.
func clone(it *workspace.Item) *workspace.Item {
	out := *it
	out.Grants = slices.Clone(it.Grants)
	out.Anc = slices.Clone(it.Anc)
	out.EmbedAccess = cloneGrants(it.EmbedAccess)
	if it.Trash != nil {
		t := *it.Trash
		out.Trash = &t
	}
	if it.PublishedTitle != nil {
		t := *it.PublishedTitle
		out.PublishedTitle = &t
	}
	out.Meta = slices.Clone(it.Meta)
	out.CalculatedFields = slices.Clone(it.CalculatedFields)
	out.Draft = viaJSON(it.Draft)
	out.Published = viaJSON(it.Published)
	out.Bytes = len(it.Meta) + len(it.CalculatedFields) + jsonLen(it.Draft) + jsonLen(it.Published)
	return &out
}

// jsonLen is the size of v as stored (JSON); 0 for nil.
func jsonLen[T any](v *T) int {
	if v == nil {
		return 0
	}
	b, _ := json.Marshal(v)
	return len(b)
}

func viaJSON[T any](v *T) *T {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out T
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return &out
}

// projected is a listed item: without what can be large, and without what only a head
// carries (the published version and ids, the embed grants and the published title).
func projected(it *workspace.Item) *workspace.Item {
	out := clone(it)
	out.Meta, out.CalculatedFields, out.Draft, out.Published = nil, nil, nil, nil
	out.PublishedVersion, out.PublicID, out.DashboardID = 0, "", 0
	out.EmbedAccess, out.PublishedTitle, out.Embeddable = embedaccess.Grants{}, nil, false
	return out
}

func node(it *workspace.Item) *workspace.FolderNode {
	return &workspace.FolderNode{ID: it.ID, Parent: it.Parent, Name: it.Name, Position: it.Position, CreatedBy: it.CreatedBy,
		Grants: slices.Clone(it.Grants), Anc: slices.Clone(it.Anc), Depth: it.Depth, EmbedAccess: cloneGrants(it.EmbedAccess)}
}

func cloneOp(op *workspace.TreeOp) *workspace.TreeOp {
	if op == nil {
		return nil
	}
	out := *op
	out.Anc, out.Pull, out.Push, out.IDs = slices.Clone(op.Anc), slices.Clone(op.Pull), slices.Clone(op.Push), slices.Clone(op.IDs)
	if op.Created != nil {
		out.Created = clone(op.Created)
	}
	return &out
}

// sortedIDs are the keys of the items map in id order, so every scan is deterministic.
func (s *Store) sortedIDs() []int64 {
	ids := make([]int64, 0, len(s.items))
	for id := range s.items {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// NextID allocates the next id.
func (s *Store) NextID(ctx context.Context) (int64, error) {
	if err := s.begin(ctx, "NextID"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	s.lastID++
	if s.RepeatIDs != nil {
		return s.RepeatIDs(s.lastID), nil
	}
	return s.lastID, nil
}

// TakeItemSlot takes one of the deployment's limit item slots; a deployment without a
// counter has it built from a count of its live items first, as in mongostore.
func (s *Store) TakeItemSlot(ctx context.Context, deploymentID, limit int64) (bool, error) {
	if err := s.begin(ctx, "TakeItemSlot"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	n, ok := s.slots[deploymentID]
	if !ok {
		for _, r := range s.items {
			if !r.deleted && r.item.DeploymentID == deploymentID {
				n++
			}
		}
	}
	if n >= limit {
		s.slots[deploymentID] = n
		return false, nil
	}
	s.slots[deploymentID] = n + 1
	return true, nil
}

// ReturnItemSlot gives one slot back, never below none taken.
func (s *Store) ReturnItemSlot(ctx context.Context, deploymentID int64) error {
	if err := s.begin(ctx, "ReturnItemSlot"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if n, ok := s.slots[deploymentID]; ok && n > 0 {
		s.slots[deploymentID] = n - 1
	}
	return nil
}

// RecordUser creates or replaces the user's details.
func (s *Store) RecordUser(ctx context.Context, u workspace.User) error {
	if err := s.begin(ctx, "RecordUser"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.users[u.ID] = u
	return nil
}

// Users returns the known users among ids.
func (s *Store) Users(ctx context.Context, ids []int64) (map[int64]workspace.User, error) {
	if err := s.begin(ctx, "Users"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make(map[int64]workspace.User, len(ids))
	for _, id := range ids {
		if u, ok := s.users[id]; ok {
			out[id] = u
		}
	}
	return out, nil
}

func favoriteKey(deploymentID, user, item int64) string {
	return fmt.Sprintf("%d:%d:%d", deploymentID, user, item)
}

// AddFavorite records ref as a favorite of user (idempotent: the first time stays).
func (s *Store) AddFavorite(ctx context.Context, deploymentID, user int64, ref workspace.ItemRef, at time.Time) error {
	if err := s.begin(ctx, "AddFavorite"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := favoriteKey(deploymentID, user, ref.ID)
	if s.favorites[k] == nil {
		s.favSeq++
		s.favorites[k] = &favorite{deploymentID: deploymentID, user: user, item: ref.ID, typ: ref.Type, at: at, seq: s.favSeq}
	}
	return nil
}

// RemoveFavorite forgets one favorite (idempotent).
func (s *Store) RemoveFavorite(ctx context.Context, deploymentID, user, item int64) error {
	if err := s.begin(ctx, "RemoveFavorite"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.favorites, favoriteKey(deploymentID, user, item))
	return nil
}

// RemoveItemFavorites forgets every user's favorite of item.
func (s *Store) RemoveItemFavorites(ctx context.Context, deploymentID, item int64) error {
	if err := s.begin(ctx, "RemoveItemFavorites"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for k, f := range s.favorites {
		if f.deploymentID == deploymentID && f.item == item {
			delete(s.favorites, k)
		}
	}
	return nil
}

// FavoriteIDs returns the ids of user's favorites in the order they were added, at most
// max+1.
func (s *Store) FavoriteIDs(ctx context.Context, deploymentID, user int64, max int) ([]int64, error) {
	if err := s.begin(ctx, "FavoriteIDs"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var mine []*favorite
	for _, f := range s.favorites {
		if f.deploymentID == deploymentID && f.user == user {
			mine = append(mine, f)
		}
	}
	slices.SortFunc(mine, func(a, b *favorite) int { return int(a.seq - b.seq) })
	out := []int64{}
	for _, f := range mine[:min(len(mine), max+1)] {
		out = append(out, f.item)
	}
	return out, nil
}

// FavoriteSet tells which of ids are favorites of user.
func (s *Store) FavoriteSet(ctx context.Context, deploymentID, user int64, ids []int64) (map[int64]bool, error) {
	if err := s.begin(ctx, "FavoriteSet"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[int64]bool{}
	for _, id := range ids {
		if s.favorites[favoriteKey(deploymentID, user, id)] != nil {
			out[id] = true
		}
	}
	return out, nil
}
