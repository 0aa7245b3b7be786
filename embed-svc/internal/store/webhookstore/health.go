package webhookstore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
)

// Active is the account's enabled subscriptions: what the dispatcher matches each of the
// account's events against.
func (m *Mongo) Active(ctx context.Context, account int64) ([]webhooks.Subscription, error) {
	cur, err := m.subs.Find(ctx, bson.D{{Key: "account", Value: account}, {Key: "enabled", Value: true}})
	if err != nil {
		return nil, err
	}
	var out []webhooks.Subscription
	return out, cur.All(ctx, &out)
}

// Subscription is one subscription of the account, enabled or not (ErrNotFound when
// it is gone).
func (m *Mongo) Subscription(ctx context.Context, account int64, id string) (webhooks.Subscription, error) {
	var s webhooks.Subscription
	err := m.subs.FindOne(ctx, bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}}).Decode(&s)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return s, webhooks.ErrNotFound
	}
	return s, err
}

// NextSequence gives the subscription's next delivery sequence number.
func (m *Mongo) NextSequence(ctx context.Context, account int64, id string) (int64, error) {
	var s struct {
		Seq int64 `bson:"seq"`
	}
	err := m.subs.FindOneAndUpdate(ctx, bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "seq", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&s)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, webhooks.ErrNotFound
	}
	return s.Seq, err
}

// Succeeded ends the subscription's run of failures.
func (m *Mongo) Succeeded(ctx context.Context, account int64, id string) error {
	_, err := m.subs.UpdateOne(ctx, bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}, {Key: "failingSince", Value: bson.D{{Key: "$exists", Value: true}}}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "failingSince", Value: ""}}}})
	return err
}

// Failed records a failed attempt at now: it starts the subscription's run of failures
// when none is going on, and disables the subscription when the run has lasted
// disableAfter. disabled is true for the one call that disabled it.
func (m *Mongo) Failed(ctx context.Context, account int64, id string, now time.Time, disableAfter time.Duration) (disabled bool, err error) {
	key := bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}}
	if _, err := m.subs.UpdateOne(ctx, append(key, bson.E{Key: "failingSince", Value: bson.D{{Key: "$exists", Value: false}}}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "failingSince", Value: now}}}}); err != nil {
		return false, err
	}
	res, err := m.subs.UpdateOne(ctx, append(key, bson.E{Key: "enabled", Value: true}, bson.E{Key: "failingSince", Value: bson.D{{Key: "$lte", Value: now.Add(-disableAfter)}}}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}, {Key: "disabledAt", Value: now}, {Key: "disabledReason", Value: webhooks.DisabledFailing}, {Key: "updatedAt", Value: now}}}})
	if err != nil {
		return false, err
	}
	return res.ModifiedCount == 1, nil
}
