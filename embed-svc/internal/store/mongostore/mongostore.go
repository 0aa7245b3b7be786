// Package mongostore keeps embed-svc's durable records in MongoDB: embed tenants,
// group and attribute definitions (account-wide scope "_" or an embed tenant's scope),
// external users with their memberships and attribute values, the per-account
// external-user counter, the account-wide embed settings, and the records of minted
// sessions. One file per concern: catalog.go, users.go, sessions.go.
//
// Everything relies only on single-document atomicity (conditional updates,
// findAndModify, unique indexes), which MongoDB and FerretDB behind our proxy both give.
package mongostore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/mongox"
)

// Store implements embed.CatalogStore, embed.UserStore and embed.SessionRecordStore.
type Store struct {
	tenants     *mongo.Collection
	defs        *mongo.Collection
	users       *mongo.Collection
	counters    *mongo.Collection
	settings    *mongo.Collection
	externalIDs *mongox.IDAllocator
	sessions    *mongo.Collection
	retention   time.Duration
	sweep       atomic.Bool // the database has no TTL indexes: Sweep removes purged records
}

// New keeps embed-svc's records in db.
func New(db *mongo.Database) *Store {
	counters := db.Collection("counters")
	return &Store{
		tenants: db.Collection("tenants"), defs: db.Collection("definitions"), users: db.Collection("external_users"),
		counters: counters, settings: db.Collection("account_settings"),
		externalIDs: mongox.NewIDAllocator(counters, "external_user_ids", 20),
		sessions:    db.Collection("sessions"), retention: embed.DefaultSessionRetention,
	}
}

// WithSessionRetention sets how long a session's record stays after its token expires.
func (s *Store) WithSessionRetention(d time.Duration) *Store {
	if d > 0 {
		s.retention = d
	}
	return s
}

// EnsureIndexes creates the unique indexes the store's guarantees rest on.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	for _, ix := range []struct {
		coll *mongo.Collection
		keys bson.D
	}{
		{s.defs, bson.D{{Key: "accountId", Value: 1}, {Key: "scope", Value: 1}, {Key: "kind", Value: 1}, {Key: "name", Value: 1}}},
		{s.users, bson.D{{Key: "accountId", Value: 1}, {Key: "externalId", Value: 1}}},
		{s.sessions, bson.D{{Key: "sid", Value: 1}}},
	} {
		if _, err := ix.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetUnique(true)}); err != nil {
			return fmt.Errorf("index on %s: %w", ix.coll.Name(), wrap(err))
		}
	}
	// Listings read index ranges: tenant users by id, a group's members by id, a scope's definitions by id; a bulk
	// revoke reads the unexpired records of an account, and tenants are counted by account.
	for _, ix := range []struct {
		coll *mongo.Collection
		keys bson.D
	}{
		{s.users, bson.D{{Key: "accountId", Value: 1}, {Key: "tenants", Value: 1}, {Key: "_id", Value: 1}}},
		{s.users, bson.D{{Key: "accountId", Value: 1}, {Key: "memberships", Value: 1}, {Key: "_id", Value: 1}}},
		{s.defs, bson.D{{Key: "accountId", Value: 1}, {Key: "scope", Value: 1}, {Key: "kind", Value: 1}, {Key: "_id", Value: 1}}},
		{s.sessions, bson.D{{Key: "accountId", Value: 1}, {Key: "expiresAt", Value: 1}}},
		{s.tenants, bson.D{{Key: "accountId", Value: 1}}},
	} {
		if _, err := ix.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: ix.keys}); err != nil {
			return fmt.Errorf("index on %s: %w", ix.coll.Name(), wrap(err))
		}
	}
	// Listing is by account, newest first. Records go when purgeAt passes: by a TTL index
	// where the database has them (MongoDB), else by Sweep (FerretDB v1 has no TTL
	// indexes, and answers NotImplemented); the queries ignore purged records either way.
	// An index on purgeAt that exists with other options (MongoDB's conflict codes) serves
	// Sweep's range delete just as well.
	if _, err := s.sessions.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "accountId", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}}); err != nil {
		return fmt.Errorf("index on sessions: %w", wrap(err))
	}
	_, err := s.sessions.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "purgeAt", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)})
	switch mongox.ClassifyTTLRefusal(err) {
	case mongox.TTLNotSupported:
		s.sweep.Store(true)
		_, err = s.sessions.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "purgeAt", Value: 1}}})
	case mongox.TTLOptionsChanged:
		s.sweep.Store(true)
		err = nil
	}
	if err != nil {
		return fmt.Errorf("index on sessions: %w", wrap(err))
	}
	return nil
}

// findAll runs a find on c and converts every document it returns.
func findAll[D, T any](ctx context.Context, c *mongo.Collection, filter bson.D, conv func(D) T, opts ...options.Lister[options.FindOptions]) ([]T, error) {
	cur, err := c.Find(ctx, filter, opts...)
	if err != nil {
		return nil, wrap(err)
	}
	var docs []D
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(err)
	}
	out := make([]T, len(docs))
	for i, d := range docs {
		out[i] = conv(d)
	}
	return out, nil
}

func wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return embed.ErrNotFound
	case mongox.IsDuplicateKey(err):
		return errors.Join(embed.ErrDuplicate, err)
	case mongox.Unavailable(err):
		return errors.Join(embed.ErrUnavailable, err)
	}
	return err
}
