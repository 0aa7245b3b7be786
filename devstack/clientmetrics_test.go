package devstack_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
)

// value is one series of reg: name plus its label values in order ("" for none).
func value(t *testing.T, reg *prometheus.Registry, name string, labelValues ...string) float64 {
	return devstack.MetricValue(t, reg, name, labelValues...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// The MongoDB error counters the alerts read: a command the server refuses is a command
// failure with its bounded labels, and a server that is gone shows as failed heartbeats.
func TestMongoClientErrorMetrics(t *testing.T) {
	m := devstack.MongoForTest(t)
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	client, err := mongox.ConnectWithMetrics(ctx, m.URI, nil, mongox.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	coll := client.Database(devstack.UniqueName(t, "metrics")).Collection("things")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "mongodb_client_command_failures_total", "other", "other"); got != 0 {
		t.Fatalf("failures before any: %v", got)
	}
	// An unknown query operator: the server answers ok:0.
	if _, err := coll.Find(ctx, bson.D{{Key: "$nosuchoperator", Value: 1}}); err == nil {
		t.Fatal("a find with an unknown operator succeeded")
	}
	if got := value(t, reg, "mongodb_client_command_failures_total", "things", "find"); got != 1 {
		t.Fatalf(`mongodb_client_command_failures_total{command="find",collection="things"} = %v, want 1`, got)
	}

	// A client of a server that does not answer: its monitor's heartbeats fail.
	down := prometheus.NewRegistry()
	gone, err := mongox.ConnectWithMetrics(ctx, "mongodb://"+devstack.FreeAddr(t)+"/?connectTimeoutMS=200&heartbeatFrequencyMS=500", nil, mongox.NewMetrics(down))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gone.Disconnect(context.Background()) })
	waitFor(t, "a failed heartbeat", func() bool { return value(t, down, "mongodb_client_heartbeat_failures_total") > 0 })
}

// The NATS connection metrics: connected while up, a disconnect counted as an error when
// the server goes, a reconnect when it is back.
func TestNATSClientMetrics(t *testing.T) {
	ns := devstack.NATSForTest(t)
	reg := prometheus.NewRegistry()
	m := natsx.NewMetrics(reg)
	nc, err := nats.Connect(ns.URL, append(m.Options(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	m.Track(nc)
	if got := value(t, reg, "nats_client_connected"); got != 1 {
		t.Fatalf("nats_client_connected = %v, want 1", got)
	}
	ns.Stop()
	waitFor(t, "the disconnect counted", func() bool {
		return value(t, reg, "nats_client_errors_total", natsx.KindDisconnect) == 1 && value(t, reg, "nats_client_connected") == 0
	})
	if err := ns.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reconnect counted", func() bool {
		return value(t, reg, "nats_client_reconnects_total") == 1 && value(t, reg, "nats_client_connected") == 1
	})
}
