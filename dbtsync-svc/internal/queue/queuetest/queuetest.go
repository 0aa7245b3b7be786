// Package queuetest is the contract of dbtsync's queue ports (dbtsync.JobQueue,
// dbtsync.ManifestStore, dbtsync.LedgerStore and dbtsync.JobFeed): one suite that every
// adapter runs (jetstream on an in-process nats-server, memqueue in memory), so the unit
// tests on the fake test what production does. Every case runs in parallel with a queue
// of its own.
package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Queue is what every adapter implements.
type Queue interface {
	dbtsync.JobQueue
	dbtsync.JobFeed
	dbtsync.ManifestStore
	dbtsync.LedgerStore
}

// The queue limits every case expects: a deployment holds at most MaxQueued jobs and has
// at most MaxRunning out at once. An adapter under the suite is opened with them.
const MaxQueued, MaxRunning = 5, 2

type testCase struct {
	name string
	test func(t *testing.T, q Queue)
}

// Run runs every case of the contract against a queue newQueue returns (one per case,
// opened with MaxQueued and MaxRunning). Trace context travels in W3C headers, as the
// processes configure it: Run sets the propagator.
func Run(t *testing.T, newQueue func(t *testing.T) Queue) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	for _, port := range []struct {
		name  string
		cases []testCase
	}{
		{"job-queue", jobCases},
		{"manifest-store", manifestCases},
		{"ledger-store", ledgerCases},
		{"job-feed", append(slices.Clone(feedCases), fairCases...)},
	} {
		t.Run(port.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range port.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.test(t, newQueue(t))
				})
			}
		})
	}
}

// Dep is the deployment of every case's jobs (Job's).
const Dep = 7

// Job is a queued job of the branch, with an id of its time order n.
func Job(n int, branch string) dbtsync.Job {
	id := fmt.Sprintf("sj%016x%012x", 1_800_000_000_000_000_000+int64(n), n)
	return dbtsync.Job{SyncJobID: id, DeploymentID: Dep, Status: dbtsync.StatusQueued, Source: dbtsync.SourceManifest,
		Output: dbtsync.OutputBranch, BranchName: branch, WorkflowID: "dbt-sync-" + id, Progress: dbtsync.Progress{Phase: "queued"},
		CreatedAt: time.Unix(1_800_000_000, 0).UTC(), HasManifest: true, StartedBy: 3, RequestID: "req-1"}
}

