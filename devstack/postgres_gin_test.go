package devstack_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/devstack"
)

// TestGINIndexesOnlyLeadingFields: each index FerretDB creates gets a GIN index on its
// leading field only, so PostgreSQL serves a filter on an index's first field from an
// index and reads the whole table for one that skips it, as MongoDB would.
func TestGINIndexesOnlyLeadingFields(t *testing.T) {
	m := devstack.MongoForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	coll := connect(t, m.URI).Database("gin").Collection("things")
	if _, err := coll.Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}},
		{Keys: bson.D{{Key: "c", Value: 1}, {Key: "a", Value: -1}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}, {Key: "c", Value: 3}}}); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, m.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT tablename, indexdef FROM pg_indexes WHERE indexdef LIKE '%USING gin%' AND tablename LIKE 'things%'`)
	if err != nil {
		t.Fatal(err)
	}
	field := regexp.MustCompile(`_jsonb -> '([^']+)'`)
	var table string
	var fields []string
	for rows.Next() {
		var def string
		if err := rows.Scan(&table, &def); err != nil {
			t.Fatal(err)
		}
		for _, f := range field.FindAllStringSubmatch(def, -1) {
			fields = append(fields, f[1])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(fields)
	if want := []string{"_id", "a", "c"}; !slices.Equal(fields, want) {
		t.Fatalf("GIN indexes on %v, want %v (each index's leading field, _id's included)", fields, want)
	}

	// What PostgreSQL can do with FerretDB's pushed-down equality, sequential scans
	// priced out so any usable index wins.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	plan := func(f string) string {
		var lines []string
		rows, err := tx.Query(ctx, `EXPLAIN SELECT _jsonb FROM `+pgx.Identifier{"gin", table}.Sanitize()+` WHERE _jsonb->'`+f+`' @> '1'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	for _, f := range []string{"a", "c"} {
		if p := plan(f); !strings.Contains(p, "Bitmap Index Scan") {
			t.Errorf("a filter on leading field %s is not served by an index:\n%s", f, p)
		}
	}
	if p := plan("b"); !strings.Contains(p, "Seq Scan") || strings.Contains(p, "Index") {
		t.Errorf("a filter on b, which leads no index, is served by an index:\n%s", p)
	}
}
