// Package mongostore is the idempotency.Store on MongoDB, in the service's own database:
// never Redis, whose memory (noeviction) is kept for revocation markers.
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

	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/mongox"
)

// Collection and UsageCollection are the collections of a service's database that hold
// the records and the per-account hourly usage counters.
const (
	Collection      = "idempotency"
	UsageCollection = "idempotency_usage"
)

// Store is the idempotency.Store on MongoDB.
type Store struct {
	records   *mongo.Collection
	usage     *mongo.Collection
	sweep     atomic.Bool  // the database has no TTL indexes: Claim deletes expired documents
	lastSweep atomic.Int64 // unix seconds of the last sweep
}

// SweepEvery is how often, at most, Claim deletes expired documents on a database
// without TTL indexes (FerretDB v1).
const SweepEvery = time.Minute

// wrap makes an unreachable database errs.ErrUnavailable (503 with Retry-After).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if mongox.Unavailable(err) {
		return fmt.Errorf("%w: %w", mongox.ErrUnavailable, err)
	}
	return err
}

// New returns the store on db's collections.
func New(db *mongo.Database) *Store {
	return &Store{records: db.Collection(Collection), usage: db.Collection(UsageCollection)}
}

// EnsureIndexes creates the unique scope index (the claim's lock and every lookup's
// index) and the TTL indexes that drop expired records and counters.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	_, err := s.records.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "acct", Value: 1}, {Key: "cred", Value: 1}, {Key: "key", Value: 1}},
		Options: options.Index().SetName("acct_1_cred_1_key_1").SetUnique(true)})
	if err != nil {
		return fmt.Errorf("index on %s: %w", Collection, wrap(err))
	}
	for _, c := range []*mongo.Collection{s.records, s.usage} {
		if err := s.expiryIndex(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// expiryIndex drops documents when exp passes: a TTL index where the database has them
// (MongoDB), else a plain index that serves the sweep's range delete.
func (s *Store) expiryIndex(ctx context.Context, c *mongo.Collection) error {
	keys := bson.D{{Key: "exp", Value: 1}}
	_, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: keys, Options: options.Index().SetExpireAfterSeconds(0)})
	switch mongox.ClassifyTTLRefusal(err) {
	case mongox.TTLNotSupported:
		s.sweep.Store(true)
		_, err = c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: keys})
	case mongox.TTLOptionsChanged:
		err = nil
	}
	if err != nil {
		return fmt.Errorf("index on %s: %w", c.Name(), wrap(err))
	}
	return nil
}

// Sweep deletes the records and counters whose expiry passed.
func (s *Store) Sweep(ctx context.Context, now time.Time) error {
	for _, c := range []*mongo.Collection{s.records, s.usage} {
		if _, err := c.DeleteMany(ctx, bson.D{{Key: "exp", Value: bson.D{{Key: "$lt", Value: now}}}}); err != nil {
			return wrap(err)
		}
	}
	return nil
}

func (s *Store) maybeSweep(ctx context.Context, now time.Time) {
	last := s.lastSweep.Load()
	if !s.sweep.Load() || now.Unix()-last < int64(SweepEvery/time.Second) || !s.lastSweep.CompareAndSwap(last, now.Unix()) {
		return
	}
	_ = s.Sweep(ctx, now) // best effort: expired documents are ignored by every read
}

type recordDoc struct {
	ID          bson.ObjectID     `bson:"_id,omitempty"`
	Account     string            `bson:"acct"`
	Credential  string            `bson:"cred"`
	Key         string            `bson:"key"`
	Token       string            `bson:"token"`
	Running     bool              `bson:"running"`
	Lease       time.Time         `bson:"lease"`
	Expires     time.Time         `bson:"exp"`
	Fingerprint []byte            `bson:"fp,omitempty"`
	Status      int               `bson:"status,omitempty"`
	Header      map[string]string `bson:"hdr,omitempty"`
	Body        []byte            `bson:"body,omitempty"`
	Omitted     bool              `bson:"omitted,omitempty"`
}

func scopeFilter(sc idempotency.Scope) bson.D {
	return bson.D{{Key: "acct", Value: sc.Account}, {Key: "cred", Value: sc.Credential}, {Key: "key", Value: sc.Key}}
}

