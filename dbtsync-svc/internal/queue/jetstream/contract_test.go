package jetstream_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/queuetest"
	"github.com/analyticsco/platform/devstack"
)

// TestQueueContract runs the queue contract against JetStream: one in-process
// nats-server, each case's streams, buckets and object store named for the case.
func TestQueueContract(t *testing.T) {
	ns := devstack.NATSForTest(t)
	nc, err := nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	queuetest.Run(t, func(t *testing.T) queuetest.Queue {
		n := devstack.UniqueName(t, "q")
		q, err := jetstream.Open(context.Background(), nc, jetstream.Options{
			// Small: the object stores of every case reserve their bytes on one server.
			// Index pages of 2 ids: listings cross pages.
			Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20, MaxQueuedJobs: queuetest.MaxQueued, MaxRunningJobs: queuetest.MaxRunning, IndexPage: 2},
			Names: jetstream.Names{Stream: strings.ToUpper(n), Subject: n, KV: n + "_kv", Ledgers: n + "_led", Objects: n + "_obj",
				Workers: n + "_workers"}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
}
