package mongostore

import (
	"context"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// fields are the field names a filter reads, those inside $or included.
func fields(filter bson.D) []string {
	var out []string
	for _, e := range filter {
		if e.Key == "$or" {
			for _, alt := range e.Value.(bson.A) {
				out = append(out, fields(alt.(bson.D))...)
			}
			continue
		}
		if !slices.Contains(out, e.Key) {
			out = append(out, e.Key)
		}
	}
	return out
}

func indexNamed(t *testing.T, name string) []string {
	t.Helper()
	for _, ix := range itemIndexes {
		if ix.name == name {
			var keys []string
			for _, k := range ix.keys {
				keys = append(keys, k.Key)
			}
			return keys
		}
	}
	t.Fatalf("no index %s", name)
	return nil
}

// TestListAndCountQueriesAreAnsweredFromIndexKeys: every field the listing's and the
// count's filters read is a key of the index meant for them, and the listing's sort
// follows its equality prefix, so MongoDB filters children by kind and tombstone on the
// index and fetches only the documents it returns, and counts from the index alone.
func TestListAndCountQueriesAreAnsweredFromIndexKeys(t *testing.T) {
	list := indexNamed(t, "dep_1_parent_1_position_1_name_1__id_1_type_1_deleted_1")
	for _, q := range []workspace.ChildrenQuery{{Folders: true}, {Folders: false, After: &workspace.ListKey{Name: "a", ID: 1}}} {
		for _, f := range fields(childrenFilter(1, q)) {
			if !slices.Contains(list, f) {
				t.Errorf("the listing filters on %s, which its index does not hold: %v", f, list)
			}
		}
	}
	var sortKeys []string
	for _, k := range childrenSort {
		sortKeys = append(sortKeys, k.Key)
	}
	if !slices.Equal(list[2:2+len(sortKeys)], sortKeys) {
		t.Errorf("the listing sorts by %v, its index continues its equalities with %v", sortKeys, list[2:])
	}
	count := indexNamed(t, "dep_1_deleted_1")
	if got := fields(countFilter(1)); !slices.Equal(got, count) {
		t.Errorf("the count filters on %v, its index holds %v", got, count)
	}
}

// TestLaterPagesAreARootedOrOfIndexPrefixScans: a later page's filter is a rooted $or
// whose every branch carries the listing's equalities (dep, parent), its kind and
// tombstone filters and one range, each on a prefix of the listing index in its order,
// so MongoDB answers each branch with a bounded index scan in sort order and merges them
// (SORT_MERGE); nothing of the filter stands beside the $or. A search's later page is
// built the same way on its order's index.
func TestLaterPagesAreARootedOrOfIndexPrefixScans(t *testing.T) {
	list := indexNamed(t, listIndex)
	after := &workspace.ListKey{Position: 2, Name: "b", ID: 9}
	for _, folders := range []bool{true, false} {
		filter := childrenFilter(1, workspace.ChildrenQuery{Parent: 4, Folders: folders, After: after})
		if len(filter) != 1 || filter[0].Key != "$or" {
			t.Fatalf("folders %v: a later page's filter %v, want a rooted $or alone", folders, filter)
		}
		branches := filter[0].Value.(bson.A)
		if len(branches) != 3 {
			t.Fatalf("folders %v: %d branches, want 3", folders, len(branches))
		}
		for i, b := range branches {
			b := b.(bson.D)
			// The leading keys the branch bounds: equalities, then the one range.
			var bounded []string
			for _, k := range list {
				v, ok := fieldValue(b, k)
				if !ok {
					break
				}
				bounded = append(bounded, k)
				if _, isOp := v.(bson.D); isOp {
					break // a range ends the bounded prefix
				}
			}
			if want := list[:3+i]; !slices.Equal(bounded, want) {
				t.Errorf("folders %v, branch %d bounds %v of the listing index, want %v", folders, i, bounded, want)
			}
			for _, f := range []string{"type", "deleted"} {
				if _, ok := fieldValue(b, f); !ok {
					t.Errorf("folders %v, branch %d lacks %s", folders, i, f)
				}
			}
		}
	}
	for _, sort := range []workspace.SearchSort{workspace.ByName, workspace.ByUpdatedAt} {
		filter, _, hint := searchQuery(1, workspace.SearchQuery{NameContains: "q", Type: workspace.TypeReport, Sort: sort, After: &workspace.SearchKey{Name: "b", ID: 9}})
		index := indexNamed(t, hint)
		if len(filter) != 1 || filter[0].Key != "$or" {
			t.Fatalf("sort %v: a later page's filter %v, want a rooted $or alone", sort, filter)
		}
		for i, b := range filter[0].Value.(bson.A) {
			b := b.(bson.D)
			for _, k := range index[:2+i] {
				if _, ok := fieldValue(b, k); !ok {
					t.Errorf("sort %v, branch %d does not bound %s of %s", sort, i, k, hint)
				}
			}
			for _, f := range []string{"deleted", "type"} {
				if _, ok := fieldValue(b, f); !ok {
					t.Errorf("sort %v, branch %d lacks %s", sort, i, f)
				}
			}
		}
	}
}

func fieldValue(filter bson.D, key string) (any, bool) {
	for _, e := range filter {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// TestNoIndexIsAPrefixOfAnother: an index that is a prefix of another serves nothing the
// longer one does not, and costs every write; dep_1_parent_1, the listing index's prefix,
// is retired.
func TestNoIndexIsAPrefixOfAnother(t *testing.T) {
	for _, a := range itemIndexes {
		for _, b := range itemIndexes {
			if a.name != b.name && len(a.keys) <= len(b.keys) && slices.Equal(a.keys, b.keys[:len(a.keys)]) {
				t.Errorf("index %s is a prefix of %s", a.name, b.name)
			}
		}
		if slices.Contains(retiredItemIndexes, a.name) {
			t.Errorf("index %s is both declared and retired", a.name)
		}
	}
	if !slices.Contains(retiredItemIndexes, "dep_1_parent_1") {
		t.Error("dep_1_parent_1 is not retired")
	}
}

// TestEnsureIndexesDropsTheRetiredOnes: a database that still has dep_1_parent_1 (made by
// an older version) loses it at start and keeps every declared index; dep_1_type_1, whose
// queries dep_1_type_1__id_1 serves, stays (a replaced index is dropped a release after
// its replacement is added); a second start changes nothing.
func TestEnsureIndexesDropsTheRetiredOnes(t *testing.T) {
	ctx := context.Background()
	client, err := mongox.Connect(ctx, devstack.MongoForTest(t).URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	db := client.Database(devstack.UniqueName(t, "ws"))
	if _, err := db.Collection("items").Indexes().CreateMany(ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "dep", Value: 1}, {Key: "parent", Value: 1}}, Options: options.Index().SetName("dep_1_parent_1")},
		{Keys: bson.D{{Key: "dep", Value: 1}, {Key: "type", Value: 1}}, Options: options.Index().SetName("dep_1_type_1")}}); err != nil {
		t.Fatal(err)
	}
	s := New(db)
	for range 2 {
		if err := s.EnsureIndexes(ctx); err != nil {
			t.Fatal(err)
		}
		cur, err := db.Collection("items").Indexes().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var have []struct {
			Name string `bson:"name"`
		}
		if err := cur.All(ctx, &have); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ix := range have {
			names = append(names, ix.Name)
		}
		want := []string{"_id_", "dep_1_type_1"}
		for _, ix := range itemIndexes {
			want = append(want, ix.name)
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Fatalf("indexes of items %v, want %v", names, want)
		}
	}
}
