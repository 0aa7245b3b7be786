package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/mongox"
)

// itemDoc is one folder, workbook or report. Items point at their parent (0 = root);
// no path is stored, so a move is a single-document write.
type itemDoc struct {
	ID        int64     `bson:"_id"`
	Dep       int64     `bson:"dep"`
	Type      ItemType  `bson:"type"`
	Name      string    `bson:"name"`
	Position  float64   `bson:"position"`
	Parent    int64     `bson:"parent"`
	CreatedBy int64     `bson:"createdBy"`
	UpdatedBy int64     `bson:"updatedBy"`
	CreatedAt time.Time `bson:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt"`
	// TreeV is, for folders, the tree version of the last structural change applied to
	// it: the fence that makes a late re-application of an older move a no-op.
	TreeV  int64   `bson:"treeV"`
	Grants []Grant `bson:"grants,omitempty"`
	// Anc and Depth, on folders only: every ancestor's id and the folder's level (1 at the
	// root), kept by the structural ops (see treeOp).
	Anc   []int64 `bson:"anc,omitempty"`
	Depth int     `bson:"depth,omitempty"`
	// LeaseUntil is set while a request is putting items into this folder; a delete
	// waits for it to lapse. DeletingUntil is set while a delete checks emptiness.
	LeaseUntil    time.Time `bson:"leaseUntil,omitempty"`
	LeaseCount    int64     `bson:"leaseCount,omitempty"`
	DeletingUntil time.Time `bson:"deletingUntil,omitempty"`
	Deleted       bool      `bson:"deleted,omitempty"`
	// JSON documents kept verbatim.
	Meta             string `bson:"meta,omitempty"`
	CalculatedFields string `bson:"calculatedFields,omitempty"`
	Draft            string `bson:"draft,omitempty"`
	Published        string `bson:"published,omitempty"`
	PublishedVersion int64  `bson:"publishedVersion,omitempty"`
	PublicID         string `bson:"publicId,omitempty"`
	DashboardID      int64  `bson:"dashboardId,omitempty"`
}

// treeOp is a structural change of the folder tree (a folder moved or created),
// recorded in the tree document before it is applied so that anyone can finish it. A move
// carries everything its application writes, computed when it was validated: the folder's
// new ancestors and depth, and for each folder below it the ancestors to pull and push and
// the depth shift, so applying it reads nothing.
type treeOp struct {
	Kind   string    `bson:"kind"` // "move", "create", or "none" (nothing left to apply)
	Folder int64     `bson:"folder"`
	To     int64     `bson:"to"`
	By     int64     `bson:"by"`
	At     time.Time `bson:"at"`
	Doc    *itemDoc  `bson:"doc,omitempty"`
	Anc    []int64   `bson:"anc,omitempty"`
	Depth  int       `bson:"depth,omitempty"`
	Pull   []int64   `bson:"pull,omitempty"`
	Push   []int64   `bson:"push,omitempty"`
	Delta  int       `bson:"delta,omitempty"`
}

type treeDoc struct {
	ID int64   `bson:"_id"`
	V  int64   `bson:"v"`
	Op *treeOp `bson:"op"`
}

type userDoc struct {
	ID        int64  `bson:"_id"`
	Account   int64  `bson:"acct"`
	Email     string `bson:"email"`
	FirstName string `bson:"firstName"`
	Picture   string `bson:"picture"`
	// Role is the user's role when this replica last saw them: what a move checks to keep
	// an item visible to its creator.
	Role string `bson:"role"`
}

// Store is the MongoDB adapter of the workspace.
type Store struct {
	items     *mongo.Collection
	trees     *mongo.Collection
	users     *mongo.Collection
	favorites *mongo.Collection
	ids       *mongox.IDAllocator
}

// IDBlock is how many ids a replica reserves per counter update.
const IDBlock = 100

// NewStore uses db's items, trees, users and counters collections.
func NewStore(db *mongo.Database) *Store {
	return &Store{
		items:     db.Collection("items"),
		trees:     db.Collection("trees"),
		users:     db.Collection("users"),
		favorites: db.Collection("favorites"),
		ids:       mongox.NewIDAllocator(db.Collection("counters"), "workspace_items", IDBlock),
	}
}

