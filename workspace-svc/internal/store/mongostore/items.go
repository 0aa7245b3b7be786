package mongostore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// Items returns the live items of the deployment among ids, by id, with the large parts
// that parts names: the others are left out of the projection, so the database never
// sends them.
func (s *Store) Items(ctx context.Context, deploymentID int64, ids []int64, parts workspace.Parts) (map[int64]*workspace.Item, error) {
	out := make(map[int64]*workspace.Item, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cur, err := s.items.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "dep", Value: deploymentID}, {Key: "deleted", Value: notDeleted}},
		options.Find().SetProjection(itemProjection(parts)).SetBatchSize(1000))
	if err != nil {
		return nil, wrap("find items", err)
	}
	var docs []*itemDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find items", err)
	}
	for _, d := range docs {
		out[d.ID] = d.item()
	}
	return out, nil
}

// InsertItem stores a new workbook or report.
func (s *Store) InsertItem(ctx context.Context, it *workspace.Item) error {
	doc, err := toItemDoc(it)
	if err != nil {
		return err
	}
	_, err = s.items.InsertOne(ctx, doc)
	if mongox.IsDuplicateKey(err) { // _id or kslot_1
		return s.duplicate(ctx, "insert item", it.ID)
	}
	return wrap("insert item", err)
}

// UpdateItem sets fields of a live item of the deployment that meets pre and returns it
// as changed (the whole document: what every caller answers with); nil when there is no
// such item.
func (s *Store) UpdateItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, pre workspace.ItemPrecondition, u workspace.ItemUpdate) (*workspace.Item, error) {
	filter := itemFilter(deploymentID, id, typ, pre)
	set, err := itemSet(u)
	if err != nil {
		return nil, err
	}
	if u.Key != nil { // only on an item without a key; the hold with it
		filter = append(filter, bson.E{Key: "key", Value: bson.D{{Key: "$exists", Value: false}}})
		set = append(set, bson.E{Key: "key", Value: *u.Key}, bson.E{Key: "kslot", Value: kslot(deploymentID, typ, *u.Key)})
	}
	var d itemDoc
	err = s.items.FindOneAndUpdate(ctx, filter, bson.D{{Key: "$set", Value: set}, versionInc},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if duplicateHold(err) { // only kslot_1 can be: _id is not written
		return nil, fmt.Errorf("set key of item %d: %w", id, workspace.ErrKeyTaken)
	}
	if err != nil {
		return nil, wrap("update item", err)
	}
	return d.item(), nil
}

// DeleteItem tombstones a live item of the deployment that meets pre: one update, which
// sends back no document.
func (s *Store) DeleteItem(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, pre workspace.ItemPrecondition, by int64, at time.Time) (bool, error) {
	res, err := s.items.UpdateOne(ctx, itemFilter(deploymentID, id, typ, pre), tombstone(by, at, trashOf(id, by, at)))
	if err != nil {
		return false, wrap("delete item", err)
	}
	return res.MatchedCount == 1, nil
}

// itemFilter matches item id of the deployment, live, of type typ, meeting pre.
func itemFilter(deploymentID, id int64, typ workspace.ItemType, pre workspace.ItemPrecondition) bson.D {
	filter := bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: deploymentID}, {Key: "type", Value: typ}, {Key: "deleted", Value: notDeleted}}
	if pre.Parent != nil {
		filter = append(filter, bson.E{Key: "parent", Value: *pre.Parent})
	}
	if pre.Version != nil {
		var v any = *pre.Version
		if *pre.Version == 0 { // stored before versions were kept: the field is not there
			v = bson.D{{Key: "$exists", Value: false}}
		}
		filter = append(filter, bson.E{Key: "version", Value: v})
	}
	if pre.PublishedVersion != nil {
		var v any = *pre.PublishedVersion
		if *pre.PublishedVersion == 0 { // never published: the field is not there
			v = bson.D{{Key: "$exists", Value: false}}
		}
		filter = append(filter, bson.E{Key: "publishedVersion", Value: v})
	}
	return filter
}

