package mongoplan

import (
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func raw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	if d == nil {
		return nil
	}
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ej reads a filter written as extended JSON; "" is no document.
func ej(t *testing.T, s string) bson.Raw {
	t.Helper()
	if s == "" {
		return nil
	}
	var d bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return d
}

func keys(fields ...string) []Key {
	var out []Key
	for _, f := range fields {
		desc := strings.HasPrefix(f, "-")
		out = append(out, Key{Field: strings.TrimPrefix(f, "-"), Desc: desc})
	}
	return out
}

var testIndexes = []Index{
	{Name: "_id_", Keys: keys("_id"), Unique: true},
	{Name: "dep_1_anc_1", Keys: keys("dep", "anc")},
	{Name: "dep_1_parent_1_position_1_name_1__id_1", Keys: keys("dep", "parent", "position", "name", "_id")},
	{Name: "dep_1_createdAt_-1__id_-1", Keys: keys("dep", "-createdAt", "-_id")},
	{Name: "accountId_1_name_1", Keys: keys("accountId", "name"), Unique: true},
	{Name: "path_1", Keys: keys("path")},
}

// TestChoose: the planner model's rules, one case each.
func TestChoose(t *testing.T) {
	for _, c := range []struct {
		name     string
		filter   string
		sort     string
		hint     string
		limit    int64
		served   bool
		index    string
		bounded  []string
		covered  bool
		reason   string
		branches int
	}{
		{name: "the leading field's equality serves", filter: `{"dep": 1}`, served: true, index: "dep_1_anc_1", bounded: []string{"dep"}, covered: true},
		{name: "a field that leads no index is a collection scan (a move's subtree without dep)",
			filter: `{"anc": 5, "treeV": {"$lt": 3}}`, reason: "no index leads with a field the filter bounds (it bounds anc, treeV"},
		{name: "the prefix continues through equalities", filter: `{"dep": 1, "anc": 5, "treeV": {"$lt": 3}}`,
			served: true, index: "dep_1_anc_1", bounded: []string{"dep", "anc"}, covered: true},
		{name: "$in bounds and continues the prefix", filter: `{"dep": {"$in": [1, 2]}, "anc": 5}`,
			served: true, index: "dep_1_anc_1", bounded: []string{"dep", "anc"}, covered: true},
		{name: "$eq is an equality", filter: `{"dep": {"$eq": 1}, "parent": {"$eq": 0}}`,
			served: true, index: "dep_1_parent_1_position_1_name_1__id_1", bounded: []string{"dep", "parent"}, covered: true},
		{name: "a range ends the prefix", filter: `{"dep": {"$gte": 1}, "parent": 0}`,
			served: true, bounded: []string{"dep"}, covered: true},
		{name: "a range on the leading field serves", filter: `{"_id": {"$gt": 10, "$lte": 20}}`,
			served: true, index: "_id_", bounded: []string{"_id"}, covered: true},
		{name: "$ne alone is not served", filter: `{"dep": {"$ne": 1}}`, reason: "it bounds nothing"},
		{name: "$nin, $exists and $not are not served", filter: `{"dep": {"$nin": [1]}, "_id": {"$exists": true}, "path": {"$not": {"$eq": "a"}}}`,
			reason: "it bounds nothing"},
		{name: "$ne beside an equality is a filter on the scan", filter: `{"dep": 1, "deleted": {"$ne": true}}`,
			served: true, index: "dep_1_anc_1", bounded: []string{"dep"}, covered: true},
		{name: "an anchored prefix regex is a range", filter: `{"path": {"$regularExpression": {"pattern": "^model/", "options": ""}}}`,
			served: true, index: "path_1", bounded: []string{"path"}, covered: true},
		{name: "an anchored $regex with a string pattern is a range", filter: `{"path": {"$regex": "^model/"}}`,
			served: true, index: "path_1", bounded: []string{"path"}, covered: true},
		{name: "an unanchored regex is not served", filter: `{"path": {"$regularExpression": {"pattern": "model", "options": ""}}}`, reason: "it bounds nothing"},
		{name: "a case-insensitive anchored regex is not served", filter: `{"path": {"$regex": "^model", "$options": "i"}}`, reason: "it bounds nothing"},
		{name: "an anchor followed by a wildcard is not a prefix", filter: `{"path": {"$regularExpression": {"pattern": "^.*x", "options": ""}}}`, reason: "it bounds nothing"},
		{name: "an empty filter is a collection scan", filter: `{}`, reason: "an empty filter"},
		{name: "an empty filter sorted by an index, with a limit, walks the index to the limit", filter: `{}`, sort: `{"_id": 1}`, limit: 100,
			served: true, index: "_id_", covered: true},
		{name: "an empty filter sorted by an index reversed, with a limit", filter: `{}`, sort: `{"dep": -1, "createdAt": 1}`, limit: 1,
			served: true, index: "dep_1_createdAt_-1__id_-1", covered: true},
		{name: "an empty filter sorted by an index without a limit is a collection scan", filter: `{}`, sort: `{"_id": 1}`, reason: "an empty filter"},
		{name: "an empty filter sorted by no index, with a limit, is a collection scan", filter: `{}`, sort: `{"anc": 1}`, limit: 10, reason: "an empty filter"},
		{name: "an unbounded filter sorted by an index, with a limit, may walk it all", filter: `{"deleted": {"$ne": true}}`, sort: `{"_id": 1}`, limit: 10,
			reason: "it bounds nothing"},
		{name: "the sort after the equality prefix is covered", filter: `{"dep": 1, "parent": 0}`, sort: `{"position": 1, "name": 1, "_id": 1}`,
			served: true, index: "dep_1_parent_1_position_1_name_1__id_1", bounded: []string{"dep", "parent"}, covered: true},
		{name: "the sort reversed is covered", filter: `{"dep": 1, "parent": 0}`, sort: `{"position": -1, "name": -1, "_id": -1}`,
			served: true, index: "dep_1_parent_1_position_1_name_1__id_1", covered: true},
		{name: "a descending index read forwards and backwards", filter: `{"dep": 1}`, sort: `{"createdAt": 1, "_id": 1}`,
			served: true, index: "dep_1_createdAt_-1__id_-1", covered: true},
		{name: "a sort of mixed directions against the index is in memory", filter: `{"dep": 1}`, sort: `{"createdAt": -1, "_id": 1}`,
			reason: "an in-memory sort"},
		{name: "a sort field fixed by an equality may be left out of the index", filter: `{"dep": 1, "parent": 0, "position": 3}`,
			sort: `{"dep": 1, "position": 1, "name": 1}`, served: true, index: "dep_1_parent_1_position_1_name_1__id_1", covered: true},
		{name: "a sort that skips an unfixed index field is in memory", filter: `{"dep": 1}`, sort: `{"position": 1}`,
			reason: "an in-memory sort"},
		{name: "a $in before the sort fields gives no sort", filter: `{"dep": 1, "parent": {"$in": [1, 2]}}`, sort: `{"position": 1}`,
			reason: "an in-memory sort"},
		{name: "a sort over a unique equality is cheap in memory", filter: `{"_id": 7}`, sort: `{"name": 1}`,
			served: true, index: "_id_", covered: false},
		{name: "a sort over a compound unique equality is cheap in memory", filter: `{"accountId": 1, "name": "x"}`, sort: `{"path": 1}`,
			served: true, index: "accountId_1_name_1", covered: false},
		{name: "a rooted $or with every branch served", filter: `{"dep": 1, "$or": [{"anc": 3}, {"_id": 3}]}`,
			served: true, index: "dep_1_anc_1+_id_", covered: true, branches: 2},
		{name: "a rooted $or with one branch unserved", filter: `{"$or": [{"dep": 1}, {"anc": 3}]}`,
			reason: "$or branch 1: no index leads", branches: 2},
		{name: "a keyset $or whose branches each give the sort (MERGE_SORT)", filter: `{"dep": 1, "parent": 0, "$or": [{"position": {"$gt": 2}}, {"position": 2, "name": {"$gt": "a"}}, {"position": 2, "name": "a", "_id": {"$gt": 9}}]}`,
			sort: `{"position": 1, "name": 1, "_id": 1}`, served: true, index: "dep_1_parent_1_position_1_name_1__id_1", covered: true, branches: 3},
		{name: "a $or branch that cannot give the sort fails the sort", filter: `{"dep": 1, "$or": [{"parent": 0}, {"anc": 3}]}`,
			sort: `{"position": 1}`, reason: "$or branch 1: an in-memory sort", branches: 2},
		{name: "a $and is read as its parts", filter: `{"$and": [{"dep": 1}, {"anc": 2}]}`,
			served: true, index: "dep_1_anc_1", bounded: []string{"dep", "anc"}, covered: true},
		{name: "a hint is judged alone", filter: `{"dep": 1, "anc": 2}`, hint: "path_1", reason: "no index leads"},
		{name: "a hint that serves", filter: `{"dep": 1, "parent": 2}`, hint: "dep_1_parent_1_position_1_name_1__id_1",
			served: true, index: "dep_1_parent_1_position_1_name_1__id_1", bounded: []string{"dep", "parent"}, covered: true},
		{name: "a hint naming no index", filter: `{"dep": 1}`, hint: "gone_1", reason: `the hint "gone_1" names no index`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Choose(Command{Name: "find", Collection: "items", Filter: ej(t, c.filter), Sort: ej(t, c.sort), HintName: c.hint, Limit: c.limit}, testIndexes)
			if p.Served != c.served {
				t.Fatalf("served = %v, want %v: %+v", p.Served, c.served, p)
			}
			if c.index != "" && p.Index != c.index {
				t.Errorf("index = %q, want %q", p.Index, c.index)
			}
			if c.bounded != nil && !slices.Equal(p.Bounded, c.bounded) {
				t.Errorf("bounded = %v, want %v", p.Bounded, c.bounded)
			}
			if c.served && p.SortCovered != c.covered {
				t.Errorf("sort covered = %v, want %v", p.SortCovered, c.covered)
			}
			if !strings.Contains(p.Reason, c.reason) || (c.served && p.Reason != "") {
				t.Errorf("reason = %q, want it to say %q", p.Reason, c.reason)
			}
			if len(p.Branches) != c.branches {
				t.Errorf("%d branches, want %d", len(p.Branches), c.branches)
			}
		})
	}
}