// index is one index the queries use.
type index struct {
	name string
	keys bson.D
}

// EnsureIndexes creates the indexes the queries use, skipping those that exist (FerretDB
// v1 drops the connection when asked to create an index that is already there).
func (s *Store) EnsureIndexes(ctx context.Context) error {
	if err := ensure(ctx, s.items, []index{
		{"dep_1_parent_1", bson.D{{Key: "dep", Value: 1}, {Key: "parent", Value: 1}}},
		{"dep_1_type_1", bson.D{{Key: "dep", Value: 1}, {Key: "type", Value: 1}}},
		{"dep_1_anc_1", bson.D{{Key: "dep", Value: 1}, {Key: "anc", Value: 1}}},
		{"dep_1_parent_1_position_1_name_1__id_1", bson.D{{Key: "dep", Value: 1}, {Key: "parent", Value: 1},
			{Key: "position", Value: 1}, {Key: "name", Value: 1}, {Key: "_id", Value: 1}}},
		{"dep_1_name_1__id_1", bson.D{{Key: "dep", Value: 1}, {Key: "name", Value: 1}, {Key: "_id", Value: 1}}},
		{"dep_1_updatedAt_1__id_1", bson.D{{Key: "dep", Value: 1}, {Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}},
	}); err != nil {
		return err
	}
	return ensure(ctx, s.favorites, []index{{"dep_1_user_1", bson.D{{Key: "dep", Value: 1}, {Key: "user", Value: 1}}}})
}

func ensure(ctx context.Context, coll *mongo.Collection, want []index) error {
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
	var missing []mongo.IndexModel
	for _, ix := range want {
		if !have[ix.name] {
			missing = append(missing, mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetName(ix.name)})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = coll.Indexes().CreateMany(ctx, missing)
	return wrap("ensure indexes", err)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if mongox.Unavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, errs.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

var notDeleted = bson.D{{Key: "$ne", Value: true}}

func (s *Store) nextID(ctx context.Context) (int64, error) {
	id, err := s.ids.Next(ctx)
	return id, wrap("allocate id", err)
}

// readTree returns the deployment's tree version and its last structural op, creating
// the tree document on first use.
func (s *Store) readTree(ctx context.Context, dep int64) (treeDoc, error) {
	var d treeDoc
	err := s.trees.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: dep}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "v", Value: int64(0)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&d)
	if mongox.IsDuplicateKey(err) { // two first uses raced on MongoDB: the document exists now
		err = s.trees.FindOne(ctx, bson.D{{Key: "_id", Value: dep}}).Decode(&d)
	}
	return d, wrap("read tree version", err)
}

// casTree records op as version v+1 if the tree is still at version v.
func (s *Store) casTree(ctx context.Context, dep, v int64, op *treeOp) (bool, error) {
	res, err := s.trees.UpdateOne(ctx, bson.D{{Key: "_id", Value: dep}, {Key: "v", Value: v}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v + 1}, {Key: "op", Value: op}}}})
	if err != nil {
		return false, wrap("commit tree version", err)
	}
	return res.MatchedCount == 1, nil
}

