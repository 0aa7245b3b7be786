package devstack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack/apitest"
)

// TestMongoReplacesFerretDBWhenACommandHangs: when FerretDB leaves a command unanswered
// (here its pool taken for ever by an update of 60 statements sent around the proxy), the
// proxy answers the client at its deadline and FerretDB is replaced, so the stack answers
// again with its data; the command that hung ends too.
func TestMongoReplacesFerretDBWhenACommandHangs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, err := sharedPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := StartMongoWith(ctx, MongoConfig{Dir: filepath.Join(t.TempDir(), "mongo"), Logger: testLogger(t), shared: pg, CommandTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	connect := func(uri string) *mongo.Collection {
		c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
		return c.Database("hang").Collection("c")
	}
	coll := connect(m.URI)
	var docs, updates []any
	for i := range 60 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
		updates = append(updates, bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: i}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}

	m.mu.Lock()
	firstUpstream := m.UpstreamURI
	m.mu.Unlock()
	hung := make(chan error, 1)
	go func() {
		hung <- connect(firstUpstream).Database().RunCommand(ctx, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: updates}}).Err()
	}()
	apitest.Eventually(t, time.Minute, "FerretDB's 50 PostgreSQL connections taken by the update", func() (bool, string) {
		n, err := ferretConnections(ctx, m)
		return n >= 50, fmt.Sprintf("%d connections, %v", n, err)
	})

	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}})
	if se := mongo.ServerError(nil); !errors.As(err, &se) || !se.HasErrorCode(50) {
		t.Fatalf("a command while FerretDB's pool is taken: %v, want MaxTimeMSExpired (50) from the proxy", err)
	}
	apitest.Eventually(t, time.Minute, "the stack answers again", func() (bool, string) {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "w", Value: 1}}}})
		return err == nil, fmt.Sprint(err)
	})
	if n, err := coll.CountDocuments(ctx, bson.D{}); n != 60 || err != nil {
		t.Errorf("documents after FerretDB was replaced: %d, %v; want 60", n, err)
	}
	m.mu.Lock()
	if m.UpstreamURI == firstUpstream {
		t.Errorf("UpstreamURI is still %s, want the new FerretDB's", firstUpstream)
	}
	m.mu.Unlock()
	select {
	case err := <-hung:
		if err == nil {
			t.Error("the update that took FerretDB's pool succeeded, want it ended by FerretDB's replacement")
		}
	case <-ctx.Done():
		t.Error("the update that took FerretDB's pool never ended")
	}
}

// ferretConnections counts FerretDB's connections to m's PostgreSQL database.
func ferretConnections(ctx context.Context, m *Mongo) (int, error) {
	conn, err := pgx.Connect(ctx, m.Postgres.URL("postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'FerretDB' AND datname = $1", m.pgDatabase).Scan(&n)
	return n, err
}
