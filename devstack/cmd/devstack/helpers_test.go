package main_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
)

// buildStack builds every binary of the local stack (the services, the gateway,
// platformctl and the runner), once per test process.
func buildStack(t *testing.T) string {
	t.Helper()
	return platform.BinDir(t, append(slices.Clone(platform.Stack), platform.Devstack)...)
}

// runner is a devstack process started by a test.
type runner struct {
	t       *testing.T
	cmd     *exec.Cmd
	dataDir string
	out     *collector
	exited  chan struct{}
	err     error
}

// stackAddrs are fresh free ports for every service.
type stackAddrs struct{ Gateway, Workspace, Embed, DBTSync, Worker string }

func freshAddrs(t *testing.T) stackAddrs {
	return stackAddrs{devstack.FreeAddr(t), devstack.FreeAddr(t), devstack.FreeAddr(t), devstack.FreeAddr(t), devstack.FreeAddr(t)}
}

// startRunner starts bin/devstack with embedded servers on random ports.
func startRunner(t *testing.T, devstackBin, binDir, dataDir string, a stackAddrs, extraEnv ...string) *runner {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "MONGODB_URI", "NATS_URL", "REDIS_URL", "HTTP_ADDR", "INTERNAL_ADDR":
			continue // the stack under test must start its own
		}
		env = append(env, kv)
	}
	env = append(env,
		"DATA_DIR="+dataDir, "BIN_DIR="+binDir,
		"GATEWAY_ADDR="+a.Gateway, "WORKSPACE_ADDR="+a.Workspace, "EMBED_ADDR="+a.Embed,
		"DBTSYNC_ADDR="+a.DBTSync, "DBTSYNC_WORKER_ADDR="+a.Worker,
		"DEVSTACK_MONGO_ADDR=random", "DEVSTACK_NATS_ADDR=random", "DEVSTACK_REDIS_ADDR=random",
		"GATEWAY_INTERNAL_ADDR=random", "WORKSPACE_INTERNAL_ADDR=random", "EMBED_INTERNAL_ADDR=random",
		"DBTSYNC_INTERNAL_ADDR=random", "DBTSYNC_WORKER_INTERNAL_ADDR=random",
	)
	env = append(env, extraEnv...)
	cmd := exec.Command(devstackBin)
	cmd.Env = env
	r := &runner{t: t, cmd: cmd, dataDir: dataDir, out: &collector{ready: make(chan struct{})}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	// If the test binary dies, take the runner (and so the stack) with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start devstack: %v", err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-r.exited
			}
		}
		if t.Failed() {
			t.Logf("devstack output:\n%s", r.out.String())
		}
	})
	return r
}

// waitReady waits for the "[devstack] ready: gateway ..." line.
func (r *runner) waitReady(ctx context.Context) {
	r.t.Helper()
	select {
	case <-r.out.ready:
	case <-r.exited:
		r.t.Fatalf("devstack exited before ready: %v", r.err)
	case <-ctx.Done():
		r.t.Fatalf("devstack not ready: %v", ctx.Err())
	}
}

// stop sends SIGTERM and waits for the runner; it returns the exit code.
func (r *runner) stop(timeout time.Duration) int {
	r.t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	return r.wait(timeout)
}

func (r *runner) wait(timeout time.Duration) int {
	r.t.Helper()
	select {
	case <-r.exited:
	case <-time.After(timeout):
		r.t.Fatalf("devstack still running %s after SIGTERM", timeout)
	}
	var ee *exec.ExitError
	if r.err != nil && !errors.As(r.err, &ee) {
		r.t.Fatalf("devstack: %v", r.err)
	}
	return r.cmd.ProcessState.ExitCode()
}

func (r *runner) stack() platform.StackFile {
	r.t.Helper()
	s, err := platform.ReadStackFile(filepath.Join(r.dataDir, "stack.json"))
	if err != nil {
		r.t.Fatalf("stack.json: %v", err)
	}
	return s
}

// assertGone fails for every pid that still exists.
func assertGone(t *testing.T, pids map[string]int) {
	t.Helper()
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still alive after devstack exited (kill 0: %v)", name, pid, err)
		}
	}
}

func getStatus(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}

// collector keeps the runner's output and spots the ready line.
type collector struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	ready   chan struct{}
	isReady bool
}

func (c *collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if !c.isReady && strings.Contains(c.buf.String(), "[devstack] ready: gateway http://") {
		c.isReady = true
		close(c.ready)
	}
	return len(p), nil
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *collector) contains(s string) bool { return strings.Contains(c.String(), s) }