// Claim inserts the running claim; the unique scope index makes the first insert win.
func (s *Store) Claim(ctx context.Context, sc idempotency.Scope, now, leaseUntil, expires time.Time) (*idempotency.Claim, *idempotency.Record, error) {
	for range 3 {
		tok := idempotency.NewToken()
		_, err := s.records.InsertOne(ctx, recordDoc{Account: sc.Account, Credential: sc.Credential, Key: sc.Key, Token: tok, Running: true, Lease: leaseUntil, Expires: expires})
		if err == nil {
			s.maybeSweep(ctx, now)
			return &idempotency.Claim{Scope: sc, Token: tok}, nil, nil
		}
		if !mongox.IsDuplicateKey(err) {
			return nil, nil, wrap(err)
		}
		var d recordDoc
		if err := s.records.FindOne(ctx, scopeFilter(sc)).Decode(&d); err != nil {
			if errors.Is(err, mongo.ErrNoDocuments) {
				continue // expired and dropped in between: insert again
			}
			return nil, nil, wrap(err)
		}
		if d.Expires.After(now) && (!d.Running || d.Lease.After(now)) {
			rec := &idempotency.Record{Running: d.Running, LeaseUntil: d.Lease, Fingerprint: d.Fingerprint,
				Answer: idempotency.Answer{Status: d.Status, Header: d.Header, Body: d.Body, Omitted: d.Omitted}}
			return nil, rec, nil
		}
		// A lapsed claim or an expired record the TTL monitor has not dropped yet: take
		// it over, if no other request took it first (the old token is the condition).
		tok = idempotency.NewToken()
		f := append(scopeFilter(sc), bson.E{Key: "token", Value: d.Token})
		res, err := s.records.ReplaceOne(ctx, f, recordDoc{Account: sc.Account, Credential: sc.Credential, Key: sc.Key, Token: tok, Running: true, Lease: leaseUntil, Expires: expires})
		if err != nil {
			return nil, nil, wrap(err)
		}
		if res.ModifiedCount == 1 {
			return &idempotency.Claim{Scope: sc, Token: tok}, nil, nil
		}
	}
	return nil, nil, fmt.Errorf("idempotency: key %q contended", sc.Key)
}

func (s *Store) own(c *idempotency.Claim) bson.D {
	return append(scopeFilter(c.Scope), bson.E{Key: "token", Value: c.Token})
}

// Renew extends the lease of a running claim.
func (s *Store) Renew(ctx context.Context, c *idempotency.Claim, leaseUntil time.Time) error {
	res, err := s.records.UpdateOne(ctx, append(s.own(c), bson.E{Key: "running", Value: true}), bson.D{{Key: "$set", Value: bson.D{{Key: "lease", Value: leaseUntil}}}})
	if err != nil {
		return wrap(err)
	}
	if res.MatchedCount == 0 {
		return idempotency.ErrClaimLost
	}
	return nil
}

// Complete stores the answer.
func (s *Store) Complete(ctx context.Context, c *idempotency.Claim, fp []byte, a idempotency.Answer) error {
	set := bson.D{{Key: "running", Value: false}, {Key: "fp", Value: fp}, {Key: "status", Value: a.Status},
		{Key: "hdr", Value: a.Header}, {Key: "body", Value: a.Body}, {Key: "omitted", Value: a.Omitted}}
	res, err := s.records.UpdateOne(ctx, s.own(c), bson.D{{Key: "$set", Value: set}})
	if err != nil {
		return wrap(err)
	}
	if res.MatchedCount == 0 {
		return idempotency.ErrClaimLost
	}
	return nil
}

// Release deletes the claim.
func (s *Store) Release(ctx context.Context, c *idempotency.Claim) error {
	_, err := s.records.DeleteOne(ctx, s.own(c))
	return wrap(err)
}

// Use increments the hour idempotency.Bucket of now, then sums the buckets of the window: one upsert
// and one find by _id, never a count over the records.
func (s *Store) Use(ctx context.Context, account string, now time.Time, window time.Duration, records, bytes int64) (idempotency.Usage, error) {
	id := idempotency.BucketID(account, now)
	if records != 0 || bytes != 0 {
		_, err := s.usage.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: records}, {Key: "bytes", Value: bytes}}},
				{Key: "$setOnInsert", Value: bson.D{{Key: "exp", Value: now.Truncate(idempotency.Bucket).Add(window + idempotency.Bucket)}}}},
			options.UpdateOne().SetUpsert(true))
		if err != nil {
			return idempotency.Usage{}, wrap(err)
		}
	}
	var ids bson.A
	for t := now.Add(-window); !t.After(now.Truncate(idempotency.Bucket)); t = t.Add(idempotency.Bucket) {
		ids = append(ids, idempotency.BucketID(account, t))
	}
	if len(ids) == 0 || ids[len(ids)-1] != id {
		ids = append(ids, id)
	}
	cur, err := s.usage.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return idempotency.Usage{}, wrap(err)
	}
	var docs []struct {
		N     int64 `bson:"n"`
		Bytes int64 `bson:"bytes"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return idempotency.Usage{}, wrap(err)
	}
	var u idempotency.Usage
	for _, d := range docs {
		u.Records += d.N
		u.Bytes += d.Bytes
	}
	return u, nil
}
