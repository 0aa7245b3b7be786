package app_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/devstack/apitest"
)

func manyModels(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m%04d", i)
	}
	return names
}

// TestProgressAdvancesModelByModel: while a job converts, progress.modelsDone moves in
// steps of ProgressEvery models, each step stored in the job state and visible to the API.
func TestProgressAdvancesModelByModel(t *testing.T) {
	h := newHarness(t)
	type step struct{ done, total int }
	var (
		mu       sync.Mutex
		steps    []step
		atFirst  = make(chan struct{})
		resume   = make(chan struct{})
		firstHit sync.Once
	)
	h.worker(worker.Options{Progressed: func(ctx context.Context, id string, done, total int) {
		mu.Lock()
		steps = append(steps, step{done, total})
		mu.Unlock()
		firstHit.Do(func() {
			close(atFirst)
			<-resume
		})
	}})
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", manyModels(250)...), "output": "files"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	id := acc["syncJobId"].(string)
	select {
	case <-atFirst:
	case <-time.After(60 * time.Second):
		t.Fatal("no progress was recorded")
	}
	_, mid := h.do("GET", h.syncPath()+"/"+id, h.dev, nil)
	close(resume)
	if p := mid["progress"].(map[string]any); mid["status"] != "running" || p["phase"] != "converting" || p["modelsDone"] != 100.0 || p["modelsTotal"] != 250.0 {
		t.Errorf("mid-run job = status %v progress %v, want running, converting, 100 of 250", mid["status"], p)
	}
	job := h.waitJob(id)
	if p := job["progress"].(map[string]any); job["status"] != "succeeded" || p["modelsDone"] != 250.0 {
		t.Errorf("finished job = status %v progress %v", job["status"], p)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []step{{100, 250}, {200, 250}}; fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("progress steps = %v, want %v", steps, want)
	}
}

// TestTransientFailureIsRetriedWithBackoffThenFails: a git source that cannot be reached
// is retried with growing attempts up to MaxAttempts, then the job ends failed with the error.
func TestTransientFailureIsRetriedWithBackoffThenFails(t *testing.T) {
	h := newHarness(t)
	// A port that was just free: connecting is refused, a transient failure.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "https://" + ln.Addr().String() + "/shop.git"
	_ = ln.Close()
	var (
		mu      sync.Mutex
		backoff []int
	)
	h.worker(worker.Options{MaxAttempts: 3, Backoff: func(attempt int) time.Duration {
		mu.Lock()
		backoff = append(backoff, attempt)
		mu.Unlock()
		return 50 * time.Millisecond
	}})
	p := fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", h.dep)
	if code, body := h.do("PUT", p, h.admin, map[string]any{"repoUrl": unreachable, "branch": "main", "projectPath": "."}); code != 200 {
		t.Fatal(code, body)
	}
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"output": "files"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	job := h.waitJob(acc["syncJobId"].(string))
	if job["status"] != "failed" || job["attempts"] != 3.0 || !strings.Contains(fmt.Sprint(job["error"]), "cannot be reached (network error)") {
		t.Errorf("job = status %v attempts %v error %v, want failed after 3 attempts with the connection error", job["status"], job["attempts"], job["error"])
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(backoff) != "[1 2]" {
		t.Errorf("backoff asked for attempts %v, want [1 2] (none after the last)", backoff)
	}
}

// TestNATSDownStartSyncIs503UntilItReturns: with NATS stopped, starting a sync is a 503
// naming the job queue; once NATS is back the same service accepts syncs again.
func TestNATSDownStartSyncIs503UntilItReturns(t *testing.T) {
	h := newHarness(t)
	body := map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "outage"}
	h.nats.Stop()
	r := h.api.Call(t, "POST", h.syncPath(), apitest.Bearer(h.dev), body)
	if e := r.Error(t); r.Status != 503 || !strings.Contains(e.Message, "NATS") || r.Header.Get("Retry-After") == "" {
		t.Errorf("with NATS down: %d %+v Retry-After %q, want 503 naming NATS, with Retry-After", r.Status, e, r.Header.Get("Retry-After"))
	}
	if err := h.nats.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.worker(worker.Options{})
	deadline := time.Now().Add(30 * time.Second)
	var code int
	var got map[string]any
	for {
		code, got = h.do("POST", h.syncPath(), h.dev, body)
		if code == 202 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != 202 {
		t.Fatalf("after NATS returned: %d %v", code, got)
	}
	if job := h.waitJob(got["syncJobId"].(string)); job["status"] != "succeeded" {
		t.Errorf("job after the outage: %v", job)
	}
}

// TestRequestSpanIsParentOfWorkerSpan: the trace context travels in the job message, so
// the worker's span is a child of the span of the request that queued the job.
func TestRequestSpanIsParentOfWorkerSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	h := newHarness(t)
	h.worker(worker.Options{})
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "output": "files"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	id := acc["syncJobId"].(string)
	h.waitJob(id)
	var request, worker sdktrace.ReadOnlySpan
	deadline := time.Now().Add(30 * time.Second)
	for worker == nil || request == nil {
		if time.Now().After(deadline) {
			var names []string
			for _, s := range rec.Ended() {
				names = append(names, s.Name())
			}
			t.Fatalf("spans recorded: %v", names)
		}
		time.Sleep(20 * time.Millisecond) // the worker ends its span just after recording the outcome
		for _, s := range rec.Ended() {
			switch s.Name() {
			case "POST /api/v1/deployments/{deploymentId}/dbt-sync":
				request = s
			case "dbtsync.SyncJob":
				for _, a := range s.Attributes() {
					if a.Key == "sync_job.id" && a.Value.AsString() == id {
						worker = s
					}
				}
			}
		}
	}
	if worker.Parent().SpanID() != request.SpanContext().SpanID() || worker.SpanContext().TraceID() != request.SpanContext().TraceID() {
		t.Errorf("worker span parent %s (trace %s), request span %s (trace %s)", worker.Parent().SpanID(), worker.SpanContext().TraceID(),
			request.SpanContext().SpanID(), request.SpanContext().TraceID())
	}
}
