package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// trashDoc is what a trashed item keeps (workspace.TrashInfo): when and by whom, and the
// root of its delete; a root also says it is one (top, which the trash listing's index
// holds) and how many items its delete trashed.
type trashDoc struct {
	At    time.Time `bson:"at"`
	By    int64     `bson:"by"`
	Root  int64     `bson:"root"`
	Top   bool      `bson:"top,omitempty"`
	Items int       `bson:"items,omitempty"`
}

func (t *trashDoc) info() *workspace.TrashInfo {
	if t == nil {
		return nil
	}
	return &workspace.TrashInfo{At: t.At, By: t.By, Root: t.Root, Items: t.Items}
}

// trashOf is the trash field of an item deleted on its own: its own root.
func trashOf(id, by int64, at time.Time) bson.E {
	return bson.E{Key: "trash", Value: trashDoc{At: at, By: by, Root: id, Top: true, Items: 1}}
}

// The trash's indexes: the listing of a deployment's roots, newest first
// (trashListIndex); the items trashed with a root, which a restore, a purge and their
// counts select (dep, trash.root); the retention sweep's oldest roots of any deployment
// (trashSweepIndex).
const (
	trashListIndex  = "dep_1_trash.top_1_trash.at_-1__id_-1"
	trashSweepIndex = "trash.top_1_trash.at_1"
)

var trashIndexes = []index{
	{trashListIndex, bson.D{{Key: "dep", Value: 1}, {Key: "trash.top", Value: 1}, {Key: "trash.at", Value: -1}, {Key: "_id", Value: -1}}},
	{"dep_1_trash.root_1", bson.D{{Key: "dep", Value: 1}, {Key: "trash.root", Value: 1}}},
	{trashSweepIndex, bson.D{{Key: "trash.top", Value: 1}, {Key: "trash.at", Value: 1}}},
}

// trashProjection is a head with its trash field.
var trashProjection = append(append(bson.D{}, headProjection...), bson.E{Key: "trash", Value: 1})

// before is the fence of a trash op's statement: documents not yet changed at version v
// or later.
func before(v int64) bson.D { return bson.D{{Key: "$lt", Value: v}} }

func (s *Store) findTrash(ctx context.Context, what string, filter bson.D, opts *options.FindOptionsBuilder) ([]*workspace.Item, error) {
	cur, err := s.items.Find(ctx, filter, opts)
	if err != nil {
		return nil, wrap(what, err)
	}
	var docs []*itemDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(what, err)
	}
	return items(docs), nil
}

// TrashedItems returns the trashed items among ids: heads with their trash field.
func (s *Store) TrashedItems(ctx context.Context, deploymentID int64, ids []int64) (map[int64]*workspace.Item, error) {
	out := make(map[int64]*workspace.Item, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	got, err := s.findTrash(ctx, "find trashed items", bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "dep", Value: deploymentID},
		{Key: "deleted", Value: true}, {Key: "trash", Value: bson.D{{Key: "$exists", Value: true}}}},
		options.Find().SetProjection(trashProjection))
	for _, it := range got {
		out[it.ID] = it
	}
	return out, err
}

// TrashRoots returns a page of the deployment's trashed roots, newest first, as a rooted
// $or whose branches each carry the whole filter and one range (as childrenFilter).
func (s *Store) TrashRoots(ctx context.Context, deploymentID int64, after *workspace.TrashKey, limit int) ([]*workspace.Item, error) {
	base := func(more ...bson.E) bson.D {
		return append(bson.D{{Key: "dep", Value: deploymentID}, {Key: "trash.top", Value: true}}, more...)
	}
	filter := base()
	if after != nil {
		filter = bson.D{{Key: "$or", Value: bson.A{
			base(bson.E{Key: "trash.at", Value: bson.D{{Key: "$lt", Value: after.At}}}),
			base(bson.E{Key: "trash.at", Value: after.At}, bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: after.ID}}}),
		}}}
	}
	return s.findTrash(ctx, "list trash", filter, options.Find().SetProjection(append(append(bson.D{}, listProjection...), bson.E{Key: "trash", Value: 1})).
		SetSort(bson.D{{Key: "trash.at", Value: -1}, {Key: "_id", Value: -1}}).SetHint(trashListIndex).SetLimit(int64(limit)).SetBatchSize(oneBatch(limit)))
}

