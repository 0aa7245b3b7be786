package devstack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Fill is what FillWorkspace writes: Items items in deployment Deployment, a fifth of
// them folders (in a tree FanOut wide, at most 4 levels deep), the rest workbooks spread
// over the folders, all created by user By.
type Fill struct {
	Deployment int64
	By         int64
	Items      int
	FanOut     int // default 10
}

// Filled is what FillWorkspace wrote.
type Filled struct {
	Folders, Workbooks int
	// FirstID and LastID bound the ids the items took; TreeVersion is the deployment's
	// tree version they were created at.
	FirstID, LastID int64
	TreeVersion     int64
	// Root is the first root folder; Deep a folder of the deepest level.
	Root, Deep int64
}

// fillBatch is how many documents one insert carries.
const fillBatch = 1000

// FillWorkspace writes items into workspace-svc's database db in bulk, as workspace-svc
// writes them one by one (its mongostore records): ids from its counter, folders with
// their ancestors, depth and the tree version they were created at (recorded as the
// deployment's tree version with no op to apply, so the tree op protocol finds nothing
// pending), workbooks with their folder. It is for a deployment that holds nothing yet:
// the platform filled by another deployment's items (make bench's 50,000), or a large
// workspace to try the stack with. Folders and workbooks are of the size the bench's
// own are: a name, no meta.
func FillWorkspace(ctx context.Context, db *mongo.Database, f Fill) (Filled, error) {
	if f.Items < 1 || f.Deployment < 1 {
		return Filled{}, errors.New("devstack: fill: need a deployment and at least one item")
	}
	if f.FanOut < 2 {
		f.FanOut = 10
	}
	items, trees := db.Collection("items"), db.Collection("trees")
	if n, err := items.CountDocuments(ctx, bson.D{{Key: "dep", Value: f.Deployment}}, options.Count().SetLimit(1)); err != nil || n > 0 {
		return Filled{}, errors.Join(err, fmt.Errorf("devstack: fill: deployment %d holds items already; fill a fresh one", f.Deployment))
	}
	var out Filled
	var err error
	if out.TreeVersion, err = claimTreeVersion(ctx, trees, f.Deployment, f.By); err != nil {
		return Filled{}, err
	}
	var counter struct {
		Seq int64 `bson:"seq"`
	}
	// workspace-svc's id counter (mongostore.New: "workspace_items" in counters): the
	// block is taken past every block a replica holds.
	err = db.Collection("counters").FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "workspace_items"}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "seq", Value: int64(f.Items)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&counter)
	if err != nil {
		return Filled{}, fmt.Errorf("devstack: fill: allocate ids: %w", err)
	}
	out.LastID = counter.Seq
	out.FirstID = counter.Seq - int64(f.Items) + 1
	out.Folders = max(f.Items/5, 1)
	out.Workbooks = f.Items - out.Folders

	docs := fillDocs(f, out)
	// The last folder is on the deepest level.
	out.Root, out.Deep = out.FirstID, out.FirstID+int64(out.Folders-1)
	for len(docs) > 0 {
		n := min(fillBatch, len(docs))
		if _, err := items.InsertMany(ctx, docs[:n], options.InsertMany().SetOrdered(true)); err != nil {
			return out, fmt.Errorf("devstack: fill: insert items: %w", err)
		}
		docs = docs[n:]
	}
	return out, nil
}

// claimTreeVersion moves the deployment's tree version v to v+1 with no op, as a
// structural change would (compare-and-set on v), and returns v+1: the version the
// folders are created at. A tree with an op still to apply is refused.
func claimTreeVersion(ctx context.Context, trees *mongo.Collection, dep, by int64) (int64, error) {
	for range 10 {
		var t struct {
			V  int64 `bson:"v"`
			Op *struct {
				Kind string `bson:"kind"`
			} `bson:"op"`
		}
		err := trees.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: dep}},
			bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "v", Value: int64(0)}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&t)
		if err != nil {
			return 0, fmt.Errorf("devstack: fill: read tree version: %w", err)
		}
		if t.Op != nil && t.Op.Kind != "none" {
			return 0, fmt.Errorf("devstack: fill: deployment %d has a structural op (%s) at version %d; fill a fresh deployment", dep, t.Op.Kind, t.V)
		}
		op := bson.D{{Key: "kind", Value: "none"}, {Key: "folder", Value: int64(0)}, {Key: "to", Value: int64(0)},
			{Key: "by", Value: by}, {Key: "at", Value: time.Now().UTC()}}
		res, err := trees.UpdateOne(ctx, bson.D{{Key: "_id", Value: dep}, {Key: "v", Value: t.V}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: t.V + 1}, {Key: "op", Value: op}}}})
		if err != nil {
			return 0, fmt.Errorf("devstack: fill: commit tree version: %w", err)
		}
		if res.MatchedCount == 1 {
			return t.V + 1, nil
		}
	}
	return 0, fmt.Errorf("devstack: fill: deployment %d's tree keeps changing; fill a deployment nothing else writes", dep)
}

// fillDocs are the records: folders first, breadth first (the first FanOut at the root,
// each next one under the folder i/FanOut-1 before it), then the workbooks, workbook j in
// folder j mod folders. Field names and order are workspace-svc's itemDoc's.
func fillDocs(f Fill, out Filled) []any {
	now := time.Now().UTC().Truncate(time.Millisecond)
	type node struct {
		anc      []int64
		children int
	}
	folders := make([]node, out.Folders)
	docs := make([]any, 0, f.Items)
	root := 0
	for i := range out.Folders {
		id := out.FirstID + int64(i)
		var parent int64
		var anc []int64
		var pos int
		if i < f.FanOut {
			pos = root
			root++
		} else {
			p := i/f.FanOut - 1
			parent = out.FirstID + int64(p)
			anc = append(append([]int64{}, folders[p].anc...), parent)
			pos = folders[p].children
			folders[p].children++
		}
		folders[i].anc = anc
		d := bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: f.Deployment}, {Key: "type", Value: "FOLDER"},
			{Key: "name", Value: fmt.Sprintf("filled folder %d", i)}, {Key: "position", Value: float64(pos)},
			{Key: "parent", Value: parent}, {Key: "createdBy", Value: f.By}, {Key: "updatedBy", Value: f.By},
			{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "treeV", Value: out.TreeVersion}}
		if len(anc) > 0 {
			d = append(d, bson.E{Key: "anc", Value: anc})
		}
		docs = append(docs, append(d, bson.E{Key: "depth", Value: len(anc) + 1}))
	}
	for j := range out.Workbooks {
		id := out.FirstID + int64(out.Folders+j)
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: f.Deployment}, {Key: "type", Value: "WORKBOOK"},
			{Key: "name", Value: fmt.Sprintf("filled workbook %d", j)}, {Key: "position", Value: float64(0)},
			{Key: "parent", Value: out.FirstID + int64(j%out.Folders)}, {Key: "createdBy", Value: f.By}, {Key: "updatedBy", Value: f.By},
			{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "treeV", Value: int64(0)}})
	}
	return docs
}
