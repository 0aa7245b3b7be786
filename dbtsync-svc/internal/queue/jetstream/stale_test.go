package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/queuetest"
	"github.com/analyticsco/platform/devstack"
)

// A bucket's reads are direct gets, which every replica answers, one that has not
// applied the last writes yet included (a follower behind, a node restarted and
// catching up). A job, a line or an index such a replica says is missing is not taken
// for missing: a worker would drop the delivery of a job queued a moment before (the
// job then stays queued for ever) or take its line's head for gone. The replica behind
// here is a mirror of the bucket that joins its direct gets (MirrorDirect) and holds
// none of the queue's keys, as a replica behind the job's creation: it answers about
// half of the reads, "not found".
func TestAReplicaBehindTheJobsCreationNeitherLosesNorHidesTheJob(t *testing.T) {
	t.Parallel()
	ns := devstack.NATSForTest(t)
	nc, err := nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	names := clusterNames(t)
	q := openQueue(t, nc, names, 1)
	j := queuetest.Job(1, "main")
	queuetest.Enqueue(t, q, j)

	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "BEHIND_" + names.Stream, MirrorDirect: true,
		Mirror: &natsjs.StreamSource{Name: "KV_" + names.KV, FilterSubject: "$KV." + names.KV + ".lag"}}); err != nil {
		t.Fatal(err)
	}
	// The mirror answers its share of the reads once it has received a message.
	if _, err := js.Publish(ctx, "$KV."+names.KV+".lag", []byte("x")); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, names.KV)
	if err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, "the mirror answers reads of the bucket", func() bool {
		_, err := kv.Get(ctx, fmt.Sprintf("job.%d.%s", queuetest.Dep, j.SyncJobID))
		return errors.Is(err, natsjs.ErrKeyNotFound)
	})

	for i := range 40 {
		got, err := q.Job(ctx, queuetest.Dep, j.SyncJobID)
		if errors.Is(err, dbtsync.ErrNotFound) {
			t.Fatalf("read %d: the job queued is not found", i)
		}
		if err != nil || got.SyncJobID != j.SyncJobID || got.Status != dbtsync.StatusQueued {
			t.Fatalf("read %d: %+v %v", i, got, err)
		}
		head, err := q.LineHead(ctx, queuetest.Dep, "main")
		if err != nil || head != j.SyncJobID {
			t.Fatalf("read %d: the line's head is %q (%v), want %s", i, head, err, j.SyncJobID)
		}
	}
	if _, err := q.Job(ctx, queuetest.Dep, queuetest.Job(2, "main").SyncJobID); !errors.Is(err, dbtsync.ErrNotFound) {
		t.Fatalf("a job never queued: want ErrNotFound, got %v", err)
	}
}