// TrashedFolders returns the folders trashed with root.
func (s *Store) TrashedFolders(ctx context.Context, deploymentID, root int64) ([]*workspace.FolderNode, error) {
	return s.folders(ctx, "load trashed folders", bson.D{{Key: "dep", Value: deploymentID}, {Key: "trash.root", Value: root}, {Key: "type", Value: workspace.TypeFolder}})
}

// CountTrashed counts the items trashed with root (with treeV > 0: by that op).
func (s *Store) CountTrashed(ctx context.Context, deploymentID, root, treeV int64) (int, error) {
	filter := bson.D{{Key: "dep", Value: deploymentID}, {Key: "trash.root", Value: root}}
	if treeV > 0 {
		filter = append(filter, bson.E{Key: "treeV", Value: treeV})
	}
	n, err := s.items.CountDocuments(ctx, filter)
	return int(n), wrap("count trashed items", err)
}

// SubtreeItems returns the live workbooks and reports inside folders, at most max+1
// (listIndex: dep, then parent).
func (s *Store) SubtreeItems(ctx context.Context, deploymentID int64, folders []int64, max int) ([]workspace.ItemRef, error) {
	out := []workspace.ItemRef{}
	if len(folders) == 0 {
		return out, nil
	}
	cur, err := s.items.Find(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "parent", Value: bson.D{{Key: "$in", Value: folders}}},
		{Key: "type", Value: bson.D{{Key: "$ne", Value: workspace.TypeFolder}}}, {Key: "deleted", Value: notDeleted}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "type", Value: 1}}).SetLimit(int64(max+1)).SetBatchSize(1000))
	if err != nil {
		return nil, wrap("list subtree items", err)
	}
	var docs []struct {
		ID   int64              `bson:"_id"`
		Type workspace.ItemType `bson:"type"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("list subtree items", err)
	}
	for _, d := range docs {
		out = append(out, workspace.ItemRef{Type: d.Type, ID: d.ID})
	}
	return out, nil
}

// BeginSubtreeDelete marks every folder of ids as being deleted where no lease is live,
// in one update; when it marked fewer than all, it lifts the marks it set (they carry its
// `until`) and answers false.
func (s *Store) BeginSubtreeDelete(ctx context.Context, deploymentID int64, ids []int64, now, until time.Time) (bool, error) {
	if len(ids) == 0 {
		return true, nil
	}
	in := bson.D{{Key: "$in", Value: ids}}
	res, err := s.items.UpdateMany(ctx,
		bson.D{{Key: "_id", Value: in}, {Key: "dep", Value: deploymentID}, {Key: "type", Value: workspace.TypeFolder}, {Key: "deleted", Value: notDeleted},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: "leaseCount", Value: bson.D{{Key: "$lte", Value: 0}}}},
				bson.D{{Key: "leaseUntil", Value: bson.D{{Key: "$exists", Value: false}}}},
				bson.D{{Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: now}}}},
			}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "deletingUntil", Value: until}}}})
	if err != nil {
		return false, wrap("begin subtree delete", err)
	}
	if res.MatchedCount == int64(len(ids)) {
		return true, nil
	}
	_, err = s.items.UpdateMany(ctx, bson.D{{Key: "_id", Value: in}, {Key: "dep", Value: deploymentID}, {Key: "deletingUntil", Value: until}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "deletingUntil", Value: ""}}}})
	return false, wrap("lift subtree delete", err)
}

// EndSubtreeDelete lifts the delete marks of ids.
func (s *Store) EndSubtreeDelete(ctx context.Context, deploymentID int64, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.items.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "dep", Value: deploymentID}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "deletingUntil", Value: ""}}}})
	return wrap("end subtree delete", err)
}

// rootFilter matches the trashed root id of type typ.
func rootFilter(deploymentID, id int64, typ workspace.ItemType) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: deploymentID}, {Key: "type", Value: typ}, {Key: "deleted", Value: true}, {Key: "trash.root", Value: id}}
}

// RestoreItem brings back a workbook or report trashed as a root: one conditional update.
func (s *Store) RestoreItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, parent, treeV, by int64, at time.Time) (bool, error) {
	if typ == workspace.TypeFolder {
		return false, nil
	}
	var doc struct {
		Key string `bson:"key"`
	}
	err := s.items.FindOne(ctx, rootFilter(deploymentID, id, typ), options.FindOne().SetProjection(bson.D{{Key: "key", Value: 1}})).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, wrap("restore item", err)
	}
	set := bson.D{{Key: "deleted", Value: false}, {Key: "parent", Value: parent}, {Key: "updatedAt", Value: at}, {Key: "updatedBy", Value: by}}
	if doc.Key != "" {
		set = append(set, bson.E{Key: "kslot", Value: kslot(deploymentID, typ, doc.Key)})
	}
	// The key is part of the filter: the hold taken is the key the item has.
	res, err := s.items.UpdateOne(ctx, append(rootFilter(deploymentID, id, typ), bson.E{Key: "key", Value: keyOrAbsent(doc.Key)}), bson.D{
		{Key: "$set", Value: set},
		{Key: "$max", Value: bson.D{{Key: "treeV", Value: treeV}}},
		{Key: "$unset", Value: bson.D{{Key: "trash", Value: ""}}}, versionInc})
	if duplicateHold(err) {
		return false, workspace.ErrKeyTaken
	}
	if err != nil {
		return false, wrap("restore item", err)
	}
	return res.MatchedCount == 1, nil
}

// PurgeItem removes a workbook or report trashed as a root: one conditional delete.
func (s *Store) PurgeItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType) (bool, error) {
	if typ == workspace.TypeFolder {
		return false, nil
	}
	res, err := s.items.DeleteOne(ctx, rootFilter(deploymentID, id, typ))
	if err != nil {
		return false, wrap("purge item", err)
	}
	if res.DeletedCount == 1 && typ == workspace.TypeWorkbook {
		if err := s.DeleteDashboardVersions(ctx, deploymentID, id); err != nil {
			return true, err
		}
	}
	return res.DeletedCount == 1, nil
}

// ExpiredTrashRoots returns the oldest roots of any deployment trashed before `before`.
func (s *Store) ExpiredTrashRoots(ctx context.Context, before time.Time, limit int) ([]workspace.TrashRoot, error) {
	cur, err := s.items.Find(ctx, bson.D{{Key: "trash.top", Value: true}, {Key: "trash.at", Value: bson.D{{Key: "$lt", Value: before}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "dep", Value: 1}, {Key: "type", Value: 1}}).
			SetSort(bson.D{{Key: "trash.at", Value: 1}}).SetHint(trashSweepIndex).SetLimit(int64(limit)).SetBatchSize(oneBatch(limit)))
	if err != nil {
		return nil, wrap("find expired trash", err)
	}
	var docs []struct {
		ID           int64              `bson:"_id"`
		DeploymentID int64              `bson:"dep"`
		Type         workspace.ItemType `bson:"type"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find expired trash", err)
	}
	out := make([]workspace.TrashRoot, len(docs))
	for i, d := range docs {
		out[i] = workspace.TrashRoot{DeploymentID: d.DeploymentID, ID: d.ID, Type: d.Type}
	}
	return out, nil
}

