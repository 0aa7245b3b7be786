package worker_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/isolate"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
)

// A job's input is read and converted in a child process the worker kills: whatever the
// child does (loops, allocates, panics), a cancel ends the job within seconds, the job's
// deadline holds, a child over its CPU or memory limit fails that job with work_limit,
// and a crash fails that job only while the worker keeps serving. The child is this test
// binary, re-executed: misbehave makes it do what its manifest's first model is named.

const childEnv = "DBTSYNC_WORKER_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		isolate.Main(isolate.ChildOptions{Inspect: misbehave})
	}
	os.Exit(m.Run())
}

var sink [][]byte

// misbehave is the child's test hook: "spin" loops on the CPU for good, "hog" reserves
// ever more memory and "fill" writes ever more, "crash" panics; any other model converts.
func misbehave(p *convert.Project) {
	if len(p.Models) == 0 {
		return
	}
	switch p.Models[0].Name {
	case "spin":
		for i := 0; ; i++ {
			if i == -1 {
				runtime.Gosched()
			}
		}
	case "hog": // address space: chunks never touched, so never resident
		for {
			sink = append(sink, make([]byte, 64<<20))
		}
	case "fill": // resident memory: every page written
		for {
			b := make([]byte, 16<<20)
			for i := range b {
				b[i] = 1
			}
			sink = append(sink, b)
		}
	case "crash":
		panic("the conversion's input broke it")
	}
}

// isolated is a runner of children of this test binary.
func isolated(cpu time.Duration, memory int64) *isolate.Runner {
	return &isolate.Runner{Command: []string{os.Args[0]}, Env: []string{childEnv + "=1"}, Limits: isolate.Limits{CPU: cpu, Memory: memory}, Logger: slogDiscard}
}