// applyOp applies the structural op recorded as version v. It is idempotent and fenced:
// a folder already changed at version v or later is left alone, so a late or repeated
// application never undoes a newer change. A move is one command of up to three
// statements: the folder itself, then its subfolders' ancestors pulled (idempotent), then
// pushed with the depth shift and the fence (treeV = v), so a crash between any two of
// them is finished by applying the op again.
func (s *Store) applyOp(ctx context.Context, v int64, op *treeOp) error {
	switch op.Kind {
	case "move":
		if op.Depth == 0 { // recorded before folders kept their ancestors: request.load settles it
			_, err := s.items.UpdateOne(ctx,
				bson.D{{Key: "_id", Value: op.Folder}, {Key: "treeV", Value: bson.D{{Key: "$lt", Value: v}}}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "parent", Value: op.To}, {Key: "treeV", Value: v}}}})
			return wrap("apply folder move", err)
		}
		below := bson.D{{Key: "anc", Value: op.Folder}, {Key: "treeV", Value: bson.D{{Key: "$lt", Value: v}}}}
		// Every statement an UpdateMany (the folder's matches one document by id): the
		// driver sends a retryable UpdateOne and an UpdateMany as separate commands.
		models := []mongo.WriteModel{mongo.NewUpdateManyModel().
			SetFilter(bson.D{{Key: "_id", Value: op.Folder}, {Key: "treeV", Value: bson.D{{Key: "$lt", Value: v}}}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "parent", Value: op.To}, {Key: "treeV", Value: v},
				{Key: "anc", Value: op.Anc}, {Key: "depth", Value: op.Depth},
				{Key: "updatedAt", Value: op.At}, {Key: "updatedBy", Value: op.By}}}})}
		if len(op.Pull) > 0 {
			models = append(models, mongo.NewUpdateManyModel().SetFilter(below).
				SetUpdate(bson.D{{Key: "$pullAll", Value: bson.D{{Key: "anc", Value: op.Pull}}}}))
		}
		push := bson.D{{Key: "$set", Value: bson.D{{Key: "treeV", Value: v}}}, {Key: "$inc", Value: bson.D{{Key: "depth", Value: op.Delta}}}}
		if len(op.Push) > 0 {
			push = append(push, bson.E{Key: "$addToSet", Value: bson.D{{Key: "anc", Value: bson.D{{Key: "$each", Value: op.Push}}}}})
		}
		models = append(models, mongo.NewUpdateManyModel().SetFilter(below).SetUpdate(push))
		_, err := s.items.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
		return wrap("apply folder move", err)
	case "none":
		return nil
	case "create":
		doc := *op.Doc
		doc.TreeV = v
		_, err := s.items.InsertOne(ctx, doc)
		if mongox.IsDuplicateKey(err) {
			return nil
		}
		return wrap("apply folder creation", err)
	}
	return fmt.Errorf("unknown tree op %q", op.Kind)
}

// folderProjection is what a request keeps of a folder (folderNode).
var folderProjection = bson.D{{Key: "_id", Value: 1}, {Key: "parent", Value: 1}, {Key: "name", Value: 1},
	{Key: "position", Value: 1}, {Key: "createdBy", Value: 1}, {Key: "grants", Value: 1}, {Key: "anc", Value: 1}, {Key: "depth", Value: 1}}

// findFolders returns the live folders of the deployment among ids.
func (s *Store) findFolders(ctx context.Context, dep int64, ids []int64) ([]*folderNode, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.folders(ctx, "load folders", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "dep", Value: dep},
		{Key: "type", Value: TypeFolder}, {Key: "deleted", Value: notDeleted}})
}

// subtreeFolders returns every live folder below any of ids.
func (s *Store) subtreeFolders(ctx context.Context, dep int64, ids []int64) ([]*folderNode, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.folders(ctx, "load subtree", bson.D{{Key: "dep", Value: dep}, {Key: "anc", Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: "type", Value: TypeFolder}, {Key: "deleted", Value: notDeleted}})
}

func (s *Store) folders(ctx context.Context, what string, filter bson.D) ([]*folderNode, error) {
	cur, err := s.items.Find(ctx, filter, options.Find().SetProjection(folderProjection).SetBatchSize(1000))
	if err != nil {
		return nil, wrap(what, err)
	}
	var out []*folderNode
	return out, wrap(what, cur.All(ctx, &out))
}

