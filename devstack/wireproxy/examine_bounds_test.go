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
