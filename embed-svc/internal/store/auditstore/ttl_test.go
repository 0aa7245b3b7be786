package auditstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/mongox/wiretest"
)

// ttlServer answers as MongoDB does when the events' TTL index exists with another
// expiry: createIndexes of time_ttl with expireAfterSeconds is refused with code 85 and
// MongoDB's text (which quotes expireAfterSeconds); collMod gets collMod's reply.
func ttlServer(t *testing.T, createReply func(spec bson.Raw) bson.D, collMod bson.D) *wiretest.Server {
	return wiretest.New(t, false, func(cmd string, body bson.Raw) (bson.D, bool) {
		switch cmd {
		case "createIndexes":
			specs, _ := body.Lookup("indexes").ArrayOK()
			vals, _ := specs.Values()
			for _, v := range vals {
				spec := v.Document()
				if name, _ := spec.Lookup("name").StringValueOK(); name == ttlIndex {
					return createReply(spec), false
				}
			}
		case "collMod":
			return collMod, false
		}
		return wiretest.OK, false
	})
}

// conflict85 refuses a TTL index that has an expiry, as MongoDB does when the index
// exists with another one.
func conflict85(spec bson.Raw) bson.D {
	if _, has := spec.Lookup("expireAfterSeconds").Int32OK(); !has {
		return wiretest.OK
	}
	return bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(85)}, {Key: "codeName", Value: "IndexOptionsConflict"},
		{Key: "errmsg", Value: `An equivalent index already exists with the same name but different options. Requested index: { v: 2, key: { time: 1 }, name: "time_ttl", expireAfterSeconds: 7200 }, existing index: { v: 2, key: { time: 1 }, name: "time_ttl", expireAfterSeconds: 3600 }`}}
}

// notImplemented238 is FerretDB v1's answer to any expiry.
func notImplemented238(spec bson.Raw) bson.D {
	if _, has := spec.Lookup("expireAfterSeconds").Int32OK(); !has {
		return wiretest.OK
	}
	return bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(238)}, {Key: "codeName", Value: "NotImplemented"},
		{Key: "errmsg", Value: `Index option "expireAfterSeconds" is not implemented yet`}}
}

func storeOn(t *testing.T, srv *wiretest.Server, retention time.Duration) *Mongo {
	t.Helper()
	client, err := mongox.Connect(t.Context(), "mongodb://"+srv.Addr+"/?retryWrites=false", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return NewMongo(client.Database("audit"), retention)
}

// sent returns the commands named name the server received.
func sent(srv *wiretest.Server, name string) []bson.Raw {
	var out []bson.Raw
	for _, c := range srv.Seen() {
		if c.Index(0).Key() == name {
			out = append(out, c)
		}
	}
	return out
}

// A retention changed since the index was made (MongoDB's code 85, whose text names
// expireAfterSeconds): the start succeeds by changing the index's expiry with collMod,
// and the TTL index, not the sweep, enforces it.
func TestChangedRetentionRunsCollMod(t *testing.T) {
	srv := ttlServer(t, conflict85, wiretest.OK)
	s := storeOn(t, srv, 2*time.Hour)
	if err := s.EnsureIndexes(t.Context()); err != nil {
		t.Fatalf("start with a changed retention: %v", err)
	}
	mods := sent(srv, "collMod")
	if len(mods) != 1 {
		t.Fatalf("%d collMod commands, want 1", len(mods))
	}
	coll, _ := mods[0].Lookup("collMod").StringValueOK()
	name, _ := mods[0].Lookup("index", "name").StringValueOK()
	secs, _ := mods[0].Lookup("index", "expireAfterSeconds").Int32OK()
	if coll != Collection || name != ttlIndex || secs != 7200 {
		t.Fatalf("collMod %v, want index %s of %s to expire after 7200 s", mods[0], ttlIndex, Collection)
	}
	if s.sweep.Load() {
		t.Fatal("the sweep was turned on: the code took the conflict for a database without TTL indexes")
	}
}

// A user without the collMod privilege gets an error that says what to grant.
func TestCollModRefusedSaysWhatToGrant(t *testing.T) {
	unauthorized := bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(13)}, {Key: "codeName", Value: "Unauthorized"},
		{Key: "errmsg", Value: `not authorized on audit to execute command { collMod: "audit_events", index: { name: "time_ttl", expireAfterSeconds: 7200 } }`}}
	srv := ttlServer(t, conflict85, unauthorized)
	err := storeOn(t, srv, 2*time.Hour).EnsureIndexes(t.Context())
	if err == nil {
		t.Fatal("start succeeded although collMod was refused")
	}
	for _, want := range []string{"collMod", "audit.audit_events", "auditRetention", "deploy/mongodb/users.js", "not authorized"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if mongox.Unavailable(err) {
		t.Errorf("a refused privilege is unavailable: %v", err)
	}
}

// A database without TTL indexes (FerretDB's code 238): a plain index of the same name
// and the sweep, for the events and the budgets.
func TestNoTTLIndexesFallsBackToSweep(t *testing.T) {
	srv := ttlServer(t, notImplemented238, wiretest.OK)
	s := storeOn(t, srv, 2*time.Hour)
	if err := s.EnsureIndexes(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !s.sweep.Load() || len(sent(srv, "collMod")) != 0 {
		t.Fatalf("sweep %v, collMod sent %d times; want the sweep and no collMod", s.sweep.Load(), len(sent(srv, "collMod")))
	}
	plain := 0
	for _, c := range sent(srv, "createIndexes") {
		if coll, _ := c.Lookup("createIndexes").StringValueOK(); coll != Collection {
			continue
		}
		spec := c.Lookup("indexes", "0").Document()
		if name, _ := spec.Lookup("name").StringValueOK(); name == ttlIndex {
			if _, has := spec.Lookup("expireAfterSeconds").Int32OK(); !has {
				plain++
			}
		}
	}
	if plain != 1 {
		t.Fatalf("%d plain %s indexes created, want 1", plain, ttlIndex)
	}
}

// FerretDB, the test database, answers a TTL index with the error the classification
// expects, and the store starts on it twice with different retentions, sweeping.
func TestFerretDBHasNoTTLIndexes(t *testing.T) {
	m := devstack.MongoForTest(t)
	ctx := t.Context()
	client, err := mongox.Connect(ctx, m.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "audit"))
	_, err = db.Collection("probe").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "t", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(60)})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 238 || mongox.ClassifyTTLRefusal(err) != mongox.TTLNotSupported {
		t.Fatalf("FerretDB on a TTL index: %T %v, want NotImplemented (238), classified TTLNotSupported", err, err)
	}
	for _, retention := range []time.Duration{time.Hour, 2 * time.Hour} {
		s := NewMongo(db, retention)
		if err := s.EnsureIndexes(ctx); err != nil {
			t.Fatalf("start with retention %v: %v", retention, err)
		}
		if !s.sweep.Load() {
			t.Errorf("retention %v: no sweep on FerretDB", retention)
		}
	}
}
