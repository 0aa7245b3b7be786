package webhookstore

import (
	"bytes"
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/mongox"
)

// ErrChanged means the subscription changed since the caller read it (UpdateSubscription's
// and RotateSecret's precondition); the caller reads it again and retries.
var ErrChanged = webhooks.ErrChanged

// subsField is the count of an account's subscriptions in its webhook_accounts document.
const subsField = "subs"

// CreateSubscription stores s unless its account has max subscriptions already
// (webhooks.ErrLimit). The limit holds under concurrent creates: each create first takes
// a slot by a conditional $inc of the account's count in webhook_accounts (count and
// insert are two writes, and MongoDB has no atomic "insert if fewer than"), then inserts;
// a failed insert gives its slot back, and so does DeleteSubscription. A process that
// dies between the two writes leaves the count one too high: the account is refused one
// subscription early, never admitted past the limit.
func (m *Mongo) CreateSubscription(ctx context.Context, s webhooks.Subscription, max int) error {
	if err := m.takeSlot(ctx, s.AccountID, max); err != nil {
		return err
	}
	if _, err := m.subs.InsertOne(ctx, s); err != nil {
		m.giveSlot(ctx, s.AccountID)
		return unavailable(err)
	}
	return nil
}

// takeSlot adds one to the account's count if it is below max. The filter matches the
// account's document when its count is below max or absent (a document the deliverer's
// queue accounting made); when it matches nothing, the upsert inserts the document with
// a count of 1, unless it exists (a duplicate key): then the count is at max.
func (m *Mongo) takeSlot(ctx context.Context, account int64, max int) error {
	if max <= 0 {
		return webhooks.ErrLimit
	}
	filter := bson.D{{Key: "_id", Value: account}, {Key: "$or", Value: bson.A{
		bson.D{{Key: subsField, Value: bson.D{{Key: "$lt", Value: int64(max)}}}},
		bson.D{{Key: subsField, Value: bson.D{{Key: "$exists", Value: false}}}},
	}}}
	update := bson.D{{Key: "$inc", Value: bson.D{{Key: subsField, Value: int64(1)}}}}
	_, err := m.accounts.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
	if mongo.IsDuplicateKeyError(err) {
		// The document exists: past the limit, or made by a concurrent first create of
		// the account (MongoDB retries no upsert whose filter is an $or). Once more
		// without the upsert tells the two apart.
		var res *mongo.UpdateResult
		if res, err = m.accounts.UpdateOne(ctx, filter, update); err == nil && res.MatchedCount == 0 {
			return webhooks.ErrLimit
		}
	}
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// giveSlot takes one from the account's count (never below zero). A failure is left:
// the count stays one too high, which refuses early and admits nothing past the limit.
func (m *Mongo) giveSlot(ctx context.Context, account int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = m.accounts.UpdateOne(ctx, bson.D{{Key: "_id", Value: account}, {Key: subsField, Value: bson.D{{Key: "$gt", Value: int64(0)}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: subsField, Value: int64(-1)}}}})
}

// GetSubscription is the account's subscription id (webhooks.ErrNotFound when the account
// has none of that id).
func (m *Mongo) GetSubscription(ctx context.Context, account int64, id string) (webhooks.Subscription, error) {
	var s webhooks.Subscription
	err := m.subs.FindOne(ctx, bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}}).Decode(&s)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return s, webhooks.ErrNotFound
	}
	return s, unavailable(err)
}

// ListSubscriptions returns up to limit of the account's subscriptions after the id
// afterID ("" from the first), in id order (their creation order).
func (m *Mongo) ListSubscriptions(ctx context.Context, account int64, afterID string, limit int) ([]webhooks.Subscription, error) {
	filter := bson.D{{Key: "account", Value: account}}
	if afterID != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}})
	}
	cur, err := m.subs.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, unavailable(err)
	}
	out := []webhooks.Subscription{}
	if err := cur.All(ctx, &out); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// UpdateSubscription sets f on the account's subscription id if it is unchanged since
// the caller read it (its updatedAt is still readAt; else ErrChanged) and returns it as
// stored. Enabling a subscription the deliverer disabled starts it afresh: no disabled
// time or reason, no run of failures. The deliverer's own fields (the sequence, the
// failing run while it stays enabled) are left as they are.
func (m *Mongo) UpdateSubscription(ctx context.Context, account int64, id string, readAt time.Time, f webhooks.Fields, now time.Time) (webhooks.Subscription, error) {
	set := bson.D{{Key: "url", Value: f.URL}, {Key: "events", Value: f.Events}, {Key: "enabled", Value: f.Enabled},
		{Key: "refused", Value: f.IncludeRefused}, {Key: "updatedAt", Value: now.UTC()}}
	unset := bson.D{}
	if f.DeploymentIDs != nil {
		set = append(set, bson.E{Key: "deps", Value: f.DeploymentIDs})
	} else {
		unset = append(unset, bson.E{Key: "deps", Value: ""})
	}
	if f.Description != "" {
		set = append(set, bson.E{Key: "description", Value: f.Description})
	} else {
		unset = append(unset, bson.E{Key: "description", Value: ""})
	}
	if f.Enabled {
		unset = append(unset, bson.E{Key: "disabledAt", Value: ""}, bson.E{Key: "disabledReason", Value: ""})
	}
	update := bson.D{{Key: "$set", Value: set}}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	return m.updateIfUnchanged(ctx, account, id, readAt, update, f.Enabled)
}