// waitPhase waits until the job is running in phase.
func (f *fixture) waitPhase(t *testing.T, id, phase string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := f.svc.GetJob(context.Background(), developer, dep, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == dbtsync.StatusRunning && j.Progress.Phase == phase {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never reached %s: %+v", id, phase, j)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLong is wait with room for a loaded machine, where a second of a child's CPU time
// can take many seconds of wall time.
func (f *fixture) waitLong(t *testing.T, id string) dbtsync.SyncJob {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := f.svc.GetJob(context.Background(), developer, dep, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == dbtsync.StatusSucceeded || j.Status == dbtsync.StatusFailed || j.Status == dbtsync.StatusCanceled {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not finish: %+v", id, j)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func failedWith(t *testing.T, j dbtsync.SyncJob, code, message string) {
	t.Helper()
	if j.Status != dbtsync.StatusFailed || j.ErrorCode == nil || *j.ErrorCode != code || j.Error == nil || !strings.Contains(*j.Error, message) {
		t.Errorf("job %+v (error %v), want failed %s saying %q", j, ptr(j.Error), code, message)
	}
}

func ptr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestAnIsolatedJobConvertsAsInProcess(t *testing.T) {
	t.Parallel()
	in, out := newFixture(t, git{}), newFixture(t, git{})
	in.start(t, worker.Options{})
	out.start(t, worker.Options{Isolate: isolated(0, 0), ProgressEvery: 1})
	m := manifest("orders", "customers", "payments")
	a, b := in.wait(t, in.sync(t, "x", m)), out.wait(t, out.sync(t, "x", m))
	if a.Status != dbtsync.StatusSucceeded || b.Status != dbtsync.StatusSucceeded || b.Progress.ModelsDone != 3 || *b.Progress.ModelsTotal != 3 {
		t.Fatalf("jobs %+v %+v", a, b)
	}
	_, fa, _ := in.store.Files(context.Background(), dep, "x", 1, "", true)
	_, fb, _ := out.store.Files(context.Background(), dep, "x", 1, "", true)
	if len(fa) != 3 || len(fa) != len(fb) {
		t.Fatalf("files %d in process, %d isolated", len(fa), len(fb))
	}
	for i := range fa {
		if fa[i] != fb[i] {
			t.Errorf("file %d: %+v in process, %+v isolated", i, fa[i], fb[i])
		}
	}
}

func TestACancelKillsAChildStuckInALoopWithinSeconds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	f.start(t, worker.Options{Isolate: isolated(0, 0)})
	id := f.sync(t, "spin", manifest("spin"))
	f.waitPhase(t, id, "converting")
	time.Sleep(200 * time.Millisecond) // the child is in its loop
	asked := time.Now()
	if _, err := f.svc.CancelJob(context.Background(), developer, dep, id); err != nil {
		t.Fatal(err)
	}
	j := f.wait(t, id)
	if took := time.Since(asked); j.Status != dbtsync.StatusCanceled || took > 5*time.Second {
		t.Errorf("job %+v after %s, want canceled within 5s", j, took)
	}
	if _, err := f.store.Branch(context.Background(), dep, "spin"); err == nil {
		t.Error("a canceled job wrote its branch")
	}
}

func TestAChildOverItsCPULimitFailsWorkLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	f.start(t, worker.Options{Isolate: isolated(time.Second, 0), MaxAttempts: 3})
	j := f.waitLong(t, f.sync(t, "spin", manifest("spin")))
	failedWith(t, j, dbtsync.CodeWorkLimit, "used more than 1s of CPU time, its limit")
	if j.Attempts != 1 {
		t.Errorf("a job over its CPU limit ran %d times: retrying cannot help", j.Attempts)
	}
}

func TestAChildOverItsMemoryLimitFailsWorkLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	f.start(t, worker.Options{Isolate: isolated(0, 64<<20), MaxAttempts: 3})
	j := f.waitLong(t, f.sync(t, "hog", manifest("hog")))
	failedWith(t, j, dbtsync.CodeWorkLimit, "needed more than 64 MiB of memory, its limit")
	if j.Attempts != 1 {
		t.Errorf("a job over its memory limit ran %d times: retrying cannot help", j.Attempts)
	}
}

func TestAChildOverItsMemoryLimitInResidentMemoryFailsWorkLimitAtTheLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	f.start(t, worker.Options{Isolate: isolated(0, 128<<20), MaxAttempts: 3})
	j := f.waitLong(t, f.sync(t, "fill", manifest("fill")))
	failedWith(t, j, dbtsync.CodeWorkLimit, "needed more than 128 MiB of memory, its limit")
	if j.Attempts != 1 {
		t.Errorf("a job over its memory limit ran %d times: retrying cannot help", j.Attempts)
	}
}

func TestAChildPastTheJobTimeoutFailsJobTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	f.start(t, worker.Options{Isolate: isolated(0, 0), JobTimeout: 2 * time.Second})
	start := time.Now()
	j := f.wait(t, f.sync(t, "spin", manifest("spin")))
	failedWith(t, j, dbtsync.CodeJobTimeout, "the job ran longer than 2s, its time limit")
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("a job of a 2s timeout ended after %s", took)
	}
}

func TestAChildThatCrashesFailsItsJobOnlyAndTheWorkerServesTheNext(t *testing.T) {
	t.Parallel()
	f := newFixture(t, git{})
	f.start(t, worker.Options{Isolate: isolated(0, 0), MaxAttempts: 2, Concurrency: 2})
	crash := f.sync(t, "crash", manifest("crash"))
	beside := f.sync(t, "beside", manifest("beside"))
	j := f.waitLong(t, crash)
	failedWith(t, j, dbtsync.CodeInternal, "error of the platform")
	if j.Attempts != 2 {
		t.Errorf("crashing job ran %d times, want 2 (a crash is retried)", j.Attempts)
	}
	if b := f.wait(t, beside); b.Status != dbtsync.StatusSucceeded || b.Attempts != 1 {
		t.Errorf("the job beside the crash %+v", b)
	}
	if n := f.wait(t, f.sync(t, "next", manifest("next"))); n.Status != dbtsync.StatusSucceeded {
		t.Errorf("the next job after the crash %+v", n)
	}
}
