package webhookstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	"github.com/analyticsco/platform/libs/audit"
)

// ErrPending is the answer to a redelivery of a delivery that is pending already.
var ErrPending = webhooks.ErrPending

// noBody leaves a delivery's payload out of what a read returns: the API never shows it.
var noBody = bson.D{{Key: "body", Value: 0}}

// ListDeliveries returns up to limit of the deliveries of the account's subscription
// sub, newest first, before the id beforeID ("" from the newest), of status (""
// any); without their bodies.
func (m *Mongo) ListDeliveries(ctx context.Context, account int64, sub, status, beforeID string, limit int) ([]webhooks.Delivery, error) {
	filter := bson.D{{Key: "account", Value: account}, {Key: "sub", Value: sub}}
	if beforeID != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: beforeID}}})
	}
	if status != "" {
		filter = append(filter, bson.E{Key: "status", Value: status})
	}
	cur, err := m.dels.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(int64(limit)).SetProjection(noBody))
	if err != nil {
		return nil, unavailable(err)
	}
	out := []webhooks.Delivery{}
	if err := cur.All(ctx, &out); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// GetDelivery is the delivery id of the account's subscription sub, without its body
// (webhooks.ErrNotFound when there is none).
func (m *Mongo) GetDelivery(ctx context.Context, account int64, sub, id string) (webhooks.Delivery, error) {
	var d webhooks.Delivery
	err := m.dels.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "account", Value: account}, {Key: "sub", Value: sub}},
		options.FindOne().SetProjection(noBody)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return d, webhooks.ErrNotFound
	}
	return d, unavailable(err)
}

// Redeliver makes a delivery that ended (succeeded or failed) pending again, due now and
// expiring at expires, its attempts kept; it counts in its account's queued bytes again.
// A pending one is ErrPending; none of that id, webhooks.ErrNotFound.
func (m *Mongo) Redeliver(ctx context.Context, account int64, sub, id string, now, expires time.Time) (webhooks.Delivery, error) {
	filter := bson.D{{Key: "_id", Value: id}, {Key: "account", Value: account}, {Key: "sub", Value: sub},
		{Key: "status", Value: bson.D{{Key: "$ne", Value: webhooks.StatusPending}}}}
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "status", Value: webhooks.StatusPending}, {Key: "due", Value: now.UTC()}, {Key: "expires", Value: expires.UTC()}}},
		{Key: "$unset", Value: bson.D{{Key: "lease", Value: ""}, {Key: "doneAt", Value: ""}}},
	}
	var d webhooks.Delivery
	err := m.dels.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		if _, gerr := m.GetDelivery(ctx, account, sub, id); gerr != nil {
			return webhooks.Delivery{}, gerr
		}
		return webhooks.Delivery{}, ErrPending
	}
	if err != nil {
		return webhooks.Delivery{}, unavailable(err)
	}
	if err := m.addQueuedBytes(ctx, account, pendingBytes(d)); err != nil {
		return webhooks.Delivery{}, err
	}
	d.Body = nil
	return d, nil
}

// InsertPing queues a ping of the account's subscription sub: a delivery of type
// webhook.ping, due now, expiring at expires, with the subscription's next sequence
// number (webhooks.ErrNotFound when the subscription is gone).
func (m *Mongo) InsertPing(ctx context.Context, account int64, sub string, now, expires time.Time) (webhooks.Delivery, error) {
	seq, err := m.nextPingSeq(ctx, account, sub)
	if err != nil {
		return webhooks.Delivery{}, err
	}
	now = now.UTC().Truncate(time.Millisecond)
	body, err := json.Marshal(webhooks.Envelope{Type: webhooks.TypePing, Timestamp: now, Sequence: seq, Data: map[string]string{"webhookId": sub}})
	if err != nil {
		return webhooks.Delivery{}, err
	}
	d := webhooks.Delivery{ID: "dlv_" + audit.NewID(now), AccountID: account, SubscriptionID: sub, EventID: "ping_" + audit.NewID(now),
		Type: webhooks.TypePing, Seq: seq, Body: body, Status: webhooks.StatusPending, Due: now, Expires: expires.UTC().Truncate(time.Millisecond), CreatedAt: now}
	if _, err := m.dels.InsertOne(ctx, d); err != nil {
		return webhooks.Delivery{}, unavailable(err)
	}
	if err := m.addQueuedBytes(ctx, account, pendingBytes(d)); err != nil {
		return webhooks.Delivery{}, err
	}
	d.Body = nil
	return d, nil
}

// nextPingSeq takes the subscription's next sequence number: a $inc of its seq,
// conditional on the subscription being the account's.
func (m *Mongo) nextPingSeq(ctx context.Context, account int64, sub string) (int64, error) {
	var s struct {
		Seq int64 `bson:"seq"`
	}
	err := m.subs.FindOneAndUpdate(ctx, bson.D{{Key: "account", Value: account}, {Key: "_id", Value: sub}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "seq", Value: int64(1)}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&s)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, webhooks.ErrNotFound
	}
	if err != nil {
		return 0, unavailable(err)
	}
	return s.Seq, nil
}
