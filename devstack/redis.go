package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack/freeport"
	"github.com/analyticsco/platform/devstack/internal/proc"
)

// ErrRedisNotInstalled is returned when redis-server is not on PATH.
var ErrRedisNotInstalled = errors.New("redis-server not found: install it with `apt-get install -y redis-server`")

// Redis is a redis-server child process bound to 127.0.0.1, persisting with
// an append-only file in its dir, requiring a password (requirepass, random per server
// or per group of servers) of every client, so every client of the local stack and the
// tests goes through the code path a production Redis with a password takes. It dies
// with the parent (Pdeathsig).
type Redis struct {
	URL      string // redis://:<password>@127.0.0.1:<port>/0
	Addr     string // 127.0.0.1:<port>
	Password string // what clients AUTH with (and replicas with their primary: masterauth)

	dir    string
	logger *slog.Logger
	args   redisArgs

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan error
	closed bool
}

// StartRedis starts redis-server with --dir dir on addr ("" picks a free port
// on 127.0.0.1) and waits until it answers PING. ctx bounds startup only.
func StartRedis(ctx context.Context, dir, addr string, logger *slog.Logger) (*Redis, error) {
	return startRedisWith(ctx, dir, addr, logger, nil, randomHex(16))
}

// redisArgs builds the command line of a child on host:port with its data in dir: the
// binary first.
type redisArgs func(dir, host, port string) []string

// serverArgs is redis-server's command line, then extra settings (--name value...).
func serverArgs(extra ...string) redisArgs {
	return func(dir, host, port string) []string {
		return append([]string{"redis-server",
			"--bind", host,
			"--port", port,
			"--dir", dir,
			"--appendonly", "yes",
			// Revocations must never be evicted to make room: at maxmemory, writes fail instead.
			"--maxmemory-policy", "noeviction",
			"--save", "",
			"--daemonize", "no",
			"--logfile", "",
			"--loglevel", "warning",
		}, extra...)
	}
}

// startRedisWith starts the child args describes (nil: a plain redis-server), requiring
// password.
func startRedisWith(ctx context.Context, dir, addr string, logger *slog.Logger, args redisArgs, password string) (*Redis, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if args == nil {
		args = serverArgs()
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrRedisNotInstalled
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: redis dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("devstack: redis dir: %w", err)
	}
	r := &Redis{dir: abs, logger: logger.With("component", "redis"), args: args, Password: password}
	r.mu.Lock()
	defer r.mu.Unlock()
	if addr != "" {
		r.Addr = addr
		if err := r.startLocked(ctx); err != nil {
			return nil, err
		}
		return r, nil
	}
	// A free port found by listen-and-close can be taken by someone else
	// before redis binds it; try a few.
	for attempt := 1; ; attempt++ {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		r.Addr = a
		err = r.startLocked(ctx)
		if err == nil {
			return r, nil
		}
		if attempt == 3 || ctx.Err() != nil {
			return nil, err
		}
		r.logger.Debug("redis-server failed to start, retrying on another port", "err", err)
	}
}

func (r *Redis) startLocked(ctx context.Context) error {
	host, port, err := net.SplitHostPort(r.Addr)
	if err != nil {
		return fmt.Errorf("devstack: redis addr %q: %w", r.Addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
		r.Addr = net.JoinHostPort(host, port)
	}
	out := &tailWriter{logger: r.logger, max: 8 << 10}
	argv := r.args(r.dir, host, port)
	if r.Password != "" {
		argv = append(argv, "--requirepass", r.Password)
		if argv[0] == "redis-server" { // a replica authenticates with its primary
			argv = append(argv, "--masterauth", r.Password)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	// An AOF-rewrite child may briefly hold the output pipe after the server
	// exits; do not let Wait hang on it.
	cmd.WaitDelay = 5 * time.Second
	exited, err := proc.Start(cmd)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return ErrRedisNotInstalled
		}
		return fmt.Errorf("devstack: start %s: %w", argv[0], err)
	}
	r.cmd, r.exited = cmd, exited
	r.URL = "redis://" + r.userinfo() + r.Addr + "/0"

	if err := r.waitReady(ctx); err != nil {
		r.stopLocked()
		return fmt.Errorf("%w; %s output: %s", err, argv[0], out.String())
	}
	r.logger.Debug("redis ready", "url", r.URL, "dir", r.dir, "pid", cmd.Process.Pid)
	return nil
}

func (r *Redis) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: r.Addr, Password: r.Password, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-r.exited:
			// Put it back for stopLocked, which also waits on it.
			ch := make(chan error, 1)
			ch <- werr
			r.exited = ch
			return fmt.Errorf("devstack: redis-server on %s exited during startup: %v", r.Addr, werr)
		case <-ctx.Done():
			return fmt.Errorf("devstack: redis-server on %s not answering PING: %w (last: %v)", r.Addr, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// userinfo is the password part of a redis:// URL ("" without a password).
func (r *Redis) userinfo() string {
	if r.Password == "" {
		return ""
	}
	return url.UserPassword("", r.Password).String() + "@"
}

// Pid is the redis-server process id, 0 when stopped.
func (r *Redis) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Stop sends SIGTERM (redis flushes its AOF) and waits, then SIGKILLs after
// 10 s. Idempotent.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopLocked()
}

func (r *Redis) stopLocked() error {
	if r.cmd == nil {
		return nil
	}
	cmd, exited := r.cmd, r.exited
	r.cmd, r.exited = nil, nil
	return proc.Stop(cmd, exited, syscall.SIGTERM, 10*time.Second, "redis-server")
}

// Kill sends SIGKILL (no AOF flush, no goodbye to replicas or sentinels: the machine
// is gone) and waits for the process to exit. Idempotent; Start brings it back.
func (r *Redis) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	cmd, exited := r.cmd, r.exited
	r.cmd, r.exited = nil, nil
	_ = proc.Stop(cmd, exited, syscall.SIGKILL, 10*time.Second, "redis-server")
}

// Start starts a stopped or killed server again on the same port and dir; it does
// nothing to one that runs.
func (r *Redis) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("devstack: redis is closed")
	}
	if r.cmd != nil {
		return nil
	}
	return r.startLocked(ctx)
}

// Restart stops and starts redis-server again on the same port and dir.
func (r *Redis) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("devstack: redis is closed")
	}
	if err := r.stopLocked(); err != nil {
		return err
	}
	return r.startLocked(ctx)
}

// Close stops redis-server for good; idempotent.
func (r *Redis) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return r.stopLocked()
}

// tailWriter logs each line at Debug and keeps the last max bytes for error
// messages.
type tailWriter struct {
	logger *slog.Logger
	max    int

	mu      sync.Mutex
	buf     []byte
	partial []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = w.buf[len(w.buf)-w.max:]
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(w.partial[:i])); line != "" {
			w.logger.Debug(line)
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.buf))
}

// freeAddr is a 127.0.0.1 address for a child that binds its own listener (see
// package freeport: outside the kernel's ephemeral range, claimed across processes).
func freeAddr() (string, error) { return freeport.Addr() }
