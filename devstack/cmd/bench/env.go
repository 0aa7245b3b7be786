package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/analyticsco/platform/devstack/internal/proc"
)

// Env is what scenarios share: a temp dir, the child processes, and the servers
// started on first use (the backend, the bare proxy, nginx, the gateway with its
// store). Close stops every child and removes the dir.
type Env struct {
	Dir    string // temp dir, removed by Close
	BinDir string // where `make build` put the binaries
	Log    *slog.Logger

	mu       sync.Mutex
	children []*child
	closers  []func() error // run in reverse order after the children stop
	stopping []func()       // run before the children are asked to stop
	once     map[string]*onceResult
}

type onceResult struct {
	done chan struct{}
	val  any
	err  error
}

func NewEnv(binDir string, log *slog.Logger) (*Env, error) {
	dir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		return nil, err
	}
	// nginx workers drop root to "nobody" and must traverse into their dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	return &Env{Dir: dir, BinDir: binDir, Log: log, once: map[string]*onceResult{}}, nil
}

// memo runs start once per key and returns its result to every caller.
func memo[T any](e *Env, key string, start func() (T, error)) (T, error) {
	e.mu.Lock()
	r, ok := e.once[key]
	if !ok {
		r = &onceResult{done: make(chan struct{})}
		e.once[key] = r
	}
	e.mu.Unlock()
	if !ok {
		r.val, r.err = start()
		close(r.done)
	}
	<-r.done
	v, _ := r.val.(T)
	return v, r.err
}

// Close stops every child (SIGTERM, then SIGKILL after 5 s), runs the closers and
// removes the temp dir.
func (e *Env) Close() {
	e.mu.Lock()
	kids := slices.Clone(e.children)
	closers := slices.Clone(e.closers)
	stopping := slices.Clone(e.stopping)
	e.mu.Unlock()
	for _, f := range stopping {
		f()
	}
	for i := len(kids) - 1; i >= 0; i-- {
		kids[i].stop()
	}
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil {
			e.Log.Warn("cleanup", "err", err)
		}
	}
	if err := os.RemoveAll(e.Dir); err != nil {
		e.Log.Warn("remove temp dir", "dir", e.Dir, "err", err)
	}
}

// beforeStop registers f to run at Close before any child is stopped.
func (e *Env) beforeStop(f func()) {
	e.mu.Lock()
	e.stopping = append(e.stopping, f)
	e.mu.Unlock()
}

func (e *Env) addCloser(f func() error) {
	e.mu.Lock()
	e.closers = append(e.closers, f)
	e.mu.Unlock()
}

// child is a process started by the bench; its output goes to <dir>/<name>.log.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  <-chan error
	mu      sync.Mutex
	waitErr error
	gone    bool
}

// startChild starts cmd as a child that dies with the bench (Pdeathsig).
func (e *Env) startChild(name string, cmd *exec.Cmd) (*child, error) {
	logPath := filepath.Join(e.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy of the fd
	cmd.Stdout, cmd.Stderr = f, f
	exited, err := proc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, exited: exited}
	e.mu.Lock()
	e.children = append(e.children, c)
	e.mu.Unlock()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exitedErr reports whether the child has exited, without blocking.
func (c *child) exitedErr() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return true, c.waitErr
	}
	select {
	case err := <-c.exited:
		c.gone, c.waitErr = true, err
		return true, err
	default:
		return false, nil
	}
}

func (c *child) stop() {
	if gone, _ := c.exitedErr(); gone {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.exited:
		c.mu.Lock()
		c.gone, c.waitErr = true, err
		c.mu.Unlock()
		return
	case <-time.After(5 * time.Second):
	}
	_ = c.cmd.Process.Kill()
	err := <-c.exited
	c.mu.Lock()
	c.gone, c.waitErr = true, err
	c.mu.Unlock()
}

// logTail is the end of the child's output, for error messages.
func (c *child) logTail() string {
	raw, _ := os.ReadFile(c.logPath)
	const max = 2000
	if len(raw) > max {
		raw = raw[len(raw)-max:]
	}
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "(no output)"
	}
	return s
}

// waitReady polls url until it answers 200, the child exits or 60 s pass.
func waitReady(ctx context.Context, c *child, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	var last string
	for {
		if gone, err := c.exitedErr(); gone {
			return fmt.Errorf("%s exited (%v) before it was ready; its output:\n%s", c.name, err, c.logTail())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s (last: %s); its output:\n%s", c.name, url, last, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// handedOut are the addresses freeAddr returned: nothing holds them until a child binds
// them, so the kernel may offer one again; none is returned twice.
var handedOut sync.Map

// freeAddr returns a 127.0.0.1 address that was free a moment ago, for children
// that bind their own port (nginx, the gateway), never one it returned before.
func freeAddr() (string, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		a := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(a, true); !dup {
			return a, nil
		}
	}
	return "", fmt.Errorf("no free port not handed out already")
}

// startSelf re-executes the bench binary in a server mode, handing it a fresh
// listener as fd 3; it returns the child and the listener's URL once it serves.
func (e *Env) startSelf(ctx context.Context, name string, args ...string) (*child, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	lf, err := ln.(*net.TCPListener).File()
	addr := ln.Addr().String()
	ln.Close() // the dup in lf keeps the socket open for the child
	if err != nil {
		return nil, "", err
	}
	defer lf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = childEnv()
	cmd.ExtraFiles = []*os.File{lf}
	c, err := e.startChild(name, cmd)
	if err != nil {
		return nil, "", err
	}
	u := "http://" + addr
	if err := waitReady(ctx, c, u+"/"); err != nil {
		return nil, "", err
	}
	return c, u, nil
}

// childEnv is a minimal environment: children must not pick up OTEL_* or service
// settings from the caller's shell, which would change what is measured. Go
// runtime knobs pass through on purpose, so they can be experimented with.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "HOME", "TMPDIR", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG":
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func singleProc(label string, pid int) *Proc {
	return &Proc{Label: label, PIDs: func() []int { return []int{pid} }}
}

// Backend is the tiny JSON server every variant ends at.
func (e *Env) Backend(ctx context.Context) (backend, error) {
	return memo(e, "backend", func() (backend, error) {
		c, u, err := e.startSelf(ctx, "backend", "-backend")
		if err != nil {
			return backend{}, err
		}
		return backend{URL: u, Proc: singleProc("backend", c.pid())}, nil
	})
}

type backend struct {
	URL  string
	Proc *Proc
}

// BareProxy is httputil.ReverseProxy in its own process in front of the backend.
func (e *Env) BareProxy(ctx context.Context) (backend, error) {
	return memo(e, "bare-proxy", func() (backend, error) {
		be, err := e.Backend(ctx)
		if err != nil {
			return backend{}, err
		}
		c, u, err := e.startSelf(ctx, "bare-proxy", "-reverse-proxy", be.URL)
		if err != nil {
			return backend{}, err
		}
		return backend{URL: u, Proc: singleProc("bare ReverseProxy", c.pid())}, nil
	})
}
