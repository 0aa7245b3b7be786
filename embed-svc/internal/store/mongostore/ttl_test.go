package mongostore

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/mongox/wiretest"
)

// The sessions' TTL index on purgeAt: created where the database has TTL indexes; where
// it answers NotImplemented (FerretDB) or already has an index on purgeAt with other
// options (MongoDB's conflict codes, whose text quotes expireAfterSeconds), Sweep
// removes purged records; any other refusal fails the start.
func TestSessionsTTLIndexRefusals(t *testing.T) {
	refusal := func(code int32, name, msg string) bson.D {
		return bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: code}, {Key: "codeName", Value: name}, {Key: "errmsg", Value: msg}}
	}
	for _, c := range []struct {
		name      string
		reply     bson.D
		sweep, ok bool
	}{
		{"created", wiretest.OK, false, true},
		{"NotImplemented", refusal(238, "NotImplemented", `Index option "expireAfterSeconds" is not implemented yet`), true, true},
		{"IndexOptionsConflict", refusal(85, "IndexOptionsConflict", `An equivalent index already exists with the same name but different options. Requested index: { v: 2, key: { purgeAt: 1 }, name: "purgeAt_1", expireAfterSeconds: 0 }, existing index: { v: 2, key: { purgeAt: 1 }, name: "purgeAt_1" }`), true, true},
		{"IndexKeySpecsConflict", refusal(86, "IndexKeySpecsConflict", `An existing index has the same name as the requested index. Requested index: { v: 2, key: { purgeAt: 1 }, name: "purgeAt_1", expireAfterSeconds: 0 }`), true, true},
		{"CannotCreateIndex", refusal(67, "CannotCreateIndex", `expireAfterSeconds must be a number`), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := wiretest.New(t, false, func(cmd string, body bson.Raw) (bson.D, bool) {
				if cmd == "createIndexes" {
					spec := body.Lookup("indexes", "0").Document()
					if _, ttl := spec.Lookup("expireAfterSeconds").Int32OK(); ttl {
						return c.reply, false
					}
				}
				return wiretest.OK, false
			})
			client, err := mongox.Connect(t.Context(), "mongodb://"+srv.Addr+"/?retryWrites=false", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
			s := New(client.Database("embed"))
			err = s.EnsureIndexes(t.Context())
			if (err == nil) != c.ok || s.sweep.Load() != c.sweep {
				t.Fatalf("EnsureIndexes: %v, sweep %v; want ok %v, sweep %v", err, s.sweep.Load(), c.ok, c.sweep)
			}
		})
	}
}