// itemSet is the $set of an update.
func itemSet(u workspace.ItemUpdate) (bson.D, error) {
	set := bson.D{}
	if u.Name != nil {
		set = append(set, bson.E{Key: "name", Value: *u.Name})
	}
	if u.Position != nil {
		set = append(set, bson.E{Key: "position", Value: *u.Position})
	}
	if u.Grants != nil {
		g := grantDocs(*u.Grants)
		if g == nil {
			g = []grantDoc{} // no grants: an empty array
		}
		set = append(set, bson.E{Key: "grants", Value: g})
	}
	// Each large part with its size (sizesDoc).
	part := func(field, value string) {
		set = append(set, bson.E{Key: field, Value: value}, bson.E{Key: "sizes." + field, Value: len(value)})
	}
	if u.Meta != nil {
		part("meta", string(u.Meta))
	}
	if u.CalculatedFields != nil {
		part("calculatedFields", string(u.CalculatedFields))
	}
	switch {
	case u.ClearDraft:
		part("draft", "")
	case u.Draft != nil:
		draft, err := encodeJSON("dashboard draft", u.Draft)
		if err != nil {
			return nil, err
		}
		part("draft", draft)
	}
	if u.Published != nil {
		published, err := encodeJSON("published dashboard", u.Published)
		if err != nil {
			return nil, err
		}
		part("published", published)
		title, embeddable := workspace.PublishedHead(u.Published)
		set = append(set, bson.E{Key: "publishedVersion", Value: u.Published.VersionNumber},
			bson.E{Key: "dashboardId", Value: u.Published.ID}, bson.E{Key: "publicId", Value: u.Published.PublicID},
			bson.E{Key: "publishedTitle", Value: title}, bson.E{Key: "embeddable", Value: embeddable})
	}
	return append(set, bson.E{Key: "updatedAt", Value: u.UpdatedAt}, bson.E{Key: "updatedBy", Value: u.UpdatedBy}), nil
}

// MoveItem re-parents a workbook or report if it is still where the caller's access
// check saw it.
func (s *Store) MoveItem(ctx context.Context, deploymentID, id, from, to, by int64, at time.Time) (bool, error) {
	res, err := s.items.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: deploymentID}, {Key: "parent", Value: from}, {Key: "deleted", Value: notDeleted}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "parent", Value: to}, {Key: "updatedAt", Value: at}, {Key: "updatedBy", Value: by}}}, versionInc})
	if err != nil {
		return false, wrap("move item", err)
	}
	return res.MatchedCount == 1, nil
}

// countFilter matches the live items of a deployment (index dep_1_deleted_1).
func countFilter(deploymentID int64) bson.D {
	return bson.D{{Key: "dep", Value: deploymentID}, {Key: "deleted", Value: notDeleted}}
}

// HasChildren reports whether anything live is inside folder.
func (s *Store) HasChildren(ctx context.Context, deploymentID, folder int64) (bool, error) {
	err := s.items.FindOne(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "parent", Value: folder}, {Key: "deleted", Value: notDeleted}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, wrap("check folder contents", err)
}

// listProjection is what a page of the tree renders and checks access with: never meta,
// calculated fields, drafts or published dashboards, which can be large.
var listProjection = bson.D{{Key: "_id", Value: 1}, {Key: "dep", Value: 1}, {Key: "type", Value: 1}, {Key: "name", Value: 1},
	{Key: "position", Value: 1}, {Key: "parent", Value: 1}, {Key: "createdBy", Value: 1}, {Key: "updatedBy", Value: 1},
	{Key: "createdAt", Value: 1}, {Key: "updatedAt", Value: 1}, {Key: "grants", Value: 1}, {Key: "anc", Value: 1}, {Key: "depth", Value: 1},
	{Key: "sizes", Value: 1}, {Key: "key", Value: 1}, {Key: "version", Value: 1}}

// headProjection is an item's head (workspace.Parts): listProjection and the published
// version, dashboard id and public id, the embed grants, the published title and
// embeddable.
var headProjection = append(append(bson.D{}, listProjection...), bson.E{Key: "publishedVersion", Value: 1},
	bson.E{Key: "dashboardId", Value: 1}, bson.E{Key: "publicId", Value: 1}, bson.E{Key: "embedAccess", Value: 1},
	bson.E{Key: "publishedTitle", Value: 1}, bson.E{Key: "embeddable", Value: 1})

// partFields are the stored fields of the large parts.
var partFields = []struct {
	part  workspace.Parts
	field string
}{{workspace.PartMeta, "meta"}, {workspace.PartCalculatedFields, "calculatedFields"}, {workspace.PartDraft, "draft"}, {workspace.PartPublished, "published"}}

// itemProjection is the head and the fields of parts.
func itemProjection(parts workspace.Parts) bson.D {
	p := append(bson.D{}, headProjection...)
	for _, f := range partFields {
		if parts&f.part != 0 {
			p = append(p, bson.E{Key: f.field, Value: 1})
		}
	}
	return p
}

