package wireproxy

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestExamineBoundsKeepEqualitiesPushable: the count of a rooted $or's branch names each
// bounded field once at the top level, where FerretDB pushes equalities down (an $and
// it would not), however often the filter repeats it; a second, different predicate on a
// field goes into an $and beside it.
func TestExamineBoundsKeepEqualitiesPushable(t *testing.T) {
	raw := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gt := bson.D{{Key: "$gt", Value: int64(20)}}
	for _, c := range []struct {
		name    string
		filters []bson.D
		want    bson.D
	}{
		{"repeated equality", []bson.D{{{Key: "a", Value: int64(0)}}, {{Key: "a", Value: int64(0)}, {Key: "b", Value: gt}, {Key: "c", Value: int64(1)}}},
			bson.D{{Key: "a", Value: int64(0)}, {Key: "b", Value: gt}}},
		{"filters only dropped", []bson.D{{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{int64(1), int64(2)}}, {Key: "$ne", Value: int64(3)}}}}},
			bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{int64(1), int64(2)}}}}}},
		{"two different predicates", []bson.D{{{Key: "a", Value: int64(0)}}, {{Key: "a", Value: int64(1)}}},
			bson.D{{Key: "a", Value: int64(0)}, {Key: "$and", Value: bson.A{bson.D{{Key: "a", Value: int64(1)}}}}}},
	} {
		var filters []bson.Raw
		for _, f := range c.filters {
			filters = append(filters, raw(f))
		}
		if got, want := raw(bounds([]string{"a", "b"}, filters...)), raw(c.want); !bytes.Equal(got, want) {
			t.Errorf("%s: bounds %s, want %s", c.name, got, want)
		}
	}
}

// TestExamineCountsAnIDsInPerID: the examiner counts a filter with a top-level _id: {$in:
// [...]} as one count per distinct _id, each with the rest of the filter, which FerretDB
// pushes down to the _id index; any other filter in one count.
func TestExamineCountsAnIDsInPerID(t *testing.T) {
	in := func(vs ...any) bson.D { return bson.D{{Key: "$in", Value: bson.A(vs)}} }
	parts, ok := idCounts(bson.D{{Key: "dep", Value: int64(4)}, {Key: "_id", Value: in(int64(2), int64(1), int32(2))}})
	if one, ok := idCounts(bson.D{{Key: "_id", Value: in("x")}}); !ok || len(one) != 1 || one[0].String() != `{"_id": "x"}` {
		t.Errorf("an $in of one counted as %v (%v), want {_id: \"x\"}", one, ok)
	}
	var got []string
	for _, p := range parts {
		got = append(got, p.String())
	}
	want := []string{`{"dep": {"$numberLong":"4"},"_id": {"$numberLong":"2"}}`, `{"dep": {"$numberLong":"4"},"_id": {"$numberLong":"1"}}`}
	if !ok || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("counts %q (%v), want %q", got, ok, want)
	}
	for _, f := range []bson.D{
		{{Key: "dep", Value: in(int64(1), int64(2))}},
		{{Key: "_id", Value: in(int64(1), bson.Regex{Pattern: "^a"})}},
		{{Key: "_id", Value: bson.D{{Key: "$gt", Value: int64(1)}}}},
	} {
		if parts, ok := idCounts(f); ok {
			t.Errorf("filter %v counted as %v, want one count", f, parts)
		}
	}
}
