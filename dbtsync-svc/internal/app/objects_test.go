package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/app"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
)

// removals is how many of the worker's object removals the API answered ok.
func (h *harness) removals() float64 {
	h.t.Helper()
	mfs, err := h.deps.Registry.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nats_replies_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["subject"] == dbtsync.RemoveObjectSubject && labels["outcome"] == "ok" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// awaitRemovals waits until the API has answered want object removals: the worker
// asks for them after it records the job's end, so a finished job comes first.
func (h *harness) awaitRemovals(want float64) float64 {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := h.removals()
		if got >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// objectChunks are the chunk subjects the object store holds, with their messages.
func (h *harness) objectChunks(ctx context.Context) map[string]uint64 {
	h.t.Helper()
	js, _ := natsjs.New(h.deps.NATS)
	st, err := js.Stream(ctx, "OBJ_"+jetstream.ManifestStore)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := st.Info(ctx, natsjs.WithSubjectFilter("$O."+jetstream.ManifestStore+".C.>"))
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Subjects
}

// A succeeded job's upload is removed by the API, which the worker asks, and its charge
// is freed: an upload the quota refused while it was stored is accepted afterwards.
func TestSucceededJobsUploadIsRemovedByTheAPIAndFreed(t *testing.T) {
	small, _ := json.Marshal(smallManifest("v12", "a"))
	h := newHarnessWith(t, func(d *app.Deps) { d.Quotas.Deployment = int64(len(small)) + 50 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "r1"})
	if code != 202 {
		t.Fatalf("upload: %d %v", code, acc)
	}
	if code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "r2"}); code != 413 {
		t.Fatalf("an upload past the quota while the first is stored: %d %v, want 413", code, body)
	}
	if n := len(h.objectChunks(ctx)); n != 1 {
		t.Fatalf("the store holds %d objects' chunks before the sync, want the upload's", n)
	}
	h.worker(worker.Options{})
	if job := h.waitJob(acc["syncJobId"].(string)); job["status"] != "succeeded" {
		t.Fatalf("job: %v", job)
	}
	if got := h.awaitRemovals(1); got != 1 {
		t.Fatalf("object removals the API answered: %v, want the upload's", got)
	}
	if chunks := h.objectChunks(ctx); len(chunks) != 0 {
		t.Fatalf("chunks left after the sync: %v, want none", chunks)
	}
	if code, body := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "branchName": "r2"}); code != 202 {
		t.Fatalf("an upload once the first was removed: %d %v", code, body)
	}
}

// A files job run again (its worker stopped after writing the result) has the API
// remove the earlier run's result, then writes its own: the job serves one result, and
// the store holds that result's chunks only.
func TestRetriedFilesJobReplacesItsResultThroughTheAPI(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reached := make(chan struct{})
	var once sync.Once
	stop := h.worker(worker.Options{Phase: func(ctx context.Context, id, phase string) {
		if phase == "committed" {
			once.Do(func() { close(reached) })
			<-ctx.Done() // stopped right after writing the result, before recording success
		}
	}})
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a", "b"), "output": "files"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("the worker never wrote the result")
	}
	stop()
	if n := len(h.objectChunks(ctx)); n != 2 {
		t.Fatalf("the store holds %d objects' chunks after the first run, want the upload's and the result's", n)
	}
	h.worker(worker.Options{})
	job := h.waitJob(acc["syncJobId"].(string))
	files, _ := job["files"].([]any)
	if job["status"] != "succeeded" || len(files) != 2 {
		t.Fatalf("files job after its second run: %v", job)
	}
	if got := h.awaitRemovals(2); got != 2 { // the earlier result, then the upload
		t.Fatalf("object removals the API answered: %v, want 2", got)
	}
	if chunks := h.objectChunks(ctx); len(chunks) != 1 {
		t.Fatalf("chunks after the second run: %v, want the one result's", chunks)
	}
}

// The API removes only what a job's state lets go, whatever the request says: no
// upload of a job that has not succeeded, no result of a job that is over, and nothing
// of a job that does not exist.
func TestObjectRemovalRefusesWhatTheJobDoesNotLetGo(t *testing.T) {
	h := newHarness(t)
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a"), "output": "files"})
	if code != 202 {
		t.Fatal(code, acc)
	}
	id := acc["syncJobId"].(string)
	ask := func(req any) string {
		b, _ := json.Marshal(req)
		m, err := h.deps.NATS.Request(dbtsync.RemoveObjectSubject, b, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%v %s", m.Header, m.Data)
	}
	for _, tc := range []struct {
		name   string
		req    any
		status int
		want   string
	}{
		{"manifest-of-a-queued-job-409", dbtsync.RemoveObjectRequest{DeploymentID: h.dep, JobID: id, Kind: dbtsync.ObjectManifest}, 409, "stays until it succeeds"},
		{"unknown-job-404", dbtsync.RemoveObjectRequest{DeploymentID: h.dep, JobID: "nope", Kind: dbtsync.ObjectManifest}, 404, "not found"},
		{"unknown-kind-400", dbtsync.RemoveObjectRequest{DeploymentID: h.dep, JobID: id, Kind: "ledger"}, 400, "request must be"},
		{"not-json-400", "x", 400, "not a JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ask(tc.req); !strings.Contains(got, tc.want) || !strings.Contains(got, fmt.Sprintf(`"status":%d`, tc.status)) {
				t.Fatalf("answer %q, want %d saying %q", got, tc.status, tc.want)
			}
		})
	}
	h.worker(worker.Options{})
	if job := h.waitJob(id); job["status"] != "succeeded" {
		t.Fatalf("job: %v", job)
	}
	if got := ask(dbtsync.RemoveObjectRequest{DeploymentID: h.dep, JobID: id, Kind: dbtsync.ObjectResult}); !strings.Contains(got, "is not a files job that runs") || !strings.Contains(got, `"status":409`) {
		t.Fatalf("removing a succeeded job's result: %q, want refused", got)
	}
	code, job := h.do("GET", h.syncPath()+"/"+id, h.dev, nil)
	if files, _ := job["files"].([]any); code != 200 || len(files) != 1 {
		t.Fatalf("the result after the refused removal: %d %v", code, job)
	}
}
