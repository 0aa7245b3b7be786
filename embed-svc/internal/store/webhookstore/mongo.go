// Package webhookstore keeps webhook subscriptions and their deliveries in MongoDB.
// One contract suite per port runs against it on FerretDB behind the serializing proxy,
// with every filter checked against the declared indexes.
package webhookstore

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Collections of the webhook store, in the audit trail's database.
const (
	SubscriptionsCollection = "webhooks"
	DeliveriesCollection    = "webhook_deliveries"
	// AccountsCollection holds each account's queued delivery bytes ({_id: account,
	// queued}), added to when a delivery is queued and taken from when it ends.
	AccountsCollection = "webhook_accounts"
)

// Mongo is the webhook store.
type Mongo struct {
	subs     *mongo.Collection
	dels     *mongo.Collection
	accounts *mongo.Collection
}

// NewMongo keeps the store in db.
func NewMongo(db *mongo.Database) *Mongo {
	return &Mongo{
		subs:     db.Collection(SubscriptionsCollection),
		dels:     db.Collection(DeliveriesCollection),
		accounts: db.Collection(AccountsCollection),
	}
}

// index is a declared index: its name, its keys, whether it is unique.
type index struct {
	name   string
	keys   bson.D
	unique bool
}

var (
	subscriptionIndexes = []index{
		// an account's subscriptions, paged by id; one by id within its account
		{"account_1__id_1", bson.D{{Key: "account", Value: 1}, {Key: "_id", Value: 1}}, false},
	}
	deliveryIndexes = []index{
		// one delivery per subscription and event: a redelivered stream message adds none
		{"sub_1_event_1", bson.D{{Key: "sub", Value: 1}, {Key: "event", Value: 1}}, true},
		// a subscription's deliveries, newest first
		{"account_1_sub_1__id_-1", bson.D{{Key: "account", Value: 1}, {Key: "sub", Value: 1}, {Key: "_id", Value: -1}}, false},
		// the deliverer's due work
		{"status_1_due_1", bson.D{{Key: "status", Value: 1}, {Key: "due", Value: 1}}, false},
	}
)

// EnsureIndexes creates the indexes every query of the store is served by, skipping
// those that exist (FerretDB v1 drops the connection when asked to create an index that
// is already there, so every replica's start but the first would fail).
func (m *Mongo) EnsureIndexes(ctx context.Context) error {
	if err := ensure(ctx, m.subs, subscriptionIndexes); err != nil {
		return err
	}
	return ensure(ctx, m.dels, deliveryIndexes)
}

// ensure creates the indexes of want that coll lacks, by name.
func ensure(ctx context.Context, coll *mongo.Collection, want []index) error {
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		return err
	}
	var existing []struct {
		Name string `bson:"name"`
	}
	if err := cur.All(ctx, &existing); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, ix := range existing {
		have[ix.Name] = true
	}
	var missing []mongo.IndexModel
	for _, ix := range want {
		if !have[ix.name] {
			missing = append(missing, mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetName(ix.name).SetUnique(ix.unique)})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = coll.Indexes().CreateMany(ctx, missing)
	return err
}