// TakeItemSlots takes n slots in one conditional $inc (items <= limit-n), building the
// counter first where there is none (TakeItemSlot).
func (s *Store) TakeItemSlots(ctx context.Context, deploymentID, n, limit int64) (bool, error) {
	for range 3 {
		res, err := s.slots.UpdateOne(ctx, bson.D{{Key: "_id", Value: deploymentID}, {Key: "items", Value: bson.D{{Key: "$lte", Value: limit - n}}}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "items", Value: n}}}})
		if err != nil {
			return false, wrap("take item slots", err)
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
		err = s.slots.FindOne(ctx, bson.D{{Key: "_id", Value: deploymentID}}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return false, wrap("find item slots", err)
		}
		if err := s.buildSlots(ctx, deploymentID); err != nil {
			return false, err
		}
	}
	return false, wrap("take item slots", errors.New("the deployment's counter was not found after it was built"))
}

// ReturnItemSlots gives n slots back, never below none taken.
func (s *Store) ReturnItemSlots(ctx context.Context, deploymentID, n int64) error {
	res, err := s.slots.UpdateOne(ctx, bson.D{{Key: "_id", Value: deploymentID}, {Key: "items", Value: bson.D{{Key: "$gte", Value: n}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "items", Value: -n}}}})
	if err != nil || res.MatchedCount == 1 {
		return wrap("return item slots", err)
	}
	_, err = s.slots.UpdateOne(ctx, bson.D{{Key: "_id", Value: deploymentID}, {Key: "items", Value: bson.D{{Key: "$lt", Value: n}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "items", Value: int64(0)}}}})
	return wrap("return item slots", err)
}

