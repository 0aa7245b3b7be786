package mongostore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// keyIndex is the unique sparse index on kslot, the hold a live item with a key has on
// it: "dep/TYPE/key" (a key has no '/'). Only live keyed items have the field, so
// tombstones and items without a key are not in the index and hold nothing; the one
// field makes the key unique per deployment and type with single-document writes only
// (the insert, the update that sets a key, the tombstone that unsets it), on MongoDB and
// on FerretDB v1, which has no partial indexes (docs/decisions/0001-item-keys.md).
const keyIndex = "kslot_1"

// kslot is the hold of key ("" for no key).
func kslot(deploymentID int64, typ workspace.ItemType, key string) string {
	if key == "" {
		return ""
	}
	return fmt.Sprintf("%d/%s/%s", deploymentID, typ, key)
}

// versionInc is the part of every update of an item's own state that counts it.
var versionInc = bson.E{Key: "$inc", Value: bson.D{{Key: "version", Value: int64(1)}}}

// tombstone is the update that deletes an item: marked deleted, its key's hold given up
// (the key itself stays), counted as a change.
func tombstone(by int64, at time.Time, set ...bson.E) bson.D {
	return bson.D{{Key: "$set", Value: append(bson.D{{Key: "deleted", Value: true}, {Key: "updatedAt", Value: at}, {Key: "updatedBy", Value: by}}, set...)},
		{Key: "$unset", Value: bson.D{{Key: "kslot", Value: ""}}}, versionInc}
}

// duplicateHold reports whether err is a write refused by a unique index. FerretDB v1
// answers a findAndModify that breaks one with an InternalError carrying PostgreSQL's
// unique-violation state instead of E11000.
func duplicateHold(err error) bool {
	return mongox.IsDuplicateKey(err) || (err != nil && strings.Contains(err.Error(), "(SQLSTATE 23505)"))
}

// ItemsByKey returns the live items of type typ of the deployment among keys, by key:
// one find on kslot_1.
func (s *Store) ItemsByKey(ctx context.Context, deploymentID int64, typ workspace.ItemType, keys []string, parts workspace.Parts) (map[string]*workspace.Item, error) {
	if len(keys) > workspace.MaxKeysPerRead {
		return nil, fmt.Errorf("items by key: %d keys, at most %d per read", len(keys), workspace.MaxKeysPerRead)
	}
	out := make(map[string]*workspace.Item, len(keys))
	slots := make([]string, 0, len(keys))
	for _, k := range keys {
		if k != "" {
			slots = append(slots, kslot(deploymentID, typ, k))
		}
	}
	if len(slots) == 0 {
		return out, nil
	}
	cur, err := s.items.Find(ctx, bson.D{{Key: "kslot", Value: bson.D{{Key: "$in", Value: slots}}}, {Key: "dep", Value: deploymentID},
		{Key: "type", Value: typ}, {Key: "deleted", Value: notDeleted}},
		options.Find().SetProjection(itemProjection(parts)).SetHint(keyIndex).SetBatchSize(oneBatch(len(slots))))
	if err != nil {
		return nil, wrap("find items by key", err)
	}
	var docs []*itemDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find items by key", err)
	}
	for _, d := range docs {
		out[d.Key] = d.item()
	}
	return out, nil
}

// duplicate answers an insert of item id that met a duplicate key: its id taken by
// another item (ErrIDTaken) when one is stored with it, else its key's hold
// (ErrKeyTaken). FerretDB's error does not name the index, so the id is looked up.
func (s *Store) duplicate(ctx context.Context, what string, id int64) error {
	n, err := s.items.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}}, options.Count().SetLimit(1))
	if err != nil {
		return wrap(what, err)
	}
	if n > 0 {
		return s.idTaken(what, id)
	}
	return fmt.Errorf("%s %d: %w", what, id, workspace.ErrKeyTaken)
}

// voidCreation stores a folder creation whose key is held by a live folder as a void
// tombstone (deleted, no hold): the op it came from is void, and with its id stored no
// later application of the op can make the folder live once the key is free. An error
// of the insert (its id stored: a repeat application, or an id handed out twice) is
// the caller's to judge.
func (s *Store) voidCreation(ctx context.Context, doc *itemDoc) error {
	void := *doc
	void.KSlot, void.Deleted, void.Void = "", true, true
	_, err := s.items.InsertOne(ctx, &void)
	if err == nil {
		doc.Void = true
	}
	return err
}
