package mongostore

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
)

// slotDoc is the item slots a deployment has taken: {_id: dep, items}.
type slotDoc struct {
	ID    int64 `bson:"_id"`
	Items int64 `bson:"items"`
}

// TakeItemSlot takes one of the deployment's limit item slots: one conditional $inc of
// its counter, {_id: dep, items < limit}, atomic on one document, so concurrent creates
// never pass the limit together, and one write whatever the deployment holds.
//
// When it matches nothing, either every slot is taken or the deployment has no counter
// yet. A deployment whose items were stored before counters existed gets its counter
// once, from a count of its live items: the count, then an insert of {_id: dep, items:
// count}, which only the first of concurrent builders wins (the unique _id; the others
// meet a duplicate key and use the winner's). No slot can be taken before the counter
// exists, so the count includes no item that also took a slot; a delete between the
// count and the insert finds no counter to give its slot back to and leaves the counter
// one high, which errs toward refusing.
func (s *Store) TakeItemSlot(ctx context.Context, deploymentID, limit int64) (bool, error) {
	for range 3 {
		res, err := s.slots.UpdateOne(ctx, bson.D{{Key: "_id", Value: deploymentID}, {Key: "items", Value: bson.D{{Key: "$lt", Value: limit}}}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "items", Value: int64(1)}}}})
		if err != nil {
			return false, wrap("take item slot", err)
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
		err = s.slots.FindOne(ctx, bson.D{{Key: "_id", Value: deploymentID}}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		if err == nil {
			return false, nil // every slot is taken
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return false, wrap("find item slots", err)
		}
		if err := s.buildSlots(ctx, deploymentID); err != nil {
			return false, err
		}
	}
	return false, wrap("take item slot", errors.New("the deployment's counter was not found after it was built"))
}

// buildSlots creates the deployment's counter from a count of its live items, unless
// another request created it first.
func (s *Store) buildSlots(ctx context.Context, deploymentID int64) error {
	n, err := s.items.CountDocuments(ctx, countFilter(deploymentID))
	if err != nil {
		return wrap("count items", err)
	}
	_, err = s.slots.InsertOne(ctx, slotDoc{ID: deploymentID, Items: n})
	if err != nil && !mongox.IsDuplicateKey(err) {
		return wrap("build item slots", err)
	}
	return nil
}

// ReturnItemSlot gives one slot back, never below none taken; without a counter there
// is nothing to give back (the count that builds it sees the item gone).
func (s *Store) ReturnItemSlot(ctx context.Context, deploymentID int64) error {
	_, err := s.slots.UpdateOne(ctx, bson.D{{Key: "_id", Value: deploymentID}, {Key: "items", Value: bson.D{{Key: "$gt", Value: int64(0)}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "items", Value: int64(-1)}}}})
	return wrap("return item slot", err)
}
