package publish

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/mongox"
)

// OutboxCollection is the collection of a service's own database that holds its
// outbox (MongoOutbox).
const OutboxCollection = "audit_outbox"

// MongoOutbox is an Outbox in a collection of the recording service's own database.
type MongoOutbox struct{ c *mongo.Collection }

// NewMongoOutbox keeps the outbox in db's OutboxCollection.
func NewMongoOutbox(db *mongo.Database) *MongoOutbox {
	return &MongoOutbox{c: db.Collection(OutboxCollection)}
}

type outboxDoc struct {
	ID      string            `bson:"_id"`
	Subject string            `bson:"subject"`
	Data    []byte            `bson:"data"`
	Header  map[string]string `bson:"header,omitempty"`
	At      time.Time         `bson:"at"`
}

// Put inserts events; one already there (a retried write) is not an error.
func (o *MongoOutbox) Put(ctx context.Context, events []Pending) error {
	docs := make([]any, len(events))
	now := time.Now()
	for i, e := range events {
		docs[i] = outboxDoc{ID: e.ID, Subject: e.Subject, Data: e.Data, Header: e.Header, At: now}
	}
	_, err := o.c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err != nil && !mongox.OnlyDuplicateKeys(err) {
		return err
	}
	return nil
}

// Take returns up to limit events, oldest id first.
func (o *MongoOutbox) Take(ctx context.Context, limit int) ([]Pending, error) {
	cur, err := o.c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	var docs []outboxDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	out := make([]Pending, len(docs))
	for i, d := range docs {
		out[i] = Pending{ID: d.ID, Subject: d.Subject, Data: d.Data, Header: d.Header}
	}
	return out, nil
}

// Remove deletes the events with these ids.
func (o *MongoOutbox) Remove(ctx context.Context, ids []string) error {
	_, err := o.c.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	return err
}
