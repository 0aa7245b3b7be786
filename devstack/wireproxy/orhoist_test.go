package wireproxy_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestProxyAddsARootedOrsSharedEqualitiesToAFindsTopLevel: the equalities every branch
// of a find's rooted $or shares are added beside it (FerretDB pushes them down), the
// branches unchanged; anything else is forwarded as sent.
func TestProxyAddsARootedOrsSharedEqualitiesToAFindsTopLevel(t *testing.T) {
	gt := func(v any) bson.D { return bson.D{{Key: "$gt", Value: v}} }
	later := bson.A{
		bson.D{{Key: "dep", Value: int64(5)}, {Key: "parent", Value: int64(7)}, {Key: "type", Value: "WORKBOOK"}, {Key: "position", Value: gt(1.0)}},
		bson.D{{Key: "dep", Value: int64(5)}, {Key: "parent", Value: int64(7)}, {Key: "type", Value: "REPORT"}, {Key: "position", Value: 1.0}, {Key: "name", Value: gt("n")}},
	}
	for _, c := range []struct {
		name    string
		command string
		filter  bson.D
		want    bson.D
	}{
		{"a later page's keyset", "find", bson.D{{Key: "$or", Value: later}},
			bson.D{{Key: "$or", Value: later}, {Key: "dep", Value: int64(5)}, {Key: "parent", Value: int64(7)}}},
		{"a field already beside the $or", "find", bson.D{{Key: "parent", Value: int64(7)}, {Key: "$or", Value: later}},
			bson.D{{Key: "parent", Value: int64(7)}, {Key: "$or", Value: later}, {Key: "dep", Value: int64(5)}}},
		{"different values", "find", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "dep", Value: int64(5)}}, bson.D{{Key: "dep", Value: int64(6)}}}}},
			bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "dep", Value: int64(5)}}, bson.D{{Key: "dep", Value: int64(6)}}}}}},
		{"the same number of another type", "find", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "dep", Value: int64(5)}}, bson.D{{Key: "dep", Value: int32(5)}}}}},
			bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "dep", Value: int64(5)}}, bson.D{{Key: "dep", Value: int32(5)}}}}}},
		{"a branch without it", "find", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "dep", Value: int64(5)}}, bson.D{{Key: "a", Value: int64(1)}}}}},
			bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "dep", Value: int64(5)}}, bson.D{{Key: "a", Value: int64(1)}}}}}},
		{"a shared operator", "find", bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "a", Value: gt(1)}}, bson.D{{Key: "a", Value: gt(1)}}}}},
			bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "a", Value: gt(1)}}, bson.D{{Key: "a", Value: gt(1)}}}}}},
		{"a count", "count", bson.D{{Key: "$or", Value: later}}, bson.D{{Key: "$or", Value: later}}},
	} {
		field := "filter"
		if c.command == "count" {
			field = "query"
		}
		got := forwardedBody(t, bson.D{{Key: c.command, Value: "items"}, {Key: field, Value: c.filter}, {Key: "limit", Value: int64(21)}, {Key: "$db", Value: "d"}})
		if lookup(got, "limit") != int64(21) || lookup(got, "$db") != "d" {
			t.Errorf("%s: forwarded as %v: the other fields changed", c.name, got)
		}
		if f, _ := lookup(got, field).(bson.D); !equalDocs(f, c.want) {
			t.Errorf("%s: forwarded filter %v, want %v", c.name, f, c.want)
		}
	}
}