// TestChooseHintByKeys: a hint given as a key pattern picks the index with those keys.
func TestChooseHintByKeys(t *testing.T) {
	c := Command{Name: "find", Collection: "items", Filter: raw(t, bson.D{{Key: "dep", Value: 1}}),
		Hint: raw(t, bson.D{{Key: "dep", Value: 1}, {Key: "anc", Value: 1}})}
	if p := Choose(c, testIndexes); !p.Served || p.Index != "dep_1_anc_1" {
		t.Fatalf("hinted by keys: %+v", p)
	}
	c.Hint = raw(t, bson.D{{Key: "anc", Value: 1}})
	if p := Choose(c, testIndexes); p.Served {
		t.Fatalf("a hint by keys no index has served: %+v", p)
	}
}

// TestChooseCountsAndDistinct: a count without a query is answered from the collection's
// metadata; a distinct without one scans an index that leads with its key.
func TestChooseCountsAndDistinct(t *testing.T) {
	if p := Choose(Command{Name: "count", Collection: "items", Filter: emptyDoc}, testIndexes); !p.Served {
		t.Errorf("count without a query: %+v", p)
	}
	if p := Choose(Command{Name: "aggregate", Collection: "items", Filter: emptyDoc}, testIndexes); p.Served {
		t.Errorf("an aggregate counting everything (CountDocuments({})) served: %+v", p)
	}
	if p := Choose(Command{Name: "distinct", Collection: "items", Filter: emptyDoc, Key: "path"}, testIndexes); !p.Served || p.Index != "path_1" {
		t.Errorf("distinct over an index's leading key: %+v", p)
	}
	if p := Choose(Command{Name: "distinct", Collection: "items", Filter: emptyDoc, Key: "anc"}, testIndexes); p.Served {
		t.Errorf("distinct over a field no index leads with served: %+v", p)
	}
}

