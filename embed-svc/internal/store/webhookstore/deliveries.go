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

// ErrDuplicate is an Enqueue of a delivery its subscription already has for the event
// (a redelivered stream message): nothing is added.
var ErrDuplicate = webhooks.ErrDuplicateDelivery

// Enqueue stores d as pending when its account's queued bytes stay within maxQueued;
// past it, d is stored failed with error queue_full (listed, redeliverable) and queued
// is false. The account's count is added to by a single conditional upsert, so replicas
// enqueueing together never pass the bound.
func (m *Mongo) Enqueue(ctx context.Context, d webhooks.Delivery, maxQueued int64) (queued bool, err error) {
	size := int64(len(d.Body))
	queued, err = m.addQueued(ctx, d.AccountID, size, maxQueued)
	if err != nil {
		return false, err
	}
	if !queued {
		d.Status, d.DoneAt = webhooks.StatusFailed, d.CreatedAt
		d.Last = &webhooks.Attempt{At: d.CreatedAt, Error: "queue_full"}
	}
	if _, err := m.dels.InsertOne(ctx, d); err != nil {
		if queued {
			_, _ = m.accounts.UpdateOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: d.AccountID}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "queued", Value: -size}}}})
		}
		if mongo.IsDuplicateKeyError(err) {
			return false, ErrDuplicate
		}
		return false, err
	}
	return queued, nil
}

// addQueued adds size to the account's queued bytes unless that passes maxQueued. The
// account's document may hold its subscription count alone (no queued field yet), or not
// exist: then it is created with size, and an insert that meets a document made
// meanwhile tries the conditional update again.
func (m *Mongo) addQueued(ctx context.Context, account, size, maxQueued int64) (bool, error) {
	if size > maxQueued {
		return false, nil
	}
	within := bson.D{{Key: "_id", Value: account}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "queued", Value: bson.D{{Key: "$lte", Value: maxQueued - size}}}},
		bson.D{{Key: "queued", Value: bson.D{{Key: "$exists", Value: false}}}},
	}}}
	for range 2 {
		res, err := m.accounts.UpdateOne(ctx, within, bson.D{{Key: "$inc", Value: bson.D{{Key: "queued", Value: size}}}})
		if err != nil {
			return false, err
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
		_, err = m.accounts.InsertOne(ctx, bson.D{{Key: "_id", Value: account}, {Key: "queued", Value: size}})
		if err == nil {
			return true, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return false, err
		}
		// The document exists: past the bound, or made by another writer meanwhile.
	}
	return false, nil
}

// Claim takes up to limit due pending deliveries of accounts not in exclude, oldest due
// first, each for lease: its due time moves to now+lease, so another deliverer takes it
// only once the lease ran out (its holder stopped). Each is taken by a conditional
// update of its own, so two deliverers never hold one delivery.
func (m *Mongo) Claim(ctx context.Context, now time.Time, lease time.Duration, exclude webhooks.Exclude, limit int) ([]webhooks.Delivery, error) {
	f := bson.D{{Key: "status", Value: webhooks.StatusPending}, {Key: "due", Value: bson.D{{Key: "$lte", Value: now}}}}
	if len(exclude.Accounts) > 0 {
		f = append(f, bson.E{Key: "account", Value: bson.D{{Key: "$nin", Value: exclude.Accounts}}})
	}
	if len(exclude.Subscriptions) > 0 {
		f = append(f, bson.E{Key: "sub", Value: bson.D{{Key: "$nin", Value: exclude.Subscriptions}}})
	}
	cur, err := m.dels.Find(ctx, f, options.Find().SetSort(bson.D{{Key: "due", Value: 1}}).SetLimit(int64(limit)).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "due", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var due []struct {
		ID  string    `bson:"_id"`
		Due time.Time `bson:"due"`
	}
	if err := cur.All(ctx, &due); err != nil {
		return nil, err
	}
	out := make([]webhooks.Delivery, 0, len(due))
	for _, c := range due {
		var d webhooks.Delivery
		err := m.dels.FindOneAndUpdate(ctx,
			bson.D{{Key: "_id", Value: c.ID}, {Key: "status", Value: webhooks.StatusPending}, {Key: "due", Value: c.Due}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "due", Value: now.Add(lease)}}}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue // taken by another deliverer, or redelivered, meanwhile
		}
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Release hands back a delivery claimed but not attempted (its account reached its
// bound meanwhile): due at due again, for the next claim.
func (m *Mongo) Release(ctx context.Context, d webhooks.Delivery, due time.Time) error {
	_, err := m.dels.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}, {Key: "status", Value: webhooks.StatusPending}, {Key: "attempts", Value: d.Attempts}, {Key: "due", Value: d.Due}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "due", Value: due}}}})
	return err
}

// Record stores the outcome of an attempt of d, which the caller claimed: status
// pending with the next due time, or succeeded or failed (then the account's queued
// bytes give back d's). It applies only while d is as claimed (its attempts and due
// time), so a deliverer whose lease ran out records nothing over a newer attempt.
func (m *Mongo) Record(ctx context.Context, d webhooks.Delivery, a webhooks.Attempt, status string, next time.Time) (bool, error) {
	set := bson.D{{Key: "status", Value: status}, {Key: "last", Value: a}, {Key: "attempts", Value: d.Attempts + 1}}
	if status == webhooks.StatusPending {
		set = append(set, bson.E{Key: "due", Value: next})
	} else {
		set = append(set, bson.E{Key: "doneAt", Value: a.At})
	}
	res, err := m.dels.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: d.ID}, {Key: "status", Value: webhooks.StatusPending}, {Key: "attempts", Value: d.Attempts}, {Key: "due", Value: d.Due}},
		bson.D{{Key: "$set", Value: set}})
	if err != nil || res.ModifiedCount == 0 {
		return false, err
	}
	if status != webhooks.StatusPending {
		_, err = m.accounts.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.AccountID}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "queued", Value: -int64(len(d.Body))}}}})
	}
	return true, err
}

// QueuedBytes is the account's pending deliveries' bytes.
func (m *Mongo) QueuedBytes(ctx context.Context, account int64) (int64, error) {
	var doc struct {
		Queued int64 `bson:"queued"`
	}
	err := m.accounts.FindOne(ctx, bson.D{{Key: "_id", Value: account}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	return doc.Queued, err
}
