package mongostore

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// RecordUser upserts the user's details.
func (s *Store) RecordUser(ctx context.Context, u workspace.User) error {
	_, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: u.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "acct", Value: u.Account}, {Key: "email", Value: u.Email},
			{Key: "firstName", Value: u.FirstName}, {Key: "picture", Value: u.Picture}, {Key: "role", Value: u.Role}}}},
		options.UpdateOne().SetUpsert(true))
	if mongox.IsDuplicateKey(err) { // two first sightings raced: the other one recorded the user
		return nil
	}
	return wrap("record user", err)
}

// Users returns the known users among ids.
func (s *Store) Users(ctx context.Context, ids []int64) (map[int64]workspace.User, error) {
	out := make(map[int64]workspace.User, len(ids))
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
		out[d.ID] = d.user()
	}
	return out, nil
}

func favoriteID(deploymentID, user, item int64) string {
	return fmt.Sprintf("%d:%d:%d", deploymentID, user, item)
}

// AddFavorite records item as a favorite of user (idempotent).
func (s *Store) AddFavorite(ctx context.Context, deploymentID, user int64, ref workspace.ItemRef, at time.Time) error {
	_, err := s.favorites.UpdateOne(ctx, bson.D{{Key: "_id", Value: favoriteID(deploymentID, user, ref.ID)}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "dep", Value: deploymentID}, {Key: "user", Value: user}, {Key: "item", Value: ref.ID},
			{Key: "type", Value: ref.Type}, {Key: "at", Value: at}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil && !mongox.IsDuplicateKey(err) {
		return wrap("add favorite", err)
	}
	return nil
}

// RemoveFavorite forgets a favorite (idempotent).
func (s *Store) RemoveFavorite(ctx context.Context, deploymentID, user, item int64) error {
	_, err := s.favorites.DeleteOne(ctx, bson.D{{Key: "_id", Value: favoriteID(deploymentID, user, item)}})
	return wrap("remove favorite", err)
}

// RemoveItemFavorites forgets every user's favorite of a deleted item.
func (s *Store) RemoveItemFavorites(ctx context.Context, deploymentID, item int64) error {
	_, err := s.favorites.DeleteMany(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "item", Value: item}})
	return wrap("remove favorites", err)
}

// FavoriteIDs returns the ids of user's favorites in the deployment, at most max+1 (the
// caller tells "at the limit" from "over it").
func (s *Store) FavoriteIDs(ctx context.Context, deploymentID, user int64, max int) ([]int64, error) {
	cur, err := s.favorites.Find(ctx, bson.D{{Key: "dep", Value: deploymentID}, {Key: "user", Value: user}},
		options.Find().SetProjection(bson.D{{Key: "item", Value: 1}}).SetLimit(int64(max+1)))
	if err != nil {
		return nil, wrap("find favorites", err)
	}
	var docs []favoriteDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap("find favorites", err)
	}
	out := make([]int64, len(docs)) // never nil: a search by favorites with none finds nothing
	for i, d := range docs {
		out[i] = d.Item
	}
	return out, nil
}

// FavoriteSet tells which of ids are favorites of user: one query, at most len(ids)
// documents.
func (s *Store) FavoriteSet(ctx context.Context, deploymentID, user int64, ids []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = favoriteID(deploymentID, user, id)
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
