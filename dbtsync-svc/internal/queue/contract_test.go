// Package queue_test is the contract of dbtsync's queue ports (dbtsync.JobQueue,
// dbtsync.ManifestStore and dbtsync.JobFeed): one suite, run against the JetStream
// adapter (on an in-process nats-server) and the in-memory fake the unit tests use, in
// parallel, every case with a queue of its own.
package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/memqueue"
	"github.com/analyticsco/platform/devstack"
)

func TestMain(m *testing.M) {
	// Trace context travels in W3C headers, as the processes configure it.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	os.Exit(m.Run())
}

// queue is what both adapters implement.
type queue interface {
	dbtsync.JobQueue
	dbtsync.JobFeed
	dbtsync.ManifestStore
}

type adapter struct {
	name string
	open func(t *testing.T) queue // a queue of the case's own
}

// adapters returns the real adapter (one nats-server for the calling test, resources
// named for each case) and the fake.
func adapters(t *testing.T) []adapter {
	t.Helper()
	ns := devstack.NATSForTest(t)
	nc, err := nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return []adapter{
		{"jetstream", func(t *testing.T) queue {
			n := devstack.UniqueName(t, "q")
			q, err := jetstream.Open(context.Background(), nc, jetstream.Options{
				// Small: the object stores of every case reserve their bytes on one server.
				Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20},
				Names:  jetstream.Names{Stream: strings.ToUpper(n), Subject: n, KV: n + "_kv", Objects: n + "_obj", Workers: n + "_workers"}})
			if err != nil {
				t.Fatal(err)
			}
			return q
		}},
		{"memqueue", func(*testing.T) queue { return memqueue.New() }},
	}
}

type testCase struct {
	name string
	test func(t *testing.T, q queue)
}

// run runs every case against every adapter, in parallel.
func run(t *testing.T, cases []testCase) {
	for _, a := range adapters(t) {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.test(t, a.open(t))
				})
			}
		})
	}
}

const dep = 7

// job is a queued job of the branch, with an id of its time order n.
func job(n int, branch string) dbtsync.Job {
	id := fmt.Sprintf("sj%016x%012x", 1_800_000_000_000_000_000+int64(n), n)
	return dbtsync.Job{SyncJobID: id, DeploymentID: dep, Status: dbtsync.StatusQueued, Source: dbtsync.SourceManifest,
		Output: dbtsync.OutputBranch, BranchName: branch, WorkflowID: "dbt-sync-" + id, Progress: dbtsync.Progress{Phase: "queued"},
		CreatedAt: time.Unix(1_800_000_000, 0).UTC(), HasManifest: true, StartedBy: 3, RequestID: "req-1"}
}