// Enqueue enqueues js on q, failing the test on an error.
func Enqueue(t *testing.T, q Queue, js ...dbtsync.Job) {
	t.Helper()
	for _, j := range js {
		if err := q.Enqueue(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t *testing.T, what string, cond func() bool) {
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
	{"a-queued-job-reads-back", func(t *testing.T, q Queue) {
		j := Job(1, "b")
		ref := "main"
		j.Ref, j.ManifestCharge, j.Alone, j.ErrorCode = &ref, dbtsync.Charge{Stored: 1234, StoredHour: 490_000}, true, dbtsync.CodeInternal
		j.ResultCharge, j.FinishedByWorker = dbtsync.Charge{Stored: 99, StoredHour: 490_001}, true
		Enqueue(t, q, j)
		got, err := q.Job(context.Background(), Dep, j.SyncJobID)
		if err != nil || got.SyncJobID != j.SyncJobID || got.Status != dbtsync.StatusQueued || got.BranchName != "b" || got.Ref == nil ||
			*got.Ref != "main" || !got.CreatedAt.Equal(j.CreatedAt) || !got.HasManifest || got.StartedBy != 3 || got.RequestID != "req-1" ||
			got.ManifestCharge != j.ManifestCharge || !got.Alone || got.ErrorCode != dbtsync.CodeInternal ||
			got.ResultCharge != j.ResultCharge || !got.FinishedByWorker {
			t.Errorf("read back %+v %v", got, err)
		}
	}},
	{"a-jobs-model-selector-and-selection-read-back", func(t *testing.T, q Queue) {
		ctx := context.Background()
		j := Job(1, "b")
		sel := "+customers tag:daily"
		j.Select = &sel
		Enqueue(t, q, j)
		report := &convert.Selection{ModelsTotal: 3, ModelsKept: 2, ModelsDropped: 1, Kept: []string{"model.p.a", "model.p.b"}, Dropped: []string{"model.p.c"}}
		if _, err := q.UpdateJob(ctx, Dep, j.SyncJobID, func(j *dbtsync.Job) error { j.Selection = report; return nil }); err != nil {
			t.Fatal(err)
		}
		got, err := q.Job(ctx, Dep, j.SyncJobID)
		if err != nil || got.Select == nil || *got.Select != sel || got.Exclude != nil || got.Selection == nil || !reflect.DeepEqual(*got.Selection, *report) {
			t.Errorf("read back select %v exclude %v selection %+v (%v)", got.Select, got.Exclude, got.Selection, err)
		}
	}},
	{"unknown-jobs-are-not-found", func(t *testing.T, q Queue) {
		ctx := context.Background()
		if _, err := q.Job(ctx, Dep, Job(1, "b").SyncJobID); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("Job: %v", err)
		}
		if _, err := q.UpdateJob(ctx, Dep, Job(1, "b").SyncJobID, func(*dbtsync.Job) error { return nil }); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("UpdateJob: %v", err)
		}
		if ids, _, more, err := q.JobPage(ctx, Dep, "", 10); err != nil || len(ids) != 0 || more {
			t.Errorf("JobPage: %v %v %v", ids, more, err)
		}
		if head, err := q.LineHead(ctx, Dep, "b"); err != nil || head != "" {
			t.Errorf("LineHead: %q %v", head, err)
		}
		if err := q.LeaveLine(ctx, Dep, "b", "sj-none"); err != nil {
			t.Errorf("LeaveLine: %v", err)
		}
	}},
	{"job-pages-are-the-deployments-newest-first", func(t *testing.T, q Queue) {
		ctx := context.Background()
		other := Job(6, "b")
		other.DeploymentID = Dep + 1
		Enqueue(t, q, Job(2, "b"), Job(1, "c"), other, Job(3, "b"), Job(4, "d"), Job(5, "e"))
		var got []string
		after := ""
		for page := 0; ; page++ {
			ids, end, more, err := q.JobPage(ctx, Dep, after, 2)
			if err != nil || len(ids) > 2 || page > 3 {
				t.Fatalf("page %d: %v %v", page, ids, err)
			}
			got = append(got, ids...)
			if !more {
				break
			}
			after = end
		}
		want := []string{Job(5, "").SyncJobID, Job(4, "").SyncJobID, Job(3, "").SyncJobID, Job(2, "").SyncJobID, Job(1, "").SyncJobID}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pages %v, want %v", got, want)
		}
		for _, bad := range []string{"no-such-cursor", "0:" + Job(9, "").SyncJobID} {
			if _, _, _, err := q.JobPage(ctx, Dep, bad, 2); !errors.Is(err, dbtsync.ErrBadCursor) {
				t.Errorf("cursor %q: %v", bad, err)
			}
		}
	}},
	{"a-deployment-holds-at-most-its-limit-of-jobs", func(t *testing.T, q Queue) {
		ctx := context.Background()
		for i := range MaxQueued {
			Enqueue(t, q, Job(i+1, "b"))
		}
		over := Job(MaxQueued+1, "b")
		if err := q.Enqueue(ctx, over); !errors.Is(err, dbtsync.ErrJobLimit) {
			t.Fatalf("job %d: %v, want ErrJobLimit", MaxQueued+1, err)
		}
		if _, err := q.Job(ctx, Dep, over.SyncJobID); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("the refused job was recorded: %v", err)
		}
		if ids, _, _, err := q.JobPage(ctx, Dep, "", 100); err != nil || len(ids) != MaxQueued || slices.Contains(ids, over.SyncJobID) {
			t.Errorf("listed %v %v: the refused job must not be", ids, err)
		}
		if n, err := q.QueuedJobs(ctx, dbtsync.QueueKey{Deployment: Dep}); err != nil || n != MaxQueued {
			t.Errorf("QueuedJobs %d %v", n, err)
		}
		other := Job(MaxQueued+2, "b")
		other.DeploymentID = Dep + 1
		Enqueue(t, q, other)
		// A settled job makes room.
		acked := make(chan struct{})
		var once sync.Once
		Consume(t, q, 1, time.Minute, func(_ context.Context, d dbtsync.Delivery) {
			if d.DeploymentID() == Dep {
				d.Ack()
				once.Do(func() { close(acked) })
			}
		})
		<-acked
		Eventually(t, "the settled job makes room", func() bool { return q.Enqueue(ctx, over) == nil })
	}},
	{"update-applies-fn-and-an-error-aborts-it", func(t *testing.T, q Queue) {
		ctx := context.Background()
		j := Job(1, "b")
		Enqueue(t, q, j)
		got, err := q.UpdateJob(ctx, Dep, j.SyncJobID, func(j *dbtsync.Job) error {
			j.Status, j.Attempts = dbtsync.StatusRunning, 1
			return nil
		})
		if err != nil || got.Status != dbtsync.StatusRunning {
			t.Fatalf("UpdateJob = %+v %v", got, err)
		}
		refused := errors.New("refused")
		if _, err := q.UpdateJob(ctx, Dep, j.SyncJobID, func(j *dbtsync.Job) error { j.Status = "x"; return refused }); err != refused {
			t.Fatalf("an aborted update: %v", err)
		}
		if got, _ := q.Job(ctx, Dep, j.SyncJobID); got.Status != dbtsync.StatusRunning || got.Attempts != 1 {
			t.Errorf("after the aborted update %+v", got)
		}
	}},
	{"concurrent-updates-all-apply", func(t *testing.T, q Queue) {
		j := Job(1, "b")
		Enqueue(t, q, j)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, err := q.UpdateJob(context.Background(), Dep, j.SyncJobID, func(j *dbtsync.Job) error {
					j.Attempts++
					time.Sleep(time.Millisecond) // widens the window between read and write where an update could be lost
					return nil
				}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got, _ := q.Job(context.Background(), Dep, j.SyncJobID); got.Attempts != 8 {
			t.Errorf("attempts %d after 8 concurrent increments", got.Attempts)
		}
	}},
	{"a-branchs-line-is-in-queue-order", func(t *testing.T, q Queue) {
		ctx := context.Background()
		a, b, c, other := Job(1, "b"), Job(2, "b"), Job(3, "b"), Job(4, "other")
		Enqueue(t, q, a, b, other, c)
		head := func(want string) {
			t.Helper()
			if got, err := q.LineHead(ctx, Dep, "b"); err != nil || got != want {
				t.Fatalf("head %q %v, want %q", got, err, want)
			}
		}
		head(a.SyncJobID)
		if got, _ := q.LineHead(ctx, Dep, "other"); got != other.SyncJobID {
			t.Errorf("another branch's head %q", got)
		}
		for _, step := range []struct{ leave, head string }{{a.SyncJobID, b.SyncJobID}, {c.SyncJobID, b.SyncJobID}, {b.SyncJobID, ""}} {
			if err := q.LeaveLine(ctx, Dep, "b", step.leave); err != nil {
				t.Fatal(err)
			}
			head(step.head)
		}
	}},
	{"a-cancel-request-is-seen-by-its-watcher", func(t *testing.T, q Queue) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		j := Job(1, "b")
		Enqueue(t, q, j)
		CancelIsSeen(ctx, t, q, j)
	}},
}