// maxChildPosition is the highest position among parent's child folders, or -1: one
// document read, the database sorts.
func (s *Store) maxChildPosition(ctx context.Context, dep, parent int64) (float64, error) {
	var d struct {
		Position float64 `bson:"position"`
	}
	err := s.items.FindOne(ctx, bson.D{{Key: "dep", Value: dep}, {Key: "parent", Value: parent}, {Key: "type", Value: TypeFolder}, {Key: "deleted", Value: notDeleted}},
		options.FindOne().SetSort(bson.D{{Key: "position", Value: -1}}).SetProjection(bson.D{{Key: "position", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return -1, nil
	}
	return d.Position, wrap("find folder position", err)
}

// BackfillAncestors gives every folder written before folders kept their ancestors (no
// depth) its ancestors and depth, computed from the parent pointers, one deployment at a
// time. It runs at start and whenever a request meets such a folder; it reads a whole
// deployment's folders, but only once per deployment, ever.
func (s *Store) BackfillAncestors(ctx context.Context, dep int64) error {
	filter := bson.D{{Key: "type", Value: TypeFolder}, {Key: "depth", Value: bson.D{{Key: "$exists", Value: false}}}}
	if dep != 0 {
		filter = append(filter, bson.E{Key: "dep", Value: dep})
	}
	cur, err := s.items.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "dep", Value: 1}}))
	if err != nil {
		return wrap("find folders to backfill", err)
	}
	var stale []struct {
		Dep int64 `bson:"dep"`
	}
	if err := cur.All(ctx, &stale); err != nil {
		return wrap("find folders to backfill", err)
	}
	done := map[int64]bool{}
	for _, f := range stale {
		if done[f.Dep] {
			continue
		}
		done[f.Dep] = true
		if err := s.backfillDeployment(ctx, f.Dep); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) backfillDeployment(ctx context.Context, dep int64) error {
	return s.rebuildAncestors(ctx, dep, false)
}

// rebuildAncestors computes every live folder's ancestors and depth from the parent
// pointers and writes them: only where depth is missing (a backfill), or, with all,
// wherever they differ (after a move recorded by a replica that did not keep them).
func (s *Store) rebuildAncestors(ctx context.Context, dep int64, all bool) error {
	folders, err := s.folders(ctx, "load folders to backfill", bson.D{{Key: "dep", Value: dep}, {Key: "type", Value: TypeFolder}, {Key: "deleted", Value: notDeleted}})
	if err != nil {
		return err
	}
	byID := make(map[int64]*folderNode, len(folders))
	for _, n := range folders {
		byID[n.ID] = n
	}
	var models []mongo.WriteModel
	for _, n := range folders {
		if n.Depth > 0 && !all {
			continue
		}
		anc := []int64{}
		for cur := n.Parent; cur != 0 && len(anc) <= len(folders); {
			a := byID[cur]
			if a == nil {
				break
			}
			anc = append(anc, a.ID)
			cur = a.Parent
		}
		if n.Depth == len(anc)+1 && sameIDs(n.Anc, anc) {
			continue
		}
		filter := bson.D{{Key: "_id", Value: n.ID}}
		if !all {
			filter = append(filter, bson.E{Key: "depth", Value: bson.D{{Key: "$exists", Value: false}}})
		}
		models = append(models, mongo.NewUpdateOneModel().SetFilter(filter).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "anc", Value: anc}, {Key: "depth", Value: len(anc) + 1}}}}))
	}
	if len(models) == 0 {
		return nil
	}
	_, err = s.items.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	return wrap("backfill folder ancestors", err)
}

func sameIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !containsID(b, x) {
			return false
		}
	}
	return true
}

// settleLegacyOp rebuilds the ancestors of a deployment whose last structural op was
// recorded by a replica that did not keep them (it moved only a parent pointer), then
// replaces that op with a no-op, so the rebuild runs once.
func (s *Store) settleLegacyOp(ctx context.Context, dep, v int64) error {
	if err := s.rebuildAncestors(ctx, dep, true); err != nil {
		return err
	}
	_, err := s.trees.UpdateOne(ctx, bson.D{{Key: "_id", Value: dep}, {Key: "v", Value: v}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "op", Value: &treeOp{Kind: "none"}}}}})
	return wrap("settle tree op", err)
}

