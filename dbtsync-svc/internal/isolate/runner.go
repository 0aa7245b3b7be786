package isolate

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/gitsource"
	libconfig "github.com/analyticsco/platform/libs/config"
)

// addressHeadroom is the address space a child may reserve beyond its memory limit: the
// dbtsync-svc child (Go 1.26, linux/amd64) starts at 1.58 GiB of virtual memory (VmSize:
// the runtime's reservations, 24 MiB of it resident), so its heap meets RLIMIT_AS at
// about its memory limit plus 0.4 GiB, while GOMEMLIMIT makes the collector hold it
// under the limit as long as the live heap fits.
const addressHeadroom = 2 << 30

// Limits bound one child; zero fields take the defaults.
type Limits struct {
	CPU    time.Duration // CPU time (RLIMIT_CPU)
	Memory int64         // memory: GOMEMLIMIT; the address space limit is set above it by what the Go runtime reserves
}

// DefaultLimits apply where Limits leaves a field zero: the defaults of the config tags
// (DBT_SYNC_CHILD_*), which a fitness test keeps equal (systemtest/architecture).
var DefaultLimits = Limits{CPU: 15 * time.Minute, Memory: 2 << 30}

// WithDefaults is l with every limit not set (zero or less) at its DefaultLimits value.
func (l Limits) WithDefaults() Limits { return libconfig.OrDefaults(l, DefaultLimits) }

// Runner starts the children of one worker.
type Runner struct {
	// Command is the child's argv: the worker's own executable and Subcommand.
	Command []string
	// Env is the child's whole environment: it inherits none of the worker's (no key,
	// no connection string reaches it).
	Env []string
	// Limits are what one child may use.
	Limits Limits
	// Git are the limits of a clone and of a manifest read (an uploaded one's too);
	// Opener opens the integration's saved credentials, in the worker: the child receives
	// them opened.
	Git    gitsource.Limits
	Opener gitsource.Opener
	// CloneDir is where the child's clones go (os.TempDir when empty): app.NewWorker sets
	// the worker's own clone directory, so a restarted worker removes what a killed
	// child left there.
	CloneDir string
	Logger   *slog.Logger
	// Selector bounds the model selector the child applies (zero: the defaults).
	Selector convert.SelectorLimits
}

// SelfCommand is the child's argv for this process's own executable.
func SelfCommand() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the worker's executable for its convert children: %w", err)
	}
	return []string{exe, Subcommand}, nil
}

// Input is one job's input, and where its progress goes.
type Input struct {
	Source      string // dbtsync.SourceManifest or dbtsync.SourceGit
	Manifest    io.Reader
	Integration dbtsync.Integration
	Ref         string
	Commit      string // a push's commit: ref's head must be it ("": any)
	// Select and Exclude are the job's model selector (nil: none).
	Select, Exclude *string
	// ProgressEvery is how many converted models make a Progress call.
	ProgressEvery int
	// Loaded is called once the input is read, with its models; an error stops the child
	// and is Run's.
	Loaded func(total int) error
	// Progress is called as models are converted (not for the last).
	Progress func(done, total int)
	Logger   *slog.Logger // the job's logger (the Runner's when nil)
}

