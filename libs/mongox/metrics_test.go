package mongox

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

func raw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMetricLabelsAreBounded(t *testing.T) {
	for _, c := range []struct {
		name     string
		cmd      bson.D
		wantCmd  string
		wantColl string
	}{
		{"find", bson.D{{Key: "find", Value: "folders"}}, "find", "folders"},
		{"getMore", bson.D{{Key: "getMore", Value: int64(7)}, {Key: "collection", Value: "sessions"}}, "getMore", "sessions"},
		{"findAndModify", bson.D{{Key: "findAndModify", Value: "external_users"}}, "findAndModify", "external_users"},
		{"odd collection", bson.D{{Key: "find", Value: "Weird Name!"}}, "find", "other"},
		{"unknown command", bson.D{{Key: "frobnicate", Value: "x"}}, "other", "other"},
	} {
		cmd, coll := labels(c.cmd[0].Key, raw(t, c.cmd))
		if cmd != c.wantCmd || coll != c.wantColl {
			t.Errorf("%s: labels %q %q, want %q %q", c.name, cmd, coll, c.wantCmd, c.wantColl)
		}
	}
}

func TestDocumentsReturned(t *testing.T) {
	batch := bson.A{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}
	if n := returned("find", raw(t, bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: batch}, {Key: "id", Value: int64(0)}}}})); n != 3 {
		t.Errorf("find: %d", n)
	}
	if n := returned("getMore", raw(t, bson.D{{Key: "cursor", Value: bson.D{{Key: "nextBatch", Value: batch[:1]}}}})); n != 1 {
		t.Errorf("getMore: %d", n)
	}
	if n := returned("findAndModify", raw(t, bson.D{{Key: "value", Value: bson.D{{Key: "_id", Value: 1}}}})); n != 1 {
		t.Errorf("findAndModify: %d", n)
	}
	if n := returned("findAndModify", raw(t, bson.D{{Key: "value", Value: nil}})); n != 0 {
		t.Errorf("findAndModify without a match: %d", n)
	}
	if n := returned("insert", raw(t, bson.D{{Key: "n", Value: 5}})); n != 0 {
		t.Errorf("insert: %d", n)
	}
}

// TestReplyBytesAreCounted: the bytes of each successful reply are added to its command's
// and collection's series, so a test or a dashboard can see what a request read.
func TestReplyBytesAreCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	reply := raw(t, bson.D{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: bson.A{bson.D{{Key: "blob", Value: strings.Repeat("x", 1000)}}}}}}})
	for range 2 {
		m.succeeded("find", "items", &event.CommandSucceededEvent{CommandFinishedEvent: event.CommandFinishedEvent{CommandName: "find"}, Reply: reply})
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			got[f.GetName()] += s.GetCounter().GetValue()
		}
	}
	if got["mongodb_client_reply_bytes_total"] != float64(2*len(reply)) || got["mongodb_client_documents_returned_total"] != 2 {
		t.Fatalf("reply bytes %v, documents %v; want %d and 2", got["mongodb_client_reply_bytes_total"], got["mongodb_client_documents_returned_total"], 2*len(reply))
	}
}

// A command's first start makes every series of its (command, collection), so what a
// reply held (an upsert returning no document) or a failure adds no series later: the
// series follow the code's commands, never the traffic.
func TestACommandsSeriesAllExistFromItsFirstStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	count := func() int {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range families {
			n += len(f.GetMetric())
		}
		return n
	}
	upsert := raw(t, bson.D{{Key: "findAndModify", Value: "budgets"}})
	cmd, coll := m.started(&event.CommandStartedEvent{CommandName: "findAndModify", Command: upsert})
	m.succeeded(cmd, coll, &event.CommandSucceededEvent{CommandFinishedEvent: event.CommandFinishedEvent{CommandName: "findAndModify"}, Reply: raw(t, bson.D{{Key: "value", Value: nil}})})
	first := count()
	cmd, coll = m.started(&event.CommandStartedEvent{CommandName: "findAndModify", Command: upsert})
	m.succeeded(cmd, coll, &event.CommandSucceededEvent{CommandFinishedEvent: event.CommandFinishedEvent{CommandName: "findAndModify"}, Reply: raw(t, bson.D{{Key: "value", Value: bson.D{{Key: "_id", Value: "a"}}}})})
	cmd, coll = m.started(&event.CommandStartedEvent{CommandName: "findAndModify", Command: upsert})
	m.failed(cmd, coll)
	if n := count(); n != first {
		t.Fatalf("%d series after the first upsert, %d after one that returned a document and one that failed", first, n)
	}
}