// updateIfUnchanged applies update to the account's subscription id if its updatedAt is
// readAt. clearFailing: also end its run of failures when it was disabled (a
// subscription enabled again starts afresh; one that stays enabled keeps its run).
func (m *Mongo) updateIfUnchanged(ctx context.Context, account int64, id string, readAt time.Time, update bson.D, clearFailing bool) (webhooks.Subscription, error) {
	filter := bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}, {Key: "updatedAt", Value: readAt.UTC()}}
	var s webhooks.Subscription
	err := m.subs.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.Before)).Decode(&s)
	if errors.Is(err, mongo.ErrNoDocuments) {
		if _, gerr := m.GetSubscription(ctx, account, id); gerr != nil {
			return webhooks.Subscription{}, gerr
		}
		return webhooks.Subscription{}, ErrChanged
	}
	if err != nil {
		return webhooks.Subscription{}, unavailable(err)
	}
	if clearFailing && !s.Enabled {
		// It was disabled (by the deliverer, or by its account) and is enabled now: its
		// failures before are not the new run's.
		if _, err := m.subs.UpdateOne(ctx, bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "failingSince", Value: ""}}}}); err != nil {
			return webhooks.Subscription{}, unavailable(err)
		}
	}
	return m.GetSubscription(ctx, account, id)
}

// RotateSecret makes sealed the account's subscription's secret, keeping the one it
// replaces (prevSealed, as the caller read it; else ErrChanged) valid until prevUntil.
func (m *Mongo) RotateSecret(ctx context.Context, account int64, id string, prevSealed, sealed []byte, prevUntil, now time.Time) (webhooks.Subscription, error) {
	filter := bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}, {Key: "secret", Value: prevSealed}}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "secret", Value: sealed}, {Key: "prevSecret", Value: prevSealed},
		{Key: "prevUntil", Value: prevUntil.UTC()}, {Key: "updatedAt", Value: now.UTC()}}}}
	var s webhooks.Subscription
	err := m.subs.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&s)
	if errors.Is(err, mongo.ErrNoDocuments) {
		cur, gerr := m.GetSubscription(ctx, account, id)
		if gerr != nil {
			return webhooks.Subscription{}, gerr
		}
		if bytes.Equal(cur.Secret, sealed) { // a retry of this very rotation
			return cur, nil
		}
		return webhooks.Subscription{}, ErrChanged
	}
	return s, unavailable(err)
}

// DeleteSubscription deletes the account's subscription id and its deliveries
// (webhooks.ErrNotFound when there is none), giving back its slot and the queued bytes
// of its pending deliveries. A deliverer holding one of them finds it gone.
func (m *Mongo) DeleteSubscription(ctx context.Context, account int64, id string) error {
	res, err := m.subs.DeleteOne(ctx, bson.D{{Key: "account", Value: account}, {Key: "_id", Value: id}})
	if err != nil {
		return unavailable(err)
	}
	if res.DeletedCount == 0 {
		return webhooks.ErrNotFound
	}
	m.giveSlot(ctx, account)
	return m.deleteDeliveries(ctx, account, id)
}

// deleteDeliveries deletes a deleted subscription's deliveries, pending ones first (each
// by a conditional delete, so that bytes a deliverer gave back as it finished one are not
// given back twice), then the rest.
func (m *Mongo) deleteDeliveries(ctx context.Context, account int64, sub string) error {
	ctx = context.WithoutCancel(ctx) // the subscription is gone: finish its cleanup
	cur, err := m.dels.Find(ctx, bson.D{{Key: "account", Value: account}, {Key: "sub", Value: sub}, {Key: "status", Value: webhooks.StatusPending}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "body", Value: 1}}))
	if err != nil {
		return unavailable(err)
	}
	var pending []webhooks.Delivery
	if err := cur.All(ctx, &pending); err != nil {
		return unavailable(err)
	}
	var freed int64
	for _, d := range pending {
		res, err := m.dels.DeleteOne(ctx, bson.D{{Key: "_id", Value: d.ID}, {Key: "status", Value: webhooks.StatusPending}})
		if err != nil {
			return unavailable(err)
		}
		if res.DeletedCount == 1 {
			freed += pendingBytes(d)
		}
	}
	if freed > 0 {
		if err := m.addQueuedBytes(ctx, account, -freed); err != nil {
			return err
		}
	}
	_, err = m.dels.DeleteMany(ctx, bson.D{{Key: "account", Value: account}, {Key: "sub", Value: sub}})
	return unavailable(err)
}

// pendingBytes is what a pending delivery counts in its account's queued bytes.
func pendingBytes(d webhooks.Delivery) int64 { return int64(len(d.Body)) }

// queuedField is an account's queued delivery bytes in its webhook_accounts document.
const queuedField = "queued"

// addQueuedBytes adds n (negative: takes) to the account's queued bytes.
func (m *Mongo) addQueuedBytes(ctx context.Context, account int64, n int64) error {
	_, err := m.accounts.UpdateOne(ctx, bson.D{{Key: "_id", Value: account}}, bson.D{{Key: "$inc", Value: bson.D{{Key: queuedField, Value: n}}}},
		options.UpdateOne().SetUpsert(true))
	if mongo.IsDuplicateKeyError(err) { // two first writes raced: the loser adds to the winner's
		_, err = m.accounts.UpdateOne(ctx, bson.D{{Key: "_id", Value: account}}, bson.D{{Key: "$inc", Value: bson.D{{Key: queuedField, Value: n}}}})
	}
	return unavailable(err)
}

// unavailable marks a driver error that means the database could not be reached.
func unavailable(err error) error {
	if err != nil && mongox.Unavailable(err) {
		return errors.Join(errs.ErrUnavailable, err)
	}
	return err
}