// Run reads and converts the job's input in a child process. The child is killed
// (SIGKILL) when ctx ends, and Run then reports ctx's error. A child killed by its CPU or
// memory limit fails the job for good (work_limit, naming the limit); a child that dies
// otherwise is an internal failure, which a retry may mend.
func (r *Runner) Run(ctx context.Context, in Input) (convert.Result, error) {
	limits := r.Limits.WithDefaults()
	req := request{Source: in.Source, Ref: in.Ref, Commit: in.Commit, Git: r.Git, CloneDir: r.CloneDir, CPU: limits.CPU, Memory: limits.Memory, ProgressEvery: in.ProgressEvery,
		Select: in.Select, Exclude: in.Exclude, Selector: r.Selector}
	if req.CloneDir == "" {
		req.CloneDir = os.TempDir()
	}
	if in.Source == dbtsync.SourceGit {
		req.Integration = in.Integration
		if len(in.Integration.Credentials) > 0 {
			plain, err := r.Opener.Open(in.Integration.Credentials, in.Integration.DeploymentID)
			if err != nil {
				return convert.Result{}, dbtsync.Permanent(errors.New("saved git credentials cannot be decrypted (was a credentials key removed?)"))
			}
			req.Credentials = plain
		}
		req.Integration.Credentials = nil
	}
	log := in.Logger
	if log == nil {
		log = r.Logger
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(r.Command) == 0 {
		return convert.Result{}, errors.New("no command for the convert child")
	}

	cctx, kill := context.WithCancel(ctx)
	defer kill()
	cmd := exec.CommandContext(cctx, r.Command[0], r.Command[1:]...)
	cmd.Env = r.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.WaitDelay = 5 * time.Second
	childAttrs(cmd)
	stderr := &capture{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return convert.Result{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return convert.Result{}, err
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return convert.Result{}, fmt.Errorf("start the convert child: %w", err)
	}
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer stdin.Close()
		if gob.NewEncoder(stdin).Encode(&req) != nil || in.Manifest == nil {
			return
		}
		_, _ = io.Copy(stdin, in.Manifest) // a child that stops reading ends the copy (EPIPE)
	}()

	res, end, stopErr := r.read(io.LimitReader(stdout, max(4*req.Memory, 1<<30)), in)
	if end != frameDone && end != frameFailed {
		kill() // it sent something else than its outcome, or Loaded refused: nothing more is read
	}
	waitErr := cmd.Wait()
	<-fed
	state := cmd.ProcessState
	cpu := state.UserTime() + state.SystemTime()
	switch {
	case ctx.Err() != nil:
		log.Info("convert child stopped", "reason", context.Cause(ctx), "cpu", cpu, "wall", time.Since(started))
		return convert.Result{}, ctx.Err()
	case end == endRefused:
		return convert.Result{}, stopErr
	case waitErr == nil && end == frameDone:
		return res, nil
	case waitErr == nil && end == frameFailed:
		return convert.Result{}, stopErr
	}
	out := stderr.String()
	if oom(out) {
		log.Warn("convert child over its memory limit", "limit_bytes", req.Memory, "cpu", cpu, "stderr", out)
		return convert.Result{}, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeWorkLimit,
			"the job's reading and conversion of its input needed more than %s of memory, its limit", sizeText(req.Memory)))
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() && (ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU) &&
		cpu+500*time.Millisecond >= req.CPU {
		log.Warn("convert child over its CPU limit", "limit", req.CPU, "cpu", cpu, "wall", time.Since(started))
		return convert.Result{}, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeWorkLimit,
			"the job's reading and conversion of its input used more than %s of CPU time, its limit", req.CPU))
	}
	detail := fmt.Sprintf("convert child ended (%s) after %s of CPU without an outcome", state, cpu)
	if stopErr != nil {
		detail += ": " + stopErr.Error()
	}
	log.Error("convert child failed", "state", state.String(), "cpu", cpu, "stderr", out)
	return convert.Result{}, fmt.Errorf("%s; its stderr: %s", detail, firstLines(out, 5))
}

// endRefused is read's end when Loaded refused to go on.
const endRefused = "refused"

// read decodes the child's frames until its outcome: end is frameDone with the result,
// frameFailed with the job's failure as err, endRefused with Loaded's error, or "" when
// the frames stopped or broke before an outcome (err says how).
func (r *Runner) read(stdout io.Reader, in Input) (res convert.Result, end string, err error) {
	dec := gob.NewDecoder(stdout)
	loaded := false
	for {
		var f frame
		if err := dec.Decode(&f); err != nil {
			return convert.Result{}, "", fmt.Errorf("read the convert child's output: %w", err)
		}
		switch {
		case f.Kind == frameLoaded && !loaded:
			loaded = true
			if in.Loaded != nil {
				if err := in.Loaded(f.Total); err != nil {
					return convert.Result{}, endRefused, err
				}
			}
		case f.Kind == frameProgress && loaded:
			if in.Progress != nil {
				in.Progress(f.Done, f.Total)
			}
		case f.Kind == frameFile && loaded:
			res.Files = append(res.Files, f.File)
		case f.Kind == frameDone && loaded:
			res.Warnings, res.Selection = f.Warnings, f.Selection
			return res, frameDone, nil
		case f.Kind == frameFailed:
			return convert.Result{}, frameFailed, f.Failure.err()
		default:
			return convert.Result{}, "", fmt.Errorf("the convert child sent a %q frame out of order", f.Kind)
		}
	}
}

// oom tells a child over its memory limit (its watch stopped it, or the Go runtime could
// not map memory under RLIMIT_AS) from other deaths; a race-enabled build (tests) runs
// out in the race detector's allocator instead.
func oom(stderr string) bool {
	for _, s := range []string{overMemory, "fatal error: runtime: out of memory", "fatal error: out of memory", "runtime: out of memory", "ThreadSanitizer failed to allocate"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// capture keeps the head and the tail of a child's stderr (a crash's first lines say
// what it was; a runaway writer cannot fill the worker's memory).
type capture struct {
	mu         sync.Mutex
	head, tail []byte
	dropped    int64
}

const captureHalf = 8 << 10

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if room := captureHalf - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - captureHalf; over > 0 {
		c.dropped += int64(over)
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
	return n, nil
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b bytes.Buffer
	b.Write(c.head)
	if c.dropped > 0 {
		fmt.Fprintf(&b, "\n[... %d bytes ...]\n", c.dropped)
	}
	b.Write(c.tail)
	return b.String()
}

// childEnvNames are the worker's variables a child keeps: where temporary files go, and
// how the system reaches and trusts git servers. Nothing else (no key, no URL of the
// platform's servers) reaches it.
var childEnvNames = map[string]bool{
	"PATH": true, "TMPDIR": true, "HOME": true, "TZ": true, "GODEBUG": true, "GOTRACEBACK": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true, "http_proxy": true, "https_proxy": true, "no_proxy": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
}

// ChildEnv is the part of env (KEY=value entries) a child keeps.
func ChildEnv(env []string) []string {
	out := []string{}
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && childEnvNames[k] {
			out = append(out, kv)
		}
	}
	return out
}
