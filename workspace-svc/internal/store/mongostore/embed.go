package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// embedAccessDoc is one object's own embed grants as stored: on a folder's or a
// workbook's document (embedAccess, absent when there are none) and in a root's
// (embedroots). Only the non-empty lists are stored. By and At are who set them last and
// when: a grant change is not a change of the item's content, so it leaves the item's
// updatedAt and updatedBy alone.
type embedAccessDoc struct {
	AllEmbedUsers string           `bson:"allEmbedUsers,omitempty"`
	Tenants       []tenantEntryDoc `bson:"tenants,omitempty"`
	Groups        []groupEntryDoc  `bson:"groups,omitempty"`
	By            int64            `bson:"by,omitempty"`
	At            time.Time        `bson:"at,omitempty"`
}

type tenantEntryDoc struct {
	Tenant string `bson:"tenant"`
	Access string `bson:"access"`
}

type groupEntryDoc struct {
	Scope  string `bson:"scope"`
	Tenant string `bson:"tenant,omitempty"`
	Group  string `bson:"group"`
	Access string `bson:"access"`
}

// embedRootDoc is a deployment's root grants: {_id: dep, grants}. A root without grants
// has no document.
type embedRootDoc struct {
	ID     int64           `bson:"_id"`
	Grants *embedAccessDoc `bson:"grants"`
}

// toEmbedAccessDoc is g as stored; nil when g is empty.
func toEmbedAccessDoc(g embedaccess.Grants, by int64, at time.Time) *embedAccessDoc {
	if g.Empty() {
		return nil
	}
	d := &embedAccessDoc{AllEmbedUsers: string(g.AllEmbedUsers), By: by, At: at}
	for _, e := range g.Tenants {
		d.Tenants = append(d.Tenants, tenantEntryDoc{Tenant: e.EmbedTenantName, Access: string(e.Access)})
	}
	for _, e := range g.Groups {
		d.Groups = append(d.Groups, groupEntryDoc{Scope: e.Scope, Tenant: e.EmbedTenantName, Group: e.GroupName, Access: string(e.Access)})
	}
	return d
}

// grants is the domain's view of the stored grants (empty lists nil).
func (d *embedAccessDoc) grants() embedaccess.Grants {
	if d == nil {
		return embedaccess.Grants{}
	}
	g := embedaccess.Grants{AllEmbedUsers: embedaccess.Access(d.AllEmbedUsers)}
	for _, e := range d.Tenants {
		g.Tenants = append(g.Tenants, embedaccess.TenantEntry{EmbedTenantName: e.Tenant, Access: embedaccess.Access(e.Access)})
	}
	for _, e := range d.Groups {
		g.Groups = append(g.Groups, embedaccess.GroupEntry{Scope: e.Scope, EmbedTenantName: e.Tenant, GroupName: e.Group, Access: embedaccess.Access(e.Access)})
	}
	return g
}

// SetEmbedAccess replaces the own embed grants of the live folder or workbook id of
// type typ: one update by _id of the embedAccess field alone (unset when g is empty).
func (s *Store) SetEmbedAccess(ctx context.Context, deploymentID, id int64, typ workspace.ItemType, g embedaccess.Grants, by int64, at time.Time) (bool, error) {
	if typ != workspace.TypeFolder && typ != workspace.TypeWorkbook {
		return false, nil
	}
	update := bson.D{{Key: "$unset", Value: bson.D{{Key: "embedAccess", Value: ""}}}, versionInc}
	if d := toEmbedAccessDoc(g, by, at); d != nil {
		update = bson.D{{Key: "$set", Value: bson.D{{Key: "embedAccess", Value: d}}}, versionInc}
	}
	res, err := s.items.UpdateOne(ctx, itemFilter(deploymentID, id, typ, workspace.ItemPrecondition{}), update)
	if err != nil {
		return false, wrap("set embed access", err)
	}
	return res.MatchedCount == 1, nil
}

// RootEmbedAccess returns the grants on the deployment's root: one read by _id.
func (s *Store) RootEmbedAccess(ctx context.Context, deploymentID int64) (embedaccess.Grants, error) {
	var d embedRootDoc
	err := s.embedRoots.FindOne(ctx, bson.D{{Key: "_id", Value: deploymentID}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return embedaccess.Grants{}, nil
	}
	if err != nil {
		return embedaccess.Grants{}, wrap("read root embed access", err)
	}
	return d.Grants.grants(), nil
}

// SetRootEmbedAccess replaces the grants on the deployment's root: the root's document
// replaced (upserted), or deleted when g is empty.
func (s *Store) SetRootEmbedAccess(ctx context.Context, deploymentID int64, g embedaccess.Grants, by int64, at time.Time) error {
	d := toEmbedAccessDoc(g, by, at)
	if d == nil {
		_, err := s.embedRoots.DeleteOne(ctx, bson.D{{Key: "_id", Value: deploymentID}})
		return wrap("clear root embed access", err)
	}
	doc := embedRootDoc{ID: deploymentID, Grants: d}
	_, err := s.embedRoots.ReplaceOne(ctx, bson.D{{Key: "_id", Value: deploymentID}}, doc, options.Replace().SetUpsert(true))
	if mongox.IsDuplicateKey(err) { // two first sets raced on MongoDB: the document exists now
		_, err = s.embedRoots.ReplaceOne(ctx, bson.D{{Key: "_id", Value: deploymentID}}, doc)
	}
	return wrap("set root embed access", err)
}

// publicIDIndex serves WorkbookByPublicID; embeddableIndex and workbookIndex the keyset
// pages of EmbeddableWorkbooks and WorkbookHeads (their equalities, then _id, which
// gives the sort).
const (
	publicIDIndex   = "dep_1_publicId_1"
	embeddableIndex = "dep_1_embeddable_1__id_1"
	workbookIndex   = "dep_1_type_1__id_1"
)

// WorkbookByPublicID returns the live workbook of deploymentID whose published dashboard has
// publicID, with the large parts that parts names: one find on {dep, publicId}.
func (s *Store) WorkbookByPublicID(ctx context.Context, deploymentID int64, publicID string, parts workspace.Parts) (*workspace.Item, error) {
	if publicID == "" {
		return nil, nil
	}
	var d itemDoc
	err := s.items.FindOne(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "publicId", Value: publicID},
		{Key: "type", Value: workspace.TypeWorkbook}, {Key: "deleted", Value: notDeleted}},
		options.FindOne().SetProjection(itemProjection(parts)).SetHint(publicIDIndex)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("find workbook by public id", err)
	}
	return d.item(), nil
}

