package platform_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/platform"
)

// lines collects what Supervise reports.
type lines struct {
	mu  sync.Mutex
	got []string
	ch  chan string
}

func newLines() *lines { return &lines{ch: make(chan string, 100)} }

func (l *lines) add(s string) {
	l.mu.Lock()
	l.got = append(l.got, s)
	l.mu.Unlock()
	l.ch <- s
}

func (l *lines) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case s := <-l.ch:
		return s
	case <-time.After(within):
		t.Fatalf("nothing reported within %s", within)
		return ""
	}
}

// A worker killed from outside (as by the kernel's OOM killer) is restarted with its
// environment, saying so in one line, while the rest of the stack runs on untouched;
// the stack's own stop is never undone.
func TestSupervisedWorkerKilledFromOutsideIsRestartedAndTheStackStaysUp(t *testing.T) {
	table, err := platform.Table(layout(t, "ready"))
	if err != nil {
		t.Fatal(err)
	}
	rs := startAll(t, table, platform.FakeBinDir(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := platform.WaitReady(ctx, 30*time.Second, rs, nil); err != nil {
		t.Fatal(err)
	}
	report, down := newLines(), make(chan string, 10)
	for _, r := range rs {
		go platform.Supervise(ctx, r, platform.Restarts{Max: 3, Window: time.Minute, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second},
			report.add, func(_ *platform.Running, why string) { down <- why })
	}
	pids := map[string]int{}
	for _, r := range rs {
		pids[r.Name] = r.Pid()
	}
	worker := rs[slices.IndexFunc(rs, func(r *platform.Running) bool { return r.Name == "dbtsync-worker-1" })]
	before := state(t, worker)
	if err := syscall.Kill(worker.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	line := report.next(t, 10*time.Second)
	if !strings.HasPrefix(line, "dbtsync-worker-1 exited (signal: killed); restarted it after 50ms as pid ") || !strings.Contains(line, "(restart 1 of 3 within 1m0s)") {
		t.Errorf("reported %q", line)
	}
	if err := platform.WaitReady(ctx, 30*time.Second, []*platform.Running{worker}, nil); err != nil {
		t.Fatal(err)
	}
	after := state(t, worker)
	if after.PID == before.PID || after.PID != worker.Pid() || !slices.Equal(after.Env, before.Env) || !slices.Equal(after.Args, before.Args) {
		t.Errorf("after the restart: pid %d (was %d, Pid() %d), env or args changed: %v", after.PID, before.PID, worker.Pid(), !slices.Equal(after.Env, before.Env))
	}
	for _, r := range rs {
		if gone, how := r.Exited(); gone {
			t.Errorf("%s is down (%s)", r.Name, how)
		}
		if r != worker && r.Pid() != pids[r.Name] {
			t.Errorf("%s was restarted too", r.Name)
		}
	}

	if killed := platform.StopAll(rs, 10*time.Second); len(killed) > 0 {
		t.Fatalf("killed: %v", killed)
	}
	time.Sleep(300 * time.Millisecond) // longer than the backoff: a restart would have happened
	for _, r := range rs {
		if gone, how := r.Exited(); !gone || how != "exit status 0" {
			t.Errorf("%s after the stack's stop: exited %v (%s): a stop was undone", r.Name, gone, how)
		}
	}
	select {
	case s := <-report.ch:
		t.Errorf("reported after the stop: %q", s)
	case why := <-down:
		t.Errorf("gave up after the stop: %q", why)
	default:
	}
}

// A process that keeps exiting is restarted within its budget, each time later, then
// left down: the caller is told (and make run then stops the stack), no spinning.
func TestSupervisedCrashLoopIsRestartedWithinItsBudgetThenLeftDown(t *testing.T) {
	table, err := platform.Table(layout(t, "exit"))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(table, func(p platform.Proc) bool { return p.Name == "dbtsync-worker-1" })
	rs := startAll(t, table[i:i+1], platform.FakeBinDir(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report := newLines()
	down := make(chan string, 1)
	start := time.Now()
	go platform.Supervise(ctx, rs[0], platform.Restarts{Max: 2, Window: time.Minute, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second},
		report.add, func(_ *platform.Running, why string) { down <- why })
	for n, after := range []string{"100ms", "200ms"} {
		if line := report.next(t, 10*time.Second); !strings.Contains(line, "dbtsync-worker-1 exited (exit status 3); restarted it after "+after) {
			t.Errorf("restart %d: %q", n+1, line)
		}
	}
	select {
	case why := <-down:
		if !strings.Contains(why, "dbtsync-worker-1 exited (exit status 3), 3 times within 1m0s; not restarted again") {
			t.Errorf("gave up saying %q", why)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a crash loop was restarted past its budget")
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("three exits within %s: the backoff did not hold", took)
	}
	if gone, _ := rs[0].Exited(); !gone {
		t.Error("the process runs again after the supervisor gave up")
	}
}