// RemoveFavoritesOf forgets every user's favorites of ids, a thousand ids per command.
func (s *Store) RemoveFavoritesOf(ctx context.Context, deploymentID int64, ids []int64) error {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		if _, err := s.favorites.DeleteMany(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "item", Value: bson.D{{Key: "$in", Value: batch}}}}); err != nil {
			return wrap("remove favorites", err)
		}
	}
	return nil
}

// applyTrashOp applies a trash, restore or purge op recorded as version v: one ordered
// command of statements, each fenced (treeV < v) and setting the fence where it changes
// a document, so a crash between two is finished by applying the op again and a late
// application never undoes a newer change. Every statement names the deployment.
func (s *Store) applyTrashOp(ctx context.Context, deploymentID, v int64, op *workspace.TreeOp) error {
	fenced := func(more ...bson.E) bson.D {
		return append(bson.D{{Key: "dep", Value: deploymentID}}, append(more, bson.E{Key: "treeV", Value: before(v)})...)
	}
	untrash := bson.D{{Key: "trash", Value: ""}, {Key: "deletingUntil", Value: ""}}
	var models []mongo.WriteModel
	switch op.Kind {
	case workspace.OpTrash:
		set := func(t trashDoc) bson.D {
			return bson.D{{Key: "$set", Value: bson.D{{Key: "deleted", Value: true}, {Key: "treeV", Value: v}, {Key: "trash", Value: t},
				{Key: "updatedAt", Value: op.At}, {Key: "updatedBy", Value: op.By}}}, versionInc}
		}
		t := trashDoc{At: op.At, By: op.By, Root: op.Folder}
		top := t
		top.Top, top.Items = true, op.N
		models = append(models, mongo.NewUpdateManyModel().
			SetFilter(fenced(bson.E{Key: "_id", Value: op.Folder}, bson.E{Key: "deleted", Value: notDeleted})).SetUpdate(set(top)))
		if len(op.IDs) > 0 {
			models = append(models, mongo.NewUpdateManyModel().
				SetFilter(fenced(bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: op.IDs}}}, bson.E{Key: "deleted", Value: notDeleted})).SetUpdate(set(t)))
		}
	case workspace.OpRestore:
		mine := bson.E{Key: "trash.root", Value: op.Folder}
		below := fenced(bson.E{Key: "anc", Value: op.Folder}, mine)
		models = append(models, mongo.NewUpdateManyModel().SetFilter(fenced(bson.E{Key: "_id", Value: op.Folder}, mine)).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "parent", Value: op.To}, {Key: "anc", Value: op.Anc}, {Key: "depth", Value: op.Depth},
				{Key: "deleted", Value: false}, {Key: "treeV", Value: v}, {Key: "updatedAt", Value: op.At}, {Key: "updatedBy", Value: op.By}}},
				{Key: "$unset", Value: untrash}, versionInc}))
		if len(op.Pull) > 0 {
			models = append(models, mongo.NewUpdateManyModel().SetFilter(below).
				SetUpdate(bson.D{{Key: "$pullAll", Value: bson.D{{Key: "anc", Value: op.Pull}}}}))
		}
		push := bson.D{{Key: "$set", Value: bson.D{{Key: "deleted", Value: false}, {Key: "treeV", Value: v}}},
			{Key: "$inc", Value: bson.D{{Key: "depth", Value: op.Delta}, {Key: "version", Value: int64(1)}}}, {Key: "$unset", Value: untrash}}
		if len(op.Push) > 0 {
			push = append(push, bson.E{Key: "$addToSet", Value: bson.D{{Key: "anc", Value: bson.D{{Key: "$each", Value: op.Push}}}}})
		}
		models = append(models, mongo.NewUpdateManyModel().SetFilter(below).SetUpdate(push),
			mongo.NewUpdateManyModel().SetFilter(fenced(mine)).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "deleted", Value: false}, {Key: "treeV", Value: v}}}, {Key: "$unset", Value: untrash}, versionInc}))
	case workspace.OpPurge:
		mine := bson.E{Key: "trash.root", Value: op.Folder}
		// The kept versions of the workbooks go first: a crash before the items' delete
		// is finished by applying the op again, which finds the same workbooks.
		if err := s.purgeVersionsOf(ctx, fenced(mine, bson.E{Key: "type", Value: workspace.TypeWorkbook})); err != nil {
			return err
		}
		models = append(models, mongo.NewUpdateManyModel().
			SetFilter(fenced(mine, bson.E{Key: "type", Value: workspace.TypeFolder}, bson.E{Key: "createdAt", Value: bson.D{{Key: "$gt", Value: op.At}}})).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "treeV", Value: v}}}, {Key: "$unset", Value: bson.D{{Key: "trash", Value: ""}, {Key: "kslot", Value: ""}}}}),
			mongo.NewDeleteManyModel().SetFilter(fenced(mine)))
	}
	_, err := s.items.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
	return wrap("apply "+string(op.Kind), err)
}

// keyOrAbsent matches a document's key field: key, or no key at all for "".
func keyOrAbsent(key string) any {
	if key == "" {
		return bson.D{{Key: "$in", Value: bson.A{nil, ""}}}
	}
	return key
}

// purgeVersionsOf deletes the kept dashboard versions of the workbooks filter matches,
// a thousand workbooks per command.
func (s *Store) purgeVersionsOf(ctx context.Context, filter bson.D) error {
	cur, err := s.items.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "dep", Value: 1}}))
	if err != nil {
		return wrap("find purged workbooks", err)
	}
	var docs []struct {
		ID           int64 `bson:"_id"`
		DeploymentID int64 `bson:"dep"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return wrap("find purged workbooks", err)
	}
	for len(docs) > 0 {
		batch := docs[:min(len(docs), 1000)]
		docs = docs[len(batch):]
		ids := make([]int64, len(batch))
		for i, d := range batch {
			ids[i] = d.ID
		}
		if _, err := s.versions.DeleteMany(ctx, bson.D{{Key: "dep", Value: batch[0].DeploymentID}, {Key: "wb", Value: bson.D{{Key: "$in", Value: ids}}}}); err != nil {
			return wrap("delete dashboard versions", err)
		}
	}
	return nil
}