// EmbeddableWorkbooks returns heads of at most limit live workbooks of deploymentID, by id after
// afterID, whose dashboard is published with allowEmbed (embeddable: true).
func (s *Store) EmbeddableWorkbooks(ctx context.Context, deploymentID, afterID int64, limit int) ([]*workspace.Item, error) {
	return s.workbookHeads(ctx, "list embeddable workbooks", bson.D{{Key: "dep", Value: deploymentID}, {Key: "embeddable", Value: true},
		{Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}}, {Key: "type", Value: workspace.TypeWorkbook}, {Key: "deleted", Value: notDeleted}},
		embeddableIndex, limit)
}

// WorkbookHeads returns heads of at most limit live workbooks of deploymentID, by id after
// afterID.
func (s *Store) WorkbookHeads(ctx context.Context, deploymentID, afterID int64, limit int) ([]*workspace.Item, error) {
	return s.workbookHeads(ctx, "list workbook heads", bson.D{{Key: "dep", Value: deploymentID}, {Key: "type", Value: workspace.TypeWorkbook},
		{Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}}, {Key: "deleted", Value: notDeleted}},
		workbookIndex, limit)
}

// workbookHeads is one keyset page by _id of the heads matching filter, on index hint;
// the database sorts and limits.
func (s *Store) workbookHeads(ctx context.Context, what string, filter bson.D, hint string, limit int) ([]*workspace.Item, error) {
	if limit <= 0 { // a limit of 0 is none to MongoDB
		return []*workspace.Item{}, nil
	}
	cur, err := s.items.Find(ctx, filter, options.Find().SetProjection(headProjection).SetSort(bson.D{{Key: "_id", Value: 1}}).
		SetHint(hint).SetLimit(int64(limit)).SetBatchSize(oneBatch(limit)))
	if err != nil {
		return nil, wrap(what, err)
	}
	docs := []*itemDoc{}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(what, err)
	}
	return items(docs), nil
}

// The backfill of the published heads: a workbook published before its head kept the
// published title and embeddable (no embeddable field) gets them from its published
// dashboard, once per database, at start (EnsureIndexes). It walks the items by _id in
// batches of backfillBatch, reading only the candidates' type and published dashboard,
// and writes each batch's heads in one bulk write of updates by _id that apply only
// while the field is still absent, so a publish that got in first is never undone and
// concurrent starts of several replicas only repeat each other's writes. A marker in
// migrations records that it is done.
const headsMigration = "published-heads"

// backfillBatch is how many candidates one find of the backfill reads (a variable for
// the tests of its batches).
var backfillBatch = 500

// backfillPublishedHeads runs the backfill unless its marker says it ran.
func (s *Store) backfillPublishedHeads(ctx context.Context) error {
	err := s.migrations.FindOne(ctx, bson.D{{Key: "_id", Value: headsMigration}}).Err()
	if err == nil {
		return nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return wrap("read migration marker", err)
	}
	last := int64(math.MinInt64)
	for {
		cur, err := s.items.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}},
			{Key: "published", Value: bson.D{{Key: "$exists", Value: true}}}, {Key: "embeddable", Value: bson.D{{Key: "$exists", Value: false}}}},
			options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(backfillBatch)).
				SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "type", Value: 1}, {Key: "published", Value: 1}}))
		if err != nil {
			return wrap("backfill published heads", err)
		}
		var models []mongo.WriteModel
		n := 0
		for cur.Next(ctx) {
			var d struct {
				ID        int64              `bson:"_id"`
				Type      workspace.ItemType `bson:"type"`
				Published string             `bson:"published"`
			}
			if err := cur.Decode(&d); err != nil {
				_ = cur.Close(ctx)
				return wrap("backfill published heads", err)
			}
			n, last = n+1, d.ID
			if d.Type != workspace.TypeWorkbook || d.Published == "" {
				continue
			}
			var p workspace.Dashboard
			if json.Unmarshal([]byte(d.Published), &p) != nil {
				continue // it renders as null: nothing to open, and nothing to list
			}
			title, embeddable := workspace.PublishedHead(&p)
			models = append(models, mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "_id", Value: d.ID}, {Key: "embeddable", Value: bson.D{{Key: "$exists", Value: false}}}}).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "publishedTitle", Value: title}, {Key: "embeddable", Value: embeddable}}}}))
		}
		err = cur.Err()
		_ = cur.Close(ctx)
		if err != nil {
			return wrap("backfill published heads", err)
		}
		if len(models) > 0 {
			if _, err := s.items.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
				return wrap("backfill published heads", err)
			}
		}
		if n < backfillBatch {
			break
		}
	}
	_, err = s.migrations.InsertOne(ctx, bson.D{{Key: "_id", Value: headsMigration}, {Key: "at", Value: time.Now().UTC()}})
	if err != nil && !mongox.IsDuplicateKey(err) {
		return wrap("record migration marker", err)
	}
	return nil
}