// findItems returns the live items of the deployment among ids, by id.
func (s *Store) findItems(ctx context.Context, dep int64, ids []int64) (map[int64]*itemDoc, error) {
	out := make(map[int64]*itemDoc, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cur, err := s.items.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "dep", Value: dep}, {Key: "deleted", Value: notDeleted}},
		options.Find().SetBatchSize(1000))
	if err != nil {
		return nil, wrap("find items", err)
	}
	var docs []*itemDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find items", err)
	}
	for _, d := range docs {
		out[d.ID] = d
	}
	return out, nil
}

// listProjection is what a page of the tree renders and checks access with: never meta,
// calculated fields, drafts or published dashboards, which can be large.
var listProjection = bson.D{{Key: "_id", Value: 1}, {Key: "dep", Value: 1}, {Key: "type", Value: 1}, {Key: "name", Value: 1},
	{Key: "position", Value: 1}, {Key: "parent", Value: 1}, {Key: "createdBy", Value: 1}, {Key: "updatedBy", Value: 1},
	{Key: "createdAt", Value: 1}, {Key: "updatedAt", Value: 1}, {Key: "grants", Value: 1}, {Key: "anc", Value: 1}, {Key: "depth", Value: 1}}

// childrenBatch returns, in page order (position, name, id), at most limit live children
// of parent after the cursor: folders when folders is true, workbooks and reports
// otherwise. Only the fields of listProjection are read; the database sorts and limits.
func (s *Store) childrenBatch(ctx context.Context, dep, parent int64, folders bool, after *cursor, limit int) ([]*itemDoc, error) {
	typ := bson.D{{Key: "$ne", Value: TypeFolder}}
	if folders {
		typ = bson.D{{Key: "$eq", Value: TypeFolder}}
	}
	filter := bson.D{{Key: "dep", Value: dep}, {Key: "parent", Value: parent}, {Key: "type", Value: typ}, {Key: "deleted", Value: notDeleted}}
	if after != nil {
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "position", Value: bson.D{{Key: "$gt", Value: after.Position}}}},
			bson.D{{Key: "position", Value: after.Position}, {Key: "name", Value: bson.D{{Key: "$gt", Value: after.Name}}}},
			bson.D{{Key: "position", Value: after.Position}, {Key: "name", Value: after.Name}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: after.ID}}}},
		}})
	}
	cur, err := s.items.Find(ctx, filter, options.Find().SetProjection(listProjection).
		SetSort(bson.D{{Key: "position", Value: 1}, {Key: "name", Value: 1}, {Key: "_id", Value: 1}}).
		SetLimit(int64(limit)).SetBatchSize(int32(limit)))
	if err != nil {
		return nil, wrap("list children", err)
	}
	var docs []*itemDoc
	return docs, wrap("list children", cur.All(ctx, &docs))
}

// hasChildren reports whether anything live is inside folder.
func (s *Store) hasChildren(ctx context.Context, dep, folder int64) (bool, error) {
	err := s.items.FindOne(ctx, bson.D{{Key: "dep", Value: dep}, {Key: "parent", Value: folder}, {Key: "deleted", Value: notDeleted}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, wrap("check folder contents", err)
}

// moveItem re-parents a workbook or report if it is still where the caller's access
// check saw it.
func (s *Store) moveItem(ctx context.Context, dep, id, from, to, by int64, at time.Time) (bool, error) {
	res, err := s.items.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: dep}, {Key: "parent", Value: from}, {Key: "deleted", Value: notDeleted}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "parent", Value: to}, {Key: "updatedAt", Value: at}, {Key: "updatedBy", Value: by}}}})
	if err != nil {
		return false, wrap("move item", err)
	}
	return res.MatchedCount == 1, nil
}

// leaseFolder marks folder as receiving items until `until`, unless it is gone or being
// deleted; false means the folder is not there.
func (s *Store) leaseFolder(ctx context.Context, dep, folder int64, now, until time.Time) (bool, error) {
	res, err := s.items.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: dep}, {Key: "type", Value: TypeFolder}, {Key: "deleted", Value: notDeleted},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: "deletingUntil", Value: bson.D{{Key: "$exists", Value: false}}}},
				bson.D{{Key: "deletingUntil", Value: bson.D{{Key: "$lt", Value: now}}}},
			}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "leaseCount", Value: 1}}}, {Key: "$max", Value: bson.D{{Key: "leaseUntil", Value: until}}}})
	if err != nil {
		return false, wrap("lease folder", err)
	}
	return res.MatchedCount == 1, nil
}