func enqueue(t *testing.T, q queue, js ...dbtsync.Job) {
	t.Helper()
	for _, j := range js {
		if err := q.Enqueue(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var jobCases = []testCase{
	{"a-queued-job-reads-back", func(t *testing.T, q queue) {
		j := job(1, "b")
		ref := "main"
		j.Ref = &ref
		enqueue(t, q, j)
		got, err := q.Job(context.Background(), dep, j.SyncJobID)
		if err != nil || got.SyncJobID != j.SyncJobID || got.Status != dbtsync.StatusQueued || got.BranchName != "b" || got.Ref == nil ||
			*got.Ref != "main" || !got.CreatedAt.Equal(j.CreatedAt) || !got.HasManifest || got.StartedBy != 3 || got.RequestID != "req-1" {
			t.Errorf("read back %+v %v", got, err)
		}
	}},
	{"unknown-jobs-are-not-found", func(t *testing.T, q queue) {
		ctx := context.Background()
		if _, err := q.Job(ctx, dep, job(1, "b").SyncJobID); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("Job: %v", err)
		}
		if _, err := q.UpdateJob(ctx, dep, job(1, "b").SyncJobID, func(*dbtsync.Job) error { return nil }); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("UpdateJob: %v", err)
		}
		if ids, err := q.JobIDs(ctx, dep); err != nil || len(ids) != 0 {
			t.Errorf("JobIDs: %v %v", ids, err)
		}
		if head, err := q.LineHead(ctx, dep, "b"); err != nil || head != "" {
			t.Errorf("LineHead: %q %v", head, err)
		}
		if err := q.LeaveLine(ctx, dep, "b", "sj-none"); err != nil {
			t.Errorf("LeaveLine: %v", err)
		}
	}},
	{"job-ids-are-the-deployments-newest-first", func(t *testing.T, q queue) {
		other := job(4, "b")
		other.DeploymentID = dep + 1
		enqueue(t, q, job(2, "b"), job(1, "c"), job(3, "b"), other)
		ids, err := q.JobIDs(context.Background(), dep)
		want := []string{job(3, "").SyncJobID, job(2, "").SyncJobID, job(1, "").SyncJobID}
		if err != nil || fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("JobIDs = %v %v, want %v", ids, err, want)
		}
	}},
	{"update-applies-fn-and-an-error-aborts-it", func(t *testing.T, q queue) {
		ctx := context.Background()
		j := job(1, "b")
		enqueue(t, q, j)
		got, err := q.UpdateJob(ctx, dep, j.SyncJobID, func(j *dbtsync.Job) error {
			j.Status, j.Attempts = dbtsync.StatusRunning, 1
			return nil
		})
		if err != nil || got.Status != dbtsync.StatusRunning {
			t.Fatalf("UpdateJob = %+v %v", got, err)
		}
		refused := errors.New("refused")
		if _, err := q.UpdateJob(ctx, dep, j.SyncJobID, func(j *dbtsync.Job) error { j.Status = "x"; return refused }); err != refused {
			t.Fatalf("an aborted update: %v", err)
		}
		if got, _ := q.Job(ctx, dep, j.SyncJobID); got.Status != dbtsync.StatusRunning || got.Attempts != 1 {
			t.Errorf("after the aborted update %+v", got)
		}
	}},
	{"concurrent-updates-all-apply", func(t *testing.T, q queue) {
		j := job(1, "b")
		enqueue(t, q, j)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, err := q.UpdateJob(context.Background(), dep, j.SyncJobID, func(j *dbtsync.Job) error {
					j.Attempts++
					time.Sleep(time.Millisecond) // widens the window between read and write where an update could be lost
					return nil
				}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got, _ := q.Job(context.Background(), dep, j.SyncJobID); got.Attempts != 8 {
			t.Errorf("attempts %d after 8 concurrent increments", got.Attempts)
		}
	}},
	{"a-branchs-line-is-in-queue-order", func(t *testing.T, q queue) {
		ctx := context.Background()
		a, b, c, other := job(1, "b"), job(2, "b"), job(3, "b"), job(4, "other")
		enqueue(t, q, a, b, other, c)
		head := func(want string) {
			t.Helper()
			if got, err := q.LineHead(ctx, dep, "b"); err != nil || got != want {
				t.Fatalf("head %q %v, want %q", got, err, want)
			}
		}
		head(a.SyncJobID)
		if got, _ := q.LineHead(ctx, dep, "other"); got != other.SyncJobID {
			t.Errorf("another branch's head %q", got)
		}
		for _, step := range []struct{ leave, head string }{{a.SyncJobID, b.SyncJobID}, {c.SyncJobID, b.SyncJobID}, {b.SyncJobID, ""}} {
			if err := q.LeaveLine(ctx, dep, "b", step.leave); err != nil {
				t.Fatal(err)
			}
			head(step.head)
		}
	}},
	{"a-cancel-request-is-seen-by-its-watcher", func(t *testing.T, q queue) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		j := job(1, "b")
		enqueue(t, q, j)
		requested, err := q.WatchCancel(ctx, dep, j.SyncJobID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.UpdateJob(ctx, dep, j.SyncJobID, func(j *dbtsync.Job) error { j.CancelRequested = true; return nil }); err != nil {
			t.Fatal(err)
		}
		select {
		case <-requested:
		case <-time.After(10 * time.Second):
			t.Fatal("the watcher did not see the cancel request")
		}
	}},
}

func TestJobQueueContract(t *testing.T) { run(t, jobCases) }

// failingReader yields some bytes, then an error.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		r.n--
		return copy(p, "{\"a\":1"), nil
	}
	return 0, errors.New("client went away")
}

var manifestCases = []testCase{
	{"an-upload-is-kept-counted-and-removed", func(t *testing.T, q queue) {
		ctx := context.Background()
		body := bytes.Repeat([]byte(`{"nodes":{}}`), 1000)
		if err := q.PutManifest(ctx, dep, "sj1", bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.HasManifest(ctx, "sj1"); err != nil || !ok {
			t.Fatalf("HasManifest %v %v", ok, err)
		}
		if n, err := q.UploadedBytes(ctx, dep); err != nil || n != int64(len(body)) {
			t.Errorf("UploadedBytes %d %v, want %d", n, err, len(body))
		}
		if n, _ := q.UploadedBytes(ctx, dep+1); n != 0 {
			t.Errorf("another deployment's uploads %d", n)
		}
		r, err := q.Manifest(ctx, "sj1")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if !bytes.Equal(got, body) {
			t.Errorf("read back %d bytes, want %d", len(got), len(body))
		}
		for range 2 { // deleting what is gone is no error
			if err := q.DeleteManifest(ctx, "sj1"); err != nil {
				t.Fatal(err)
			}
		}
		if ok, _ := q.HasManifest(ctx, "sj1"); ok {
			t.Error("the upload is still there")
		}
		if _, err := q.Manifest(ctx, "sj1"); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("Manifest after delete: %v", err)
		}
	}},
	{"an-upload-whose-reader-fails-is-not-kept", func(t *testing.T, q queue) {
		ctx := context.Background()
		if err := q.PutManifest(ctx, dep, "sj1", &failingReader{n: 3}); err == nil {
			t.Fatal("an upload whose body failed was accepted")
		}
		if ok, _ := q.HasManifest(ctx, "sj1"); ok {
			t.Error("a failed upload is stored")
		}
	}},
	{"results-read-back", func(t *testing.T, q queue) {
		ctx := context.Background()
		if _, err := q.Result(ctx, "sj1"); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("a result never written: %v", err)
		}
		want := []convert.File{{Path: "model/cubes/a.yml", Content: "cube: a\n"}}
		if err := q.PutResult(ctx, "sj1", want); err != nil {
			t.Fatal(err)
		}
		if got, err := q.Result(ctx, "sj1"); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Result %v %v", got, err)
		}
	}},
}

