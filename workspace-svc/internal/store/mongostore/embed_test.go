package mongostore

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestWorkbooksPublishedBeforeTheirHeadsAreBackfilled: workbooks whose dashboards were
// published before the head kept the published title and embeddable (no embeddable
// field) get them at start, across several batches, and are then found by
// EmbeddableWorkbooks; a head written since (embeddable present) is left as it is; a
// second start does nothing (the marker); every command of it is served by an index.
func TestWorkbooksPublishedBeforeTheirHeadsAreBackfilled(t *testing.T) {
	ctx := context.Background()
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(ctx, devstack.MongoForTest(t).URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	db := client.Database(devstack.UniqueName(t, "ws"))
	t.Cleanup(func() { plan.Check(t, db) })
	old := backfillBatch
	backfillBatch = 2
	t.Cleanup(func() { backfillBatch = old })

	now := time.Now().UTC().Truncate(time.Millisecond)
	config, title := "Config title", "Dashboard title"
	dash := func(status string, embed bool, cfgTitle, dashTitle *string) string {
		b, _ := json.Marshal(workspace.Dashboard{PublicID: "p", Status: status, AllowEmbed: embed, Title: dashTitle,
			Config: workspace.DashboardConfig{Title: cfgTitle}, ReportSnapshots: []workspace.ReportSnapshot{}})
		return string(b)
	}
	const dep = 1
	doc := func(id int64, typ workspace.ItemType, more ...bson.E) bson.D {
		return append(bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: int64(dep)}, {Key: "type", Value: string(typ)},
			{Key: "name", Value: "old"}, {Key: "parent", Value: int64(0)}, {Key: "createdBy", Value: int64(1)}, {Key: "updatedBy", Value: int64(1)},
			{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}}, more...)
	}
	published := func(p string) bson.E { return bson.E{Key: "published", Value: p} }
	docs := []any{
		doc(1, workspace.TypeWorkbook, published(dash("published", true, &config, &title)), bson.E{Key: "publicId", Value: "pub-1"}),
		doc(2, workspace.TypeFolder),
		doc(3, workspace.TypeWorkbook, published(dash("published", false, nil, &title))),
		doc(4, workspace.TypeReport),
		doc(5, workspace.TypeWorkbook), // never published
		doc(6, workspace.TypeWorkbook, published(dash("archived", true, nil, &title))),
		doc(7, workspace.TypeWorkbook, published(`{not json`)),
		// Written since: its head says not embeddable, whatever its dashboard says.
		doc(8, workspace.TypeWorkbook, published(dash("published", true, nil, &title)), bson.E{Key: "embeddable", Value: false}),
		doc(9, workspace.TypeWorkbook, published(dash("published", true, nil, &title))),
		doc(10, workspace.TypeWorkbook, published(dash("published", true, nil, nil))),
	}
	if _, err := db.Collection("items").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	s := New(db)
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	heads, err := s.Items(ctx, dep, []int64{1, 3, 5, 6, 7, 8, 9, 10}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id         int64
		title      *string
		embeddable bool
	}{{1, &config, true}, {3, &title, false}, {5, nil, false}, {6, &title, false}, {7, nil, false}, {8, nil, false}, {9, &title, true}, {10, nil, true}} {
		h := heads[c.id]
		if h == nil {
			t.Fatalf("item %d not found", c.id)
		}
		if (h.PublishedTitle == nil) != (c.title == nil) || h.PublishedTitle != nil && *h.PublishedTitle != *c.title || h.Embeddable != c.embeddable {
			t.Errorf("item %d: title %v, embeddable %v; want %v, %v", c.id, deref(h.PublishedTitle), h.Embeddable, deref(c.title), c.embeddable)
		}
	}
	page, err := s.EmbeddableWorkbooks(ctx, dep, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, it := range page {
		got = append(got, it.ID)
	}
	if want := []int64{1, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("embeddable after the backfill: %v, want %v", got, want)
	}
	if wb, err := s.WorkbookByPublicID(ctx, dep, "pub-1", 0); err != nil || wb == nil || wb.ID != 1 || !wb.Embeddable {
		t.Fatalf("a backfilled workbook by its public id: %+v %v", wb, err)
	}
	// The marker is there; a second start leaves even a workbook stored after it alone.
	if n, err := db.Collection("migrations").CountDocuments(ctx, bson.D{{Key: "_id", Value: headsMigration}}); err != nil || n != 1 {
		t.Fatalf("migration marker: %d %v", n, err)
	}
	if _, err := db.Collection("items").InsertOne(ctx, doc(11, workspace.TypeWorkbook, published(dash("published", true, nil, &title)))); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := s.Items(ctx, dep, []int64{11}, 0); err != nil || h[11] == nil || h[11].Embeddable {
		t.Fatalf("a second start backfilled again: %+v %v", h[11], err)
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