// releaseFolder gives a lease back. A holder that never releases (a crash) only delays
// deletes until leaseUntil has passed.
func (s *Store) releaseFolder(ctx context.Context, dep, folder int64) error {
	_, err := s.items.UpdateOne(ctx, bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: dep}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "leaseCount", Value: -1}}}})
	return wrap("release folder", err)
}

// beginDelete marks folder as being deleted if no request holds a lease on it.
func (s *Store) beginDelete(ctx context.Context, dep, folder int64, now, until time.Time) (bool, error) {
	res, err := s.items.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: dep}, {Key: "type", Value: TypeFolder}, {Key: "deleted", Value: notDeleted},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: "leaseCount", Value: bson.D{{Key: "$lte", Value: 0}}}},
				bson.D{{Key: "leaseUntil", Value: bson.D{{Key: "$exists", Value: false}}}},
				bson.D{{Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: now}}}},
			}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "deletingUntil", Value: until}}}})
	if err != nil {
		return false, wrap("begin folder delete", err)
	}
	return res.MatchedCount == 1, nil
}

// endDelete tombstones the folder (deleted) or lifts the delete mark.
func (s *Store) endDelete(ctx context.Context, dep, folder int64, deleted bool, by int64, at time.Time) error {
	var update bson.D
	if deleted {
		update = bson.D{{Key: "$set", Value: bson.D{{Key: "deleted", Value: true}, {Key: "updatedAt", Value: at}, {Key: "updatedBy", Value: by}}}}
	} else {
		update = bson.D{{Key: "$unset", Value: bson.D{{Key: "deletingUntil", Value: ""}}}}
	}
	_, err := s.items.UpdateOne(ctx, bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: dep}}, update)
	return wrap("end folder delete", err)
}

// updateItem sets fields of a live item of the deployment; false when it is not there.
func (s *Store) updateItem(ctx context.Context, dep, id int64, typ ItemType, filter, set bson.D) (*itemDoc, error) {
	f := append(bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: dep}, {Key: "type", Value: typ}, {Key: "deleted", Value: notDeleted}}, filter...)
	var d itemDoc
	err := s.items.FindOneAndUpdate(ctx, f, bson.D{{Key: "$set", Value: set}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("update item", err)
	}
	return &d, nil
}

// countItems counts the live items (folders, workbooks, reports) of the deployment, up to
// max: the database stops counting there.
func (s *Store) countItems(ctx context.Context, dep int64, max int64) (int64, error) {
	n, err := s.items.CountDocuments(ctx, bson.D{{Key: "dep", Value: dep}, {Key: "deleted", Value: notDeleted}},
		options.Count().SetLimit(max))
	return n, wrap("count items", err)
}

func (s *Store) insertItem(ctx context.Context, d *itemDoc) error {
	_, err := s.items.InsertOne(ctx, d)
	return wrap("insert item", err)
}

func (s *Store) upsertUser(ctx context.Context, u userDoc) error {
	_, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: u.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "acct", Value: u.Account}, {Key: "email", Value: u.Email},
			{Key: "firstName", Value: u.FirstName}, {Key: "picture", Value: u.Picture}, {Key: "role", Value: u.Role}}}},
		options.UpdateOne().SetUpsert(true))
	if mongox.IsDuplicateKey(err) {
		return nil
	}
	return wrap("record user", err)
}

func (s *Store) findUsers(ctx context.Context, ids []int64) (map[int64]userDoc, error) {
	out := make(map[int64]userDoc, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cur, err := s.users.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return nil, wrap("find users", err)
	}
	var docs []userDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find users", err)
	}
	for _, d := range docs {
		out[d.ID] = d
	}
	return out, nil
}
