package mongostore

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// ReadTree returns the deployment's tree version and its last structural op, creating
// the tree document on first use.
func (s *Store) ReadTree(ctx context.Context, deploymentID int64) (workspace.TreeVersion, error) {
	var d treeDoc
	err := s.trees.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: deploymentID}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "v", Value: int64(0)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&d)
	if mongox.IsDuplicateKey(err) { // two first uses raced on MongoDB: the document exists now
		err = s.trees.FindOne(ctx, bson.D{{Key: "_id", Value: deploymentID}}).Decode(&d)
	}
	if err != nil {
		return workspace.TreeVersion{}, wrap("read tree version", err)
	}
	tv := workspace.TreeVersion{V: d.V}
	if d.Op != nil {
		tv.Op = d.Op.op()
	}
	return tv, nil
}

// CommitTreeOp records op as version v+1 if the tree is still at version v.
func (s *Store) CommitTreeOp(ctx context.Context, deploymentID, v int64, op *workspace.TreeOp) (bool, error) {
	doc, err := toTreeOpDoc(op)
	if err != nil {
		return false, err
	}
	res, err := s.trees.UpdateOne(ctx, bson.D{{Key: "_id", Value: deploymentID}, {Key: "v", Value: v}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v + 1}, {Key: "op", Value: doc}}}})
	if err != nil {
		return false, wrap("commit tree version", err)
	}
	return res.MatchedCount == 1, nil
}

// ApplyTreeOp applies the structural op recorded as version v. It is idempotent and
// fenced: a folder already changed at version v or later is left alone, so a late or
// repeated application never undoes a newer change. A move is one command of up to three
// statements: the folder itself, then its subfolders' ancestors pulled (idempotent), then
// pushed with the depth shift and the fence (treeV = v), so a crash between any two of
// them is finished by applying the op again. Every statement names the deployment: the
// subfolders' statements are bounded by dep_1_anc_1 (dep, then the ancestor), the
// folder's by _id, so a move reads only its own subtree's index keys.
func (s *Store) ApplyTreeOp(ctx context.Context, deploymentID, v int64, op *workspace.TreeOp) error {
	switch op.Kind {
	case workspace.OpMove:
		below := bson.D{{Key: "dep", Value: deploymentID}, {Key: "anc", Value: op.Folder}, {Key: "treeV", Value: bson.D{{Key: "$lt", Value: v}}}}
		// Every statement an UpdateMany (the folder's matches one document by id): the
		// driver sends a retryable UpdateOne and an UpdateMany as separate commands.
		models := []mongo.WriteModel{mongo.NewUpdateManyModel().
			SetFilter(bson.D{{Key: "_id", Value: op.Folder}, {Key: "dep", Value: deploymentID}, {Key: "treeV", Value: bson.D{{Key: "$lt", Value: v}}}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "parent", Value: op.To}, {Key: "treeV", Value: v},
				{Key: "anc", Value: op.Anc}, {Key: "depth", Value: op.Depth},
				{Key: "updatedAt", Value: op.At}, {Key: "updatedBy", Value: op.By}}}, versionInc})}
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
	case workspace.OpNone:
		return nil
	case workspace.OpTrash, workspace.OpRestore, workspace.OpPurge:
		return s.applyTrashOp(ctx, deploymentID, v, op)
	case workspace.OpCreate:
		doc, err := toItemDoc(op.Created)
		if err != nil {
			return err
		}
		doc.TreeV = v
		_, err = s.items.InsertOne(ctx, doc)
		if mongox.IsDuplicateKey(err) && doc.KSlot != "" {
			err = s.voidCreation(ctx, doc) // the id or the key: the id's is a duplicate again
		}
		if mongox.IsDuplicateKey(err) {
			return s.createdBefore(ctx, v, doc)
		}
		if err == nil && doc.Void {
			return fmt.Errorf("apply folder creation %d: %w", doc.ID, workspace.ErrKeyTaken)
		}
		return wrap("apply folder creation", err)
	}
	return fmt.Errorf("unknown tree op %q", op.Kind)
}

// createdBefore answers a folder creation whose insert met its id already stored. It
// was applied before when the stored item is this op's folder: the same deployment,
// creator and creation time (to the millisecond), a folder, changed by version v or a
// later one (a later move rewrites treeV; a tombstone keeps it all). Its name, place and
// position are not compared: a rename or a move may have changed them since. Anything
// else is another item holding the id, which was handed out twice: the op is void,
// ErrIDTaken, never a success.
func (s *Store) createdBefore(ctx context.Context, v int64, want *itemDoc) error {
	var got itemDoc
	err := s.items.FindOne(ctx, bson.D{{Key: "_id", Value: want.ID}},
		options.FindOne().SetProjection(bson.D{{Key: "dep", Value: 1}, {Key: "type", Value: 1}, {Key: "createdBy", Value: 1},
			{Key: "createdAt", Value: 1}, {Key: "treeV", Value: 1}, {Key: "void", Value: 1}})).Decode(&got)
	if err != nil {
		return wrap("check folder creation", err)
	}
	if got.DeploymentID == want.DeploymentID && got.Type == workspace.TypeFolder && got.CreatedBy == want.CreatedBy &&
		got.CreatedAt.Equal(want.CreatedAt.Truncate(time.Millisecond)) && got.TreeV >= v {
		if got.Void {
			return fmt.Errorf("apply folder creation %d: %w", want.ID, workspace.ErrKeyTaken)
		}
		return nil
	}
	return s.idTaken("apply folder creation", want.ID)
}

// folderProjection is what a request keeps of a folder (folderDoc).
var folderProjection = bson.D{{Key: "_id", Value: 1}, {Key: "parent", Value: 1}, {Key: "name", Value: 1},
	{Key: "position", Value: 1}, {Key: "createdBy", Value: 1}, {Key: "grants", Value: 1}, {Key: "anc", Value: 1}, {Key: "depth", Value: 1},
	{Key: "embedAccess", Value: 1}}

// Folders returns the live folders of the deployment among ids.
func (s *Store) Folders(ctx context.Context, deploymentID int64, ids []int64) ([]*workspace.FolderNode, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.folders(ctx, "load folders", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "dep", Value: deploymentID},
		{Key: "type", Value: workspace.TypeFolder}, {Key: "deleted", Value: notDeleted}})
}

// SubtreeFolders returns every live folder below any of ids.
func (s *Store) SubtreeFolders(ctx context.Context, deploymentID int64, ids []int64) ([]*workspace.FolderNode, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.folders(ctx, "load subtree", bson.D{{Key: "dep", Value: deploymentID}, {Key: "anc", Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: "type", Value: workspace.TypeFolder}, {Key: "deleted", Value: notDeleted}})
}

func (s *Store) folders(ctx context.Context, what string, filter bson.D) ([]*workspace.FolderNode, error) {
	cur, err := s.items.Find(ctx, filter, options.Find().SetProjection(folderProjection).SetBatchSize(1000))
	if err != nil {
		return nil, wrap(what, err)
	}
	var docs []*folderDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(what, err)
	}
	var out []*workspace.FolderNode
	for _, d := range docs {
		out = append(out, d.node())
	}
	return out, nil
}
