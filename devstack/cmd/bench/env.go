package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/analyticsco/platform/devstack/freeport"
	"github.com/analyticsco/platform/devstack/platform"
)

// Env is what scenarios share: a temp dir, the child processes, and the servers
// started on first use (the backend, the bare proxy, nginx, the gateway with its
// store). Close stops every child and removes the dir.
type Env struct {
	Dir    string // temp dir, removed by Close
	BinDir string // where `make build` put the binaries
	Log    *slog.Logger

	mu       sync.Mutex
	children []*platform.Running
	logs     []*os.File     // the children's output files, closed once they stop
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
	logs := slices.Clone(e.logs)
	closers := slices.Clone(e.closers)
	stopping := slices.Clone(e.stopping)
	e.mu.Unlock()
	for _, f := range stopping {
		f()
	}
	if killed := platform.StopAll(kids, 5*time.Second); len(killed) > 0 {
		e.Log.Warn("killed after SIGTERM", "children", killed)
	}
	for _, f := range logs {
		_ = f.Close()
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

// start starts p (Binary a path, or a name in PATH) as a child that dies with the bench;
// its output goes to <dir>/<name>.log.
func (e *Env) start(p platform.Proc) (*platform.Running, error) {
	f, err := os.Create(filepath.Join(e.Dir, p.Name+".log"))
	if err != nil {
		return nil, err
	}
	r, err := platform.Start(p, "", f)
	if err != nil {
		f.Close()
		return nil, err
	}
	e.mu.Lock()
	e.children = append(e.children, r)
	e.logs = append(e.logs, f)
	e.mu.Unlock()
	return r, nil
}

// waitReady polls r's ReadyPath on its InternalAddr until it answers 200, r exits
// (its output tail in the error) or 60 s pass.
func waitReady(ctx context.Context, r *platform.Running) error {
	return platform.WaitReady(ctx, platform.ReadyTimeout, []*platform.Running{r}, nil)
}

// freeAddr returns a 127.0.0.1 address for children that bind their own port (nginx,
// the gateway); see package freeport.
func freeAddr() (string, error) { return freeport.Addr() }

// startSelf re-executes the bench binary in a server mode, handing it a fresh
// listener as fd 3; it returns the child and the listener's URL once it serves.
func (e *Env) startSelf(ctx context.Context, name string, args ...string) (*platform.Running, string, error) {
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
	r, err := e.start(platform.Proc{Name: name, Binary: exe, Args: args, Addr: addr, InternalAddr: addr, ReadyPath: "/",
		Env: childEnv(), ExtraFiles: []*os.File{lf}})
	if err != nil {
		return nil, "", err
	}
	if err := waitReady(ctx, r); err != nil {
		return nil, "", err
	}
	return r, "http://" + addr, nil
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
		return backend{URL: u, Proc: singleProc("backend", c.Pid())}, nil
	})
}

type backend struct {
	URL  string
	Proc *Proc
}

// TunedProxy is httputil.ReverseProxy tuned (serveTunedProxy) in its own process in
// front of the backend.
func (e *Env) TunedProxy(ctx context.Context) (backend, error) {
	return memo(e, "tuned-proxy", func() (backend, error) {
		be, err := e.Backend(ctx)
		if err != nil {
			return backend{}, err
		}
		c, u, err := e.startSelf(ctx, "tuned-proxy", "-tuned-reverse-proxy", be.URL)
		if err != nil {
			return backend{}, err
		}
		return backend{URL: u, Proc: singleProc("tuned ReverseProxy", c.Pid())}, nil
	})
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
		return backend{URL: u, Proc: singleProc("bare ReverseProxy", c.Pid())}, nil
	})
}