// Children returns, in page order (position, name, id), at most q.Limit live children of
// q.Parent after q.After: folders, or workbooks and reports. Only the fields of
// listProjection are read; the database sorts and limits.
func (s *Store) Children(ctx context.Context, deploymentID int64, q workspace.ChildrenQuery) ([]*workspace.Item, error) {
	cur, err := s.items.Find(ctx, childrenFilter(deploymentID, q), options.Find().SetProjection(listProjection).
		SetSort(childrenSort).SetHint(listIndex).SetLimit(int64(q.Limit)).SetBatchSize(oneBatch(q.Limit)))
	if err != nil {
		return nil, wrap("list children", err)
	}
	var docs []*itemDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("list children", err)
	}
	return items(docs), nil
}

// oneBatch is the batch size that answers a find of limit documents in its first batch:
// one more than the limit, so a server that does not close a cursor whose batch was
// exactly full (FerretDB) is not asked for an empty second one.
func oneBatch(limit int) int32 { return int32(limit) + 1 }

// childrenSort is the listing order; with childrenFilter's equalities (dep, parent) it is
// the order of listIndex, whose last keys hold the rest of the filter.
var childrenSort = bson.D{{Key: "position", Value: 1}, {Key: "name", Value: 1}, {Key: "_id", Value: 1}}

// childrenFilter matches q's batch of a folder's live children.
//
// A later page starts after the key (position, name, id) of the last child examined.
// That is a rooted $or of three branches, each carrying every equality of the filter
// (dep, parent), the kind and tombstone filters, and one range: position above the
// key's; the same position and a name above; the same position and name and an id above.
// Each branch alone is a scan of listIndex bounded on its leading keys (dep, parent,
// then position, or position and name, or all three, then the range), and it returns its
// documents in the listing order, since the keys after its equalities are the sort's; so
// MongoDB plans the $or as one index scan per branch merged in sort order (OR + SORT_MERGE)
// and reads only what the page returns, however deep the page. Left as one $or beside the
// equalities instead, it may scan the folder's children from its first key and filter:
// each page then costs its offset. Children hints listIndex so no other plan is tried.
func childrenFilter(deploymentID int64, q workspace.ChildrenQuery) bson.D {
	typ := bson.D{{Key: "$ne", Value: workspace.TypeFolder}}
	if q.Folders {
		typ = bson.D{{Key: "$eq", Value: workspace.TypeFolder}}
	}
	base := func(more ...bson.E) bson.D {
		return append(bson.D{{Key: "dep", Value: deploymentID}, {Key: "parent", Value: q.Parent}}, append(more,
			bson.E{Key: "type", Value: typ}, bson.E{Key: "deleted", Value: notDeleted})...)
	}
	a := q.After
	if a == nil {
		return base()
	}
	return bson.D{{Key: "$or", Value: bson.A{
		base(bson.E{Key: "position", Value: bson.D{{Key: "$gt", Value: a.Position}}}),
		base(bson.E{Key: "position", Value: a.Position}, bson.E{Key: "name", Value: bson.D{{Key: "$gt", Value: a.Name}}}),
		base(bson.E{Key: "position", Value: a.Position}, bson.E{Key: "name", Value: a.Name}, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: a.ID}}}),
	}}}
}

// Search returns at most q.Limit live items matching q after q.After, in the order of
// q.Sort (name or updatedAt, then id; Desc reverses both), projected like a listing.
func (s *Store) Search(ctx context.Context, deploymentID int64, q workspace.SearchQuery) ([]*workspace.Item, error) {
	filter, sort, hint := searchQuery(deploymentID, q)
	opts := options.Find().SetProjection(listProjection).SetSort(sort).SetLimit(int64(q.Limit)).SetBatchSize(oneBatch(q.Limit))
	if hint != "" {
		opts.SetHint(hint)
	}
	cur, err := s.items.Find(ctx, filter, opts)
	if err != nil {
		return nil, wrap("search", err)
	}
	var docs []*itemDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("search", err)
	}
	return items(docs), nil
}

// searchIndexes are the indexes of the search orders: dep, the sort field, then the id.
var searchIndexes = map[workspace.SearchSort]string{workspace.ByName: "dep_1_name_1__id_1", workspace.ByUpdatedAt: "dep_1_updatedAt_1__id_1"}

