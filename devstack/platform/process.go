package platform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/analyticsco/platform/devstack/internal/proc"
)

// Proc is one row of the process table: what to run and where it listens.
type Proc struct {
	Name string // unique in the stack: "gateway", "workspace-svc-1", "dbtsync-worker"
	// Binary is a file of the bin dir, or an absolute path (a tool from outside the
	// repository, such as prometheus; with no bin dir, a name looked up in PATH).
	Binary string
	Args   []string
	Addr   string // its public listener
	// InternalAddr is its internal listener (INTERNAL_ADDR), where ReadyPath is polled.
	InternalAddr string
	ReadyPath    string   // default /readyz
	Env          []string // its whole environment (Table builds it)
	// ExtraFiles are passed from fd 3 on (a listener the bench hands its own servers).
	ExtraFiles []*os.File
}

// Running is a started Proc. Restart runs it again with the same environment.
type Running struct {
	Proc
	path string
	out  io.Writer
	tail *tailBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current run has exited
	err  error         // Wait's result, valid after done
	// stopping is set by StopAll: an exit then is the stop asked for, which Supervise
	// does not undo. life orders it with Supervise's restarts.
	stopping atomic.Bool
	life     sync.Mutex
}

// Start runs p from binDir, its output (stdout and stderr) to out; the process gets
// SIGTERM when the caller dies.
func Start(p Proc, binDir string, out io.Writer) (*Running, error) {
	path := p.Binary
	if binDir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(binDir, p.Binary)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s: %s not found (build it with `make build`): %w", p.Name, path, err)
		}
	}
	r := &Running{Proc: p, path: path, out: out, tail: &tailBuffer{}}
	return r, r.launch()
}

func (r *Running) launch() error {
	cmd := exec.Command(r.path, r.Args...)
	cmd.Env = r.Env
	cmd.ExtraFiles = r.ExtraFiles
	w := io.MultiWriter(r.out, r.tail)
	cmd.Stdout, cmd.Stderr = w, w
	// A grandchild holding the output pipe must not block Wait forever.
	cmd.WaitDelay = 5 * time.Second
	exited, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("start %s: %w", r.Name, err)
	}
	done := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	go func() {
		err := <-exited
		if f, ok := r.out.(interface{ Flush() }); ok {
			f.Flush() // a line without its newline yet
		}
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(done)
	}()
	return nil
}

// Pid is the process id of the current run.
func (r *Running) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process.Pid
}

// Done is closed when the current run has exited.
func (r *Running) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Exited reports whether the current run has exited, and how ("exit status 3").
func (r *Running) Exited() (bool, string) {
	select {
	case <-r.Done():
	default:
		return false, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var ee *exec.ExitError
	switch {
	case r.err == nil:
		return true, "exit status 0"
	case errors.As(r.err, &ee):
		return true, ee.ProcessState.String()
	default:
		return true, r.err.Error()
	}
}

// Tail is the end of the process's output (all its runs), for error messages.
func (r *Running) Tail() string { return r.tail.String() }

// Signal sends sig to the current run.
func (r *Running) Signal(sig os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits for the process to exit.
func (r *Running) Kill() {
	r.Signal(syscall.SIGKILL)
	<-r.Done()
}

// Stop sends SIGTERM, waits up to grace, then kills; it reports whether it had to kill.
func (r *Running) Stop(grace time.Duration) (killed bool) {
	return len(StopAll([]*Running{r}, grace)) > 0
}

// Restart starts a process that has exited again, with the same arguments, address
// and environment (keys included).
func (r *Running) Restart() error {
	if gone, _ := r.Exited(); !gone {
		return fmt.Errorf("restart %s: it is still running", r.Name)
	}
	r.stopping.Store(false)
	return r.launch()
}

// StopAll sends SIGTERM to every running process, gives them grace in total, then kills
// the rest; it returns the names of those it had to kill.
func StopAll(rs []*Running, grace time.Duration) (killed []string) {
	for _, r := range rs {
		r.life.Lock()
		r.stopping.Store(true)
		r.life.Unlock()
		if gone, _ := r.Exited(); !gone {
			r.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(grace)
	expired := false
	for _, r := range rs {
		if !expired {
			select {
			case <-r.Done():
				continue
			case <-deadline:
				expired = true
			}
		}
		if gone, _ := r.Exited(); !gone {
			r.Kill()
			killed = append(killed, r.Name)
		}
	}
	return killed
}

// ReadyTimeout is how long WaitReady gives a stack by default.
const ReadyTimeout = 60 * time.Second

// WaitReady polls every process's GET ReadyPath (/readyz) on its internal listener until
// it answers 200, calling ready (if not nil) for each as it does. It fails when a
// process exits or within passes (naming the processes not ready, with the log tail of
// each), or with ctx's error when ctx ends first.
func WaitReady(ctx context.Context, within time.Duration, rs []*Running, ready func(*Running)) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	waiting := map[*Running]string{} // the last answer or error of each
	for _, r := range rs {
		waiting[r] = "no answer yet"
	}
	for {
		for _, r := range rs {
			if _, ok := waiting[r]; !ok {
				continue
			}
			if gone, how := r.Exited(); gone {
				return fmt.Errorf("%s exited during startup (%s); its output:\n%s", r.Name, how, r.Tail())
			}
			last, ok := isReady(ctx, client, r.InternalAddr, r.ReadyPath)
			if !ok {
				waiting[r] = last
				continue
			}
			delete(waiting, r)
			if ready != nil {
				ready(r)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			var b strings.Builder
			for _, r := range rs {
				if last, ok := waiting[r]; ok {
					fmt.Fprintf(&b, "\n%s not ready at http://%s%s (last: %s); its output:\n%s", r.Name, r.InternalAddr, readyPath(r.ReadyPath), last, r.Tail())
				}
			}
			return fmt.Errorf("not ready after %s:%s", within, b.String())
		case <-tick.C:
		}
	}
}

func readyPath(p string) string {
	if p == "" {
		return "/readyz"
	}
	return p
}

func isReady(ctx context.Context, client *http.Client, addr, path string) (last string, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+readyPath(path), nil)
	if err != nil {
		return err.Error(), false
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error(), false
	}
	resp.Body.Close()
	return resp.Status, resp.StatusCode == http.StatusOK
}

// tailLines is how many of a process's last output lines Tail keeps.
const tailLines = 40

// tailBuffer keeps the last tailLines lines written to it.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
	part  []byte // the line being written
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.part = append(b.part, p...)
	for {
		i := bytes.IndexByte(b.part, '\n')
		if i < 0 {
			break
		}
		b.lines = append(b.lines, string(b.part[:i]))
		b.part = b.part[i+1:]
		if len(b.lines) > tailLines {
			b.lines = b.lines[len(b.lines)-tailLines:]
		}
	}
	if len(b.part) > 64<<10 { // a very long line without a newline: keep its end
		b.part = b.part[len(b.part)-64<<10:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.Join(b.lines, "\n")
	if len(b.part) > 0 {
		s += "\n" + string(b.part)
	}
	if s = strings.TrimSpace(s); s == "" {
		return "(no output)"
	}
	return s
}