func TestManifestStoreContract(t *testing.T) { run(t, manifestCases) }

// consume runs q.Consume with handle until the test ends.
func consume(t *testing.T, q queue, concurrency int, ackWait time.Duration, handle func(context.Context, dbtsync.Delivery)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Consume(ctx, concurrency, ackWait, handle) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
}

var feedCases = []testCase{
	{"a-job-is-delivered-in-its-requests-trace", func(t *testing.T, q queue) {
		tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: 1}))
		j := job(1, "b")
		if err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		consume(t, q, 1, time.Minute, func(ctx context.Context, d dbtsync.Delivery) {
			d.Ack()
			got <- fmt.Sprint(d.DeploymentID(), d.SyncJobID(), trace.SpanContextFromContext(ctx).TraceID())
		})
		select {
		case g := <-got:
			if want := fmt.Sprint(dep, j.SyncJobID, tid); g != want {
				t.Errorf("delivered %s, want %s", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
		}
	}},
	{"retry-delivers-again-and-ack-settles", func(t *testing.T, q queue) {
		var n atomic.Int32
		consume(t, q, 1, time.Minute, func(_ context.Context, d dbtsync.Delivery) {
			if n.Add(1) == 1 {
				d.Retry(50 * time.Millisecond)
				return
			}
			d.Ack()
		})
		enqueue(t, q, job(1, "b"))
		eventually(t, "the retried job is delivered again", func() bool { return n.Load() >= 2 })
	}},
	{"an-unsettled-delivery-comes-back-after-ack-wait", func(t *testing.T, q queue) {
		var n atomic.Int32
		consume(t, q, 1, 300*time.Millisecond, func(_ context.Context, d dbtsync.Delivery) {
			if n.Add(1) > 1 {
				d.Ack()
			} // the first is left unanswered, as by a worker that died
		})
		enqueue(t, q, job(1, "b"))
		eventually(t, "the abandoned job is delivered again", func() bool { return n.Load() >= 2 })
	}},
	{"keep-alive-holds-a-delivery-past-ack-wait", func(t *testing.T, q queue) {
		const ackWait = 300 * time.Millisecond
		var n atomic.Int32
		finished := make(chan struct{})
		consume(t, q, 2, ackWait, func(_ context.Context, d dbtsync.Delivery) {
			if n.Add(1) > 1 {
				return
			}
			for range 6 { // twice ackWait, kept alive
				time.Sleep(ackWait / 3)
				d.KeepAlive()
			}
			d.Ack()
			close(finished)
		})
		enqueue(t, q, job(1, "b"))
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatal("the job was not finished")
		}
		if got := n.Load(); got != 1 {
			t.Errorf("%d deliveries of a job kept alive, want 1", got)
		}
	}},
	{"at-most-concurrency-handlers-run", func(t *testing.T, q queue) {
		var running, most atomic.Int32
		release := make(chan struct{})
		var handled atomic.Int32
		consume(t, q, 2, time.Minute, func(_ context.Context, d dbtsync.Delivery) {
			r := running.Add(1)
			for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
			}
			<-release
			running.Add(-1)
			d.Ack()
			handled.Add(1)
		})
		enqueue(t, q, job(1, "a"), job(2, "b"), job(3, "c"), job(4, "d"))
		eventually(t, "two handlers run", func() bool { return running.Load() == 2 })
		close(release)
		eventually(t, "all four are handled", func() bool { return handled.Load() == 4 })
		if most.Load() != 2 {
			t.Errorf("%d handlers ran at once, want at most 2", most.Load())
		}
	}},
}

func TestJobFeedContract(t *testing.T) { run(t, feedCases) }