// TestChooseAssumesTheIDIndex: a collection whose indexes are not listed (not created
// yet) still has _id's.
// TestChoosePrefersAPointLookup: ids looked up in a deployment are read through _id, not
// through a longer prefix of the deployment's index, as MongoDB's trial of plans picks.
func TestChoosePrefersAPointLookup(t *testing.T) {
	ixs := []Index{{Name: "dep_1_type_1_deleted_1", Keys: []Key{{Field: "dep"}, {Field: "type"}, {Field: "deleted"}}}}
	f := raw(t, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}, {Key: "dep", Value: 7}, {Key: "type", Value: "FOLDER"}})
	if p := Choose(Command{Name: "find", Filter: f}, ixs); !p.Served || p.Index != "_id_" {
		t.Fatalf("ids in a deployment: %+v, want the _id index", p)
	}
	f = raw(t, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: 1}}}, {Key: "dep", Value: 7}, {Key: "type", Value: "FOLDER"}})
	if p := Choose(Command{Name: "find", Filter: f}, ixs); p.Index != "dep_1_type_1_deleted_1" {
		t.Fatalf("a range of ids in a deployment: %+v, want the longer prefix", p)
	}
}

func TestChooseAssumesTheIDIndex(t *testing.T) {
	if p := Choose(Command{Name: "find", Filter: raw(t, bson.D{{Key: "_id", Value: 1}})}, nil); !p.Served || p.Index != "_id_" {
		t.Fatalf("an _id equality with no index listed: %+v", p)
	}
}