// CancelIsSeen checks that a watch of j made now sees the cancel requested next.
func CancelIsSeen(ctx context.Context, t *testing.T, q Queue, j dbtsync.Job) {
	t.Helper()
	requested, err := q.WatchCancel(ctx, Dep, j.SyncJobID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.UpdateJob(ctx, Dep, j.SyncJobID, func(j *dbtsync.Job) error { j.CancelRequested = true; return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-requested:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not see the cancel request")
	}
}

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
	{"an-upload-is-kept-counted-and-removed", func(t *testing.T, q Queue) {
		ctx := context.Background()
		body := bytes.Repeat([]byte(`{"nodes":{}}`), 1000)
		if err := q.PutManifest(ctx, Dep, "sj1", bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.HasManifest(ctx, "sj1"); err != nil || !ok {
			t.Fatalf("HasManifest %v %v", ok, err)
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
		for i, want := range []bool{true, false} { // deleting what is gone is no error, and says so
			if deleted, err := q.DeleteManifest(ctx, "sj1"); err != nil || deleted != want {
				t.Fatalf("delete %d: %v %v, want %v", i+1, deleted, err, want)
			}
		}
		if ok, _ := q.HasManifest(ctx, "sj1"); ok {
			t.Error("the upload is still there")
		}
		if _, err := q.Manifest(ctx, "sj1"); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("Manifest after delete: %v", err)
		}
	}},
	{"an-upload-whose-reader-fails-is-not-kept", func(t *testing.T, q Queue) {
		ctx := context.Background()
		if err := q.PutManifest(ctx, Dep, "sj1", &failingReader{n: 3}); err == nil {
			t.Fatal("an upload whose body failed was accepted")
		}
		if ok, _ := q.HasManifest(ctx, "sj1"); ok {
			t.Error("a failed upload is stored")
		}
	}},
	{"results-read-back", func(t *testing.T, q Queue) {
		ctx := context.Background()
		if _, err := q.Result(ctx, "sj1"); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("a result never written: %v", err)
		}
		files := []convert.File{{Path: "model/cubes/a.yml", Content: "sql: <b> & c\n"}}
		if err := q.PutResult(ctx, "sj1", files); err != nil {
			t.Fatal(err)
		}
		r, err := q.Result(ctx, "sj1")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		// As the API answers it, streamed as stored.
		if got, _ := io.ReadAll(r); string(got) != `[{"path":"model/cubes/a.yml","content":"sql: <b> & c\n"}]` {
			t.Errorf("Result streams %s", got)
		}
	}},
}

var ledgerCases = []testCase{
	{"a-ledger-never-written-is-empty-and-an-error-aborts-an-update", func(t *testing.T, q Queue) {
		ctx := context.Background()
		refused := errors.New("refused")
		if err := q.UpdateLedger(ctx, "deployment.1", func(l *dbtsync.Ledger) error {
			if l.Stored != nil || l.Holds != nil || l.Ops != nil {
				t.Errorf("a new ledger %+v", l)
			}
			l.Stored = map[int64]int64{1: 5}
			return refused
		}); err != refused {
			t.Fatalf("an aborted update: %v", err)
		}
		if err := q.UpdateLedger(ctx, "deployment.1", func(l *dbtsync.Ledger) error {
			if l.Stored != nil {
				t.Errorf("the aborted update was stored: %+v", l)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}},
	{"concurrent-ledger-updates-all-apply", func(t *testing.T, q Queue) {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				if err := q.UpdateLedger(context.Background(), "account.7", func(l *dbtsync.Ledger) error {
					if l.Stored == nil {
						l.Stored = map[int64]int64{}
					}
					l.Stored[9_999_999] += 10
					l.Ops = append(l.Ops, fmt.Sprint(i))
					time.Sleep(time.Millisecond) // widens the window between read and write where an update could be lost
					return nil
				}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		_ = q.UpdateLedger(context.Background(), "account.7", func(l *dbtsync.Ledger) error {
			if l.Stored[9_999_999] != 160 || len(l.Ops) != 16 {
				t.Errorf("after 16 concurrent updates: %+v", l)
			}
			return nil
		})
	}},
}

// Consume runs q.Consume with handle until the test ends.
func Consume(t *testing.T, q Queue, concurrency int, ackWait time.Duration, handle func(context.Context, dbtsync.Delivery)) {
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
	{"a-job-is-delivered-in-its-requests-trace", func(t *testing.T, q Queue) {
		tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: 1}))
		j := Job(1, "b")
		if err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		Consume(t, q, 1, time.Minute, func(ctx context.Context, d dbtsync.Delivery) {
			d.Ack()
			got <- fmt.Sprint(d.DeploymentID(), d.SyncJobID(), trace.SpanContextFromContext(ctx).TraceID())
		})
		select {
		case g := <-got:
			if want := fmt.Sprint(Dep, j.SyncJobID, tid); g != want {
				t.Errorf("delivered %s, want %s", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
		}
	}},
	{"retry-delivers-again-and-ack-settles", func(t *testing.T, q Queue) {
		var n atomic.Int32
		Consume(t, q, 1, time.Minute, func(_ context.Context, d dbtsync.Delivery) {
			if n.Add(1) == 1 {
				d.Retry(50 * time.Millisecond)
				return
			}
			d.Ack()
		})
		Enqueue(t, q, Job(1, "b"))
		Eventually(t, "the retried job is delivered again", func() bool { return n.Load() >= 2 })
	}},
	{"an-unsettled-delivery-comes-back-after-ack-wait", func(t *testing.T, q Queue) {
		var n atomic.Int32
		Consume(t, q, 1, 300*time.Millisecond, func(_ context.Context, d dbtsync.Delivery) {
			if n.Add(1) > 1 {
				d.Ack()
			} // the first is left unanswered, as by a worker that died
		})
		Enqueue(t, q, Job(1, "b"))
		Eventually(t, "the abandoned job is delivered again", func() bool { return n.Load() >= 2 })
	}},
	{"keep-alive-holds-a-delivery-past-ack-wait", func(t *testing.T, q Queue) {
		const ackWait = 300 * time.Millisecond
		var n atomic.Int32
		finished := make(chan struct{})
		Consume(t, q, 2, ackWait, func(_ context.Context, d dbtsync.Delivery) {
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
		Enqueue(t, q, Job(1, "b"))
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatal("the job was not finished")
		}
		if got := n.Load(); got != 1 {
			t.Errorf("%d deliveries of a job kept alive, want 1", got)
		}
	}},
	{"at-most-concurrency-handlers-run", func(t *testing.T, q Queue) {
		var running, most atomic.Int32
		release := make(chan struct{})
		var handled atomic.Int32
		Consume(t, q, 2, time.Minute, func(_ context.Context, d dbtsync.Delivery) {
			r := running.Add(1)
			for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
			}
			<-release
			running.Add(-1)
			d.Ack()
			handled.Add(1)
		})
		Enqueue(t, q, Job(1, "a"), Job(2, "b"), Job(3, "c"), Job(4, "d"))
		Eventually(t, "two handlers run", func() bool { return running.Load() == 2 })
		close(release)
		Eventually(t, "all four are handled", func() bool { return handled.Load() == 4 })
		if most.Load() != 2 {
			t.Errorf("%d handlers ran at once, want at most 2", most.Load())
		}
	}},
}

// Queued is job n of the queue of account acc and deployment d.
func Queued(n int, acc, d int64) dbtsync.Job {
	j := Job(n, fmt.Sprintf("b%d", n))
	j.AccountID, j.DeploymentID = acc, d
	return j
}

var fairCases = []testCase{
	{"an-account-with-full-queues-waits-its-turn", func(t *testing.T, q Queue) {
		// Account 1 fills two deployments' queues before account 2 queues one job: that
		// job is the second handed out, not the ninth (a FIFO's place).
		for i := range 4 {
			Enqueue(t, q, Queued(i+1, 1, Dep), Queued(i+11, 1, Dep+1))
		}
		Enqueue(t, q, Queued(21, 2, Dep+2))
		order := make(chan int64, 16)
		Consume(t, q, 1, time.Minute, func(_ context.Context, d dbtsync.Delivery) {
			order <- d.DeploymentID()
			d.Ack()
		})
		var got []int64
		for len(got) < 9 {
			select {
			case d := <-order:
				got = append(got, d)
			case <-time.After(10 * time.Second):
				t.Fatalf("handed out %v", got)
			}
		}
		if pos := slices.Index(got, Dep+2); pos < 0 || pos > 1 {
			t.Errorf("handed out %v: the other account's job came %d-th", got, pos+1)
		}
	}},
	{"a-deployment-has-at-most-its-running-limit-out", func(t *testing.T, q Queue) {
		for i := range 4 {
			Enqueue(t, q, Queued(i+1, 1, Dep))
		}
		Enqueue(t, q, Queued(9, 2, Dep+1))
		release := make(chan struct{})
		var running, most atomic.Int32
		other := make(chan struct{})
		// Slots for all five: only the running limit holds the deployment's jobs back, and
		// the other deployment's job runs beside them.
		Consume(t, q, 5, time.Minute, func(_ context.Context, d dbtsync.Delivery) {
			if d.DeploymentID() != Dep {
				close(other)
				d.Ack()
				return
			}
			r := running.Add(1)
			for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
			}
			<-release
			running.Add(-1)
			d.Ack()
		})
		select {
		case <-other:
		case <-time.After(10 * time.Second):
			t.Fatal("the other deployment's job waited behind the full one")
		}
		Eventually(t, "the deployment runs its limit", func() bool { return running.Load() == MaxRunning })
		close(release)
		Eventually(t, "all its jobs ran", func() bool {
			n, _ := q.QueuedJobs(context.Background(), dbtsync.QueueKey{Account: 1, Deployment: Dep})
			return n == 0
		})
		if most.Load() != MaxRunning {
			t.Errorf("%d of the deployment's jobs ran at once, want %d", most.Load(), MaxRunning)
		}
	}},
}