// searchQuery is q's filter, sort and hint ("": none).
//
// A later page is, as in childrenFilter, a rooted $or whose branches each carry the
// whole filter and one range (the sort field past the key's; or the same value and the
// id past it), so each is a scan of the order's index bounded by dep and its range, in
// the sort's order (or its reverse), merged by MongoDB (SORT_MERGE). Across the whole
// tree the order's index is hinted: without it the planner may take dep_1_type_1__id_1 or
// dep_1_deleted_1, which bound the same deployment but sort in memory every match.
// Within a folder (Parent) or among given ids (IDs, the favorites) the planner chooses:
// the folder's children (listIndex) or the ids (_id) bound the read better than the
// deployment's range of the order's index.
func searchQuery(deploymentID int64, q workspace.SearchQuery) (filter, sort bson.D, hint string) {
	sortKey, dir, cmp := "name", 1, "$gt"
	if q.Sort == workspace.ByUpdatedAt {
		sortKey = "updatedAt"
	}
	if q.Desc {
		dir, cmp = -1, "$lt"
	}
	sort = bson.D{{Key: sortKey, Value: dir}, {Key: "_id", Value: dir}}
	if q.Parent == nil && q.IDs == nil {
		hint = searchIndexes[q.Sort]
	}
	// base is the filter with the predicates of a branch on name, updatedAt and _id
	// merged into the operators of each field (a document holds a field once).
	base := func(name, updatedAt, id bson.D) bson.D {
		f := bson.D{{Key: "dep", Value: deploymentID}, {Key: "deleted", Value: notDeleted}}
		if q.Parent != nil {
			f = append(f, bson.E{Key: "parent", Value: *q.Parent})
		}
		if q.NameContains != "" {
			name = append(name, bson.E{Key: "$regex", Value: regexp.QuoteMeta(q.NameContains)}, bson.E{Key: "$options", Value: "i"})
		}
		if len(name) > 0 {
			f = append(f, bson.E{Key: "name", Value: name})
		}
		if len(updatedAt) > 0 {
			f = append(f, bson.E{Key: "updatedAt", Value: updatedAt})
		}
		if q.Type != "" {
			f = append(f, bson.E{Key: "type", Value: q.Type})
		}
		if q.CreatedBy != 0 {
			f = append(f, bson.E{Key: "createdBy", Value: q.CreatedBy})
		}
		if q.IDs != nil {
			id = append(id, bson.E{Key: "$in", Value: q.IDs})
		}
		if len(id) > 0 {
			f = append(f, bson.E{Key: "_id", Value: id})
		}
		return f
	}
	a := q.After
	if a == nil {
		return base(nil, nil, nil), sort, hint
	}
	var key any = a.Name
	if q.Sort == workspace.ByUpdatedAt {
		key = a.UpdatedAt
	}
	past, at := bson.D{{Key: cmp, Value: key}}, bson.D{{Key: "$eq", Value: key}}
	idPast := bson.D{{Key: cmp, Value: a.ID}}
	if q.Sort == workspace.ByUpdatedAt {
		return bson.D{{Key: "$or", Value: bson.A{base(nil, past, nil), base(nil, at, idPast)}}}, sort, hint
	}
	return bson.D{{Key: "$or", Value: bson.A{base(past, nil, nil), base(at, nil, idPast)}}}, sort, hint
}

// LeaseFolder marks folder as receiving items until `until`, unless it is gone or being
// deleted; false means the folder is not there.
func (s *Store) LeaseFolder(ctx context.Context, deploymentID, folder int64, now, until time.Time) (bool, error) {
	res, err := s.items.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: deploymentID}, {Key: "type", Value: workspace.TypeFolder}, {Key: "deleted", Value: notDeleted},
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

// ReleaseFolder gives a lease back. A holder that never releases (a crash) only delays
// deletes until leaseUntil has passed.
func (s *Store) ReleaseFolder(ctx context.Context, deploymentID, folder int64) error {
	_, err := s.items.UpdateOne(ctx, bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: deploymentID}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "leaseCount", Value: -1}}}})
	return wrap("release folder", err)
}

// BeginFolderDelete marks folder as being deleted if no request holds a lease on it.
func (s *Store) BeginFolderDelete(ctx context.Context, deploymentID, folder int64, now, until time.Time) (bool, error) {
	res, err := s.items.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: deploymentID}, {Key: "type", Value: workspace.TypeFolder}, {Key: "deleted", Value: notDeleted},
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

// EndFolderDelete tombstones the folder (deleted) or lifts the delete mark; true when
// it tombstoned a live folder.
func (s *Store) EndFolderDelete(ctx context.Context, deploymentID, folder int64, deleted bool, by int64, at time.Time) (bool, error) {
	filter := bson.D{{Key: "_id", Value: folder}, {Key: "dep", Value: deploymentID}}
	update := bson.D{{Key: "$unset", Value: bson.D{{Key: "deletingUntil", Value: ""}}}}
	if deleted {
		filter = append(filter, bson.E{Key: "deleted", Value: notDeleted})
		update = tombstone(by, at, trashOf(folder, by, at))
	}
	res, err := s.items.UpdateOne(ctx, filter, update)
	if err != nil {
		return false, wrap("end folder delete", err)
	}
	return deleted && res.MatchedCount == 1, nil
}
