package mongostore

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

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
