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

// EnsureIndexes creates the indexes every query of the store is served by.
func (m *Mongo) EnsureIndexes(ctx context.Context) error {
	if _, err := m.subs.Indexes().CreateMany(ctx, []mongo.IndexModel{
		// an account's subscriptions, paged by id; one by id within its account
		{Keys: bson.D{{Key: "account", Value: 1}, {Key: "_id", Value: 1}}},
	}); err != nil {
		return err
	}
	_, err := m.dels.Indexes().CreateMany(ctx, []mongo.IndexModel{
		// one delivery per subscription and event: a redelivered stream message adds none
		{Keys: bson.D{{Key: "sub", Value: 1}, {Key: "event", Value: 1}}, Options: options.Index().SetUnique(true)},
		// a subscription's deliveries, newest first
		{Keys: bson.D{{Key: "account", Value: 1}, {Key: "sub", Value: 1}, {Key: "_id", Value: -1}}},
		// the deliverer's due work
		{Keys: bson.D{{Key: "status", Value: 1}, {Key: "due", Value: 1}}},
	})
	return err
}
