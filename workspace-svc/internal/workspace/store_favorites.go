package workspace

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
)

// favoriteDoc is one item a user marked as a favorite in one deployment.
type favoriteDoc struct {
	ID   string    `bson:"_id"` // dep:user:item
	Dep  int64     `bson:"dep"`
	User int64     `bson:"user"`
	Item int64     `bson:"item"`
	Type ItemType  `bson:"type"`
	At   time.Time `bson:"at"`
}

func favoriteID(dep, user, item int64) string { return fmt.Sprintf("%d:%d:%d", dep, user, item) }

// addFavorite records item as a favorite of user (idempotent).
func (s *Store) addFavorite(ctx context.Context, dep, user int64, ref ItemRef, at time.Time) error {
	_, err := s.favorites.UpdateOne(ctx, bson.D{{Key: "_id", Value: favoriteID(dep, user, ref.ID)}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "dep", Value: dep}, {Key: "user", Value: user}, {Key: "item", Value: ref.ID},
			{Key: "type", Value: ref.Type}, {Key: "at", Value: at}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil && !mongox.IsDuplicateKey(err) {
		return wrap("add favorite", err)
	}
	return nil
}

// removeFavorite forgets a favorite (idempotent).
func (s *Store) removeFavorite(ctx context.Context, dep, user, item int64) error {
	_, err := s.favorites.DeleteOne(ctx, bson.D{{Key: "_id", Value: favoriteID(dep, user, item)}})
	return wrap("remove favorite", err)
}

// removeItemFavorites forgets every user's favorite of a deleted item.
func (s *Store) removeItemFavorites(ctx context.Context, dep, item int64) error {
	_, err := s.favorites.DeleteMany(ctx, bson.D{{Key: "dep", Value: dep}, {Key: "item", Value: item}})
	return wrap("remove favorites", err)
}

// favoriteIDs returns the ids of user's favorites in the deployment, at most max+1 (the
// caller tells "at the limit" from "over it").
func (s *Store) favoriteIDs(ctx context.Context, dep, user int64, max int) ([]int64, error) {
	cur, err := s.favorites.Find(ctx, bson.D{{Key: "dep", Value: dep}, {Key: "user", Value: user}},
		options.Find().SetProjection(bson.D{{Key: "item", Value: 1}}).SetLimit(int64(max+1)))
	if err != nil {
		return nil, wrap("find favorites", err)
	}
	var docs []favoriteDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find favorites", err)
	}
	out := make([]int64, len(docs))
	for i, d := range docs {
		out[i] = d.Item
	}
	return out, nil
}

// favoriteSet tells which of ids are favorites of user: one query, at most len(ids)
// documents.
func (s *Store) favoriteSet(ctx context.Context, dep, user int64, ids []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = favoriteID(dep, user, id)
	}
	cur, err := s.favorites.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}},
		options.Find().SetProjection(bson.D{{Key: "item", Value: 1}}))
	if err != nil {
		return nil, wrap("find favorites", err)
	}
	var docs []favoriteDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find favorites", err)
	}
	for _, d := range docs {
		out[d.Item] = true
	}
	return out, nil
}

// searchFilter is what a search asks the database for.
type searchFilter struct {
	Parent    *int64
	Name      string // a regular expression, already quoted
	Type      ItemType
	CreatedBy int64
	IDs       []int64 // nil: any; empty: none
}

// searchBatch returns at most limit live items matching f after the cursor, in the
// order of sortKey (name or updatedAt, then id; desc reverses both), projected like a
// listing.
func (s *Store) searchBatch(ctx context.Context, dep int64, f searchFilter, sortKey string, desc bool, after *searchCursor, limit int) ([]*itemDoc, error) {
	filter := bson.D{{Key: "dep", Value: dep}, {Key: "deleted", Value: notDeleted}}
	if f.Parent != nil {
		filter = append(filter, bson.E{Key: "parent", Value: *f.Parent})
	}
	if f.Name != "" {
		filter = append(filter, bson.E{Key: "name", Value: bson.D{{Key: "$regex", Value: f.Name}, {Key: "$options", Value: "i"}}})
	}
	if f.Type != "" {
		filter = append(filter, bson.E{Key: "type", Value: f.Type})
	}
	if f.CreatedBy != 0 {
		filter = append(filter, bson.E{Key: "createdBy", Value: f.CreatedBy})
	}
	if f.IDs != nil {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: f.IDs}}})
	}
	dir, cmp := 1, "$gt"
	if desc {
		dir, cmp = -1, "$lt"
	}
	if after != nil {
		var key any = after.Name
		if sortKey == "updatedAt" {
			key = time.UnixMilli(after.At).UTC()
		}
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: sortKey, Value: bson.D{{Key: cmp, Value: key}}}},
			bson.D{{Key: sortKey, Value: key}, {Key: "_id", Value: bson.D{{Key: cmp, Value: after.ID}}}},
		}})
	}
	cur, err := s.items.Find(ctx, filter, options.Find().SetProjection(listProjection).
		SetSort(bson.D{{Key: sortKey, Value: dir}, {Key: "_id", Value: dir}}).SetLimit(int64(limit)).SetBatchSize(int32(limit)))
	if err != nil {
		return nil, wrap("search", err)
	}
	var docs []*itemDoc
	return docs, wrap("search", cur.All(ctx, &docs))
}
