package jetstream_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/queuetest"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/natsx"
)

// A manifest whose chunks never come (as when the chunk consumer lived on a killed
// leader and nats.go gave up re-creating it) is a read that fails unavailable once it
// has stalled for its retries, long before the job's own deadline; nats.go's read alone
// waits for that deadline. The chunks are purged from the store to make them never come.
func TestAManifestReadWhoseChunksNeverComeFailsUnavailableBeforeTheJobsDeadline(t *testing.T) {
	t.Parallel()
	nc := devstack.NATSConnForTest(t, devstack.NATSForTest(t).URL)
	names := clusterNames(t)
	q, err := jetstream.Open(context.Background(), nc, jetstream.Options{Names: names,
		Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20}, Retry: natsx.Retrier{Budget: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := contextWithin(t, 3*time.Minute) // the job's deadline
	if err := q.PutManifest(ctx, queuetest.Dep, "lost", bytes.NewReader(make([]byte, 1<<20))); err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, names.Objects)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obj.GetInfo(ctx, "manifest/lost")
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+names.Objects)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, natsjs.WithPurgeSubject("$O."+names.Objects+".C."+info.NUID)); err != nil {
		t.Fatal(err)
	}

	r, err := q.Manifest(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, err := io.Copy(io.Discard, r)
	if !errors.Is(err, dbtsync.ErrQueueUnavailable) || ctx.Err() != nil {
		t.Fatalf("read %d bytes, then %v (the job's deadline: %v); want unavailable before the deadline", n, err, ctx.Err())
	}
}
