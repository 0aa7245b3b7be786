// Package mongostore is the MongoDB adapter of the workspace's ports (workspace.Store):
// its own records (records.go), mapped to and from the domain's types, the filters and
// updates, the indexes, and driver errors wrapped into errs.ErrUnavailable.
//
// Collections: items (folders, workbooks and reports), trees (one tree version per
// deployment), users, favorites, counters (id blocks), slots (the item slots each
// deployment has taken: {_id: dep, items}), embedroots (each deployment's root embed
// grants: {_id: dep, grants}), migrations (one marker per data migration done at start).
package mongostore

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// Store is the MongoDB adapter of the workspace.
type Store struct {
	items     *mongo.Collection
	trees     *mongo.Collection
	users     *mongo.Collection
	favorites *mongo.Collection
	slots     *mongo.Collection
	counters  *mongo.Collection
	// embedRoots keeps each deployment's root embed grants; migrations the markers of
	// the data migrations done at start.
	embedRoots *mongo.Collection
	migrations *mongo.Collection
	// ids is this replica's allocator; an insert that finds its id taken replaces it,
	// dropping the rest of a block that was handed out twice (newIDs).
	ids atomic.Pointer[mongox.IDAllocator]
}

var _ workspace.Store = (*Store)(nil)

// IDBlock is how many ids a replica reserves per counter update.
const IDBlock = 100

// New uses db's items, trees, users, favorites and counters collections.
func New(db *mongo.Database) *Store {
	s := &Store{
		items:      db.Collection("items"),
		trees:      db.Collection("trees"),
		users:      db.Collection("users"),
		favorites:  db.Collection("favorites"),
		slots:      db.Collection("slots"),
		counters:   db.Collection("counters"),
		embedRoots: db.Collection("embedroots"),
		migrations: db.Collection("migrations"),
	}
	s.newIDs()
	return s
}

// newIDs starts a new allocator: its first id comes from a block reserved afresh.
func (s *Store) newIDs() {
	s.ids.Store(mongox.NewIDAllocator(s.counters, "workspace_items", IDBlock))
}

// index is one index the queries use.
type index struct {
	name string
	keys bson.D
}

// uniqueSparse are the indexes that hold each value once, of the documents that have
// the field (keyIndex).
var uniqueSparse = map[string]bool{keyIndex: true}

// itemIndexes are the indexes of items. The listing's (listIndex) ends in type and
// deleted, so the database filters a folder's children by kind and tombstone on the index
// keys and reads only the documents it returns; its prefix {dep, parent} serves every
// other query by parent (HasChildren). The count of a deployment's items, made once when
// its slot counter is built, is answered from dep_1_deleted_1 alone. The embed read
// path's: a workbook by its dashboard's public id (publicIDIndex), and the keyset pages
// by _id of a deployment's workbooks (workbookIndex, whose prefix {dep, type} serves
// every query by type) and of its embeddable ones (embeddableIndex).
var itemIndexes = []index{
	{workbookIndex, bson.D{{Key: "dep", Value: 1}, {Key: "type", Value: 1}, {Key: "_id", Value: 1}}},
	{embeddableIndex, bson.D{{Key: "dep", Value: 1}, {Key: "embeddable", Value: 1}, {Key: "_id", Value: 1}}},
	{publicIDIndex, bson.D{{Key: "dep", Value: 1}, {Key: "publicId", Value: 1}}},
	{"dep_1_anc_1", bson.D{{Key: "dep", Value: 1}, {Key: "anc", Value: 1}}},
	{listIndex, bson.D{{Key: "dep", Value: 1}, {Key: "parent", Value: 1},
		{Key: "position", Value: 1}, {Key: "name", Value: 1}, {Key: "_id", Value: 1}, {Key: "type", Value: 1}, {Key: "deleted", Value: 1}}},
	{"dep_1_deleted_1", bson.D{{Key: "dep", Value: 1}, {Key: "deleted", Value: 1}}},
	{"dep_1_name_1__id_1", bson.D{{Key: "dep", Value: 1}, {Key: "name", Value: 1}, {Key: "_id", Value: 1}}},
	{"dep_1_updatedAt_1__id_1", bson.D{{Key: "dep", Value: 1}, {Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}},
	{keyIndex, bson.D{{Key: "kslot", Value: 1}}},
}

// listIndex is the listing's index (Children hints it).
const listIndex = "dep_1_parent_1_position_1_name_1__id_1_type_1_deleted_1"

// retiredItemIndexes are indexes of items no query needs any more, dropped at start
// where they exist (the readWrite role may drop indexes): every write maintains an
// index, read or not. dep_1_parent_1 is a prefix of listIndex, which serves its queries.
// dep_1_type_1, a prefix of workbookIndex, is no longer declared but is not dropped yet:
// an index is added in one release and the one it replaces dropped in a later one
// (docs/mongodb.md, "Rolling an index change"), so a rollback finds what it needs.
var retiredItemIndexes = []string{"dep_1_parent_1"}

// EnsureIndexes creates the indexes the queries use, skipping those that exist (FerretDB
// v1 drops the connection when asked to create an index that is already there), and
// drops the retired ones; then it runs the data migrations not yet done
// (backfillPublishedHeads). Every step is idempotent, so a start that fails part-way is
// finished by the next.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	if err := ensure(ctx, s.items, itemIndexes, retiredItemIndexes...); err != nil {
		return err
	}
	if err := ensure(ctx, s.favorites, []index{{"dep_1_user_1", bson.D{{Key: "dep", Value: 1}, {Key: "user", Value: 1}}}}); err != nil {
		return err
	}
	return s.backfillPublishedHeads(ctx)
}

// ensure creates the indexes of want that coll lacks and drops those of retired it has.
func ensure(ctx context.Context, coll *mongo.Collection, want []index, retired ...string) error {
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		return wrap("list indexes", err)
	}
	var existing []struct {
		Name string `bson:"name"`
	}
	if err := cur.All(ctx, &existing); err != nil {
		return wrap("list indexes", err)
	}
	have := map[string]bool{}
	for _, ix := range existing {
		have[ix.Name] = true
	}
	for _, name := range retired {
		if have[name] {
			if err := coll.Indexes().DropOne(ctx, name); err != nil {
				return wrap("drop index "+name, err)
			}
		}
	}
	var missing []mongo.IndexModel
	for _, ix := range want {
		if !have[ix.name] {
			opts := options.Index().SetName(ix.name)
			if uniqueSparse[ix.name] {
				opts.SetUnique(true).SetSparse(true)
			}
			missing = append(missing, mongo.IndexModel{Keys: ix.keys, Options: opts})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = coll.Indexes().CreateMany(ctx, missing)
	return wrap("ensure indexes", err)
}

// wrap names what failed; an unreachable database is errs.ErrUnavailable (a 503).
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if mongox.Unavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, errs.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// notDeleted matches the live items: a deleted one is a tombstone (deleted: true).
var notDeleted = bson.D{{Key: "$ne", Value: true}}

// NextID allocates an id from this replica's block of the counter.
func (s *Store) NextID(ctx context.Context) (int64, error) {
	id, err := s.ids.Load().Next(ctx)
	return id, wrap("allocate id", err)
}

// idTaken is the answer to an insert whose id is another item's: ErrIDTaken, and this
// replica's block dropped, since the rest of a block handed out twice is likely taken too.
func (s *Store) idTaken(what string, id int64) error {
	s.newIDs()
	return fmt.Errorf("%s %d: %w", what, id, workspace.ErrIDTaken)
}
