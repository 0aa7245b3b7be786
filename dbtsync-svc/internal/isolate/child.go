package isolate

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/gitsource"
)

// Subcommand is the hidden argument that makes the binary serve one child (Main).
const Subcommand = "convert-child"

// ChildOptions adjust the child; production uses none.
type ChildOptions struct {
	// Inspect, when set, sees the project once it is read, before the conversion: tests
	// make the child misbehave there (loop, allocate, panic).
	Inspect func(*convert.Project)
}

// Main serves one child on the process's standard streams and exits: status 0 once the
// outcome (a result or the job's failure) is written, 3 when the worker's request
// cannot be read or the limits cannot be set, 4 when its memory watch stopped it. A
// crash exits as Go crashes (status 2).
func Main(opts ChildOptions) {
	if err := Serve(os.Stdin, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "dbtsync convert child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// Serve reads the worker's request from in, sets the child's limits on this process,
// reads and converts the job's input and writes the frames to out. Its error is the
// protocol's (a request it cannot read, limits it cannot set, a pipe that broke); the
// job's own failure is a frame.
func Serve(in io.Reader, out io.Writer, opts ChildOptions) error {
	br := bufio.NewReaderSize(in, 256<<10) // gob reads its message from br, the manifest follows in it
	var req request
	if err := gob.NewDecoder(br).Decode(&req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	var addressSpace int64
	if req.Memory > 0 {
		addressSpace = req.Memory + addressHeadroom
		debug.SetMemoryLimit(req.Memory)
		go watchMemory(req.Memory, 20*time.Millisecond)
	}
	if err := setLimits(req.CPU, addressSpace); err != nil {
		return err
	}
	preferOOMKill()
	bw := bufio.NewWriterSize(out, 256<<10)
	enc := gob.NewEncoder(bw)
	send := func(f frame) error {
		if err := enc.Encode(&f); err != nil {
			return err
		}
		if f.Kind == frameLoaded || f.Kind == frameProgress { // the worker records them as they come
			return bw.Flush()
		}
		return nil
	}
	res, err := produce(context.Background(), req, br, opts, send)
	if err != nil {
		if serr := send(frame{Kind: frameFailed, Failure: failureOf(err)}); serr != nil {
			return serr
		}
		return bw.Flush()
	}
	for _, f := range res.Files {
		if err := send(frame{Kind: frameFile, File: f}); err != nil {
			return err
		}
	}
	if err := send(frame{Kind: frameDone, Warnings: res.Warnings, Selection: res.Selection}); err != nil {
		return err
	}
	return bw.Flush()
}

// produce reads the input and converts it, sending the models found and the progress.
func produce(ctx context.Context, req request, in io.Reader, opts ChildOptions, send func(frame) error) (convert.Result, error) {
	proj, err := load(ctx, req, in)
	if err != nil {
		return convert.Result{}, err
	}
	selection, err := dbtsync.ApplySelector(proj, req.Select, req.Exclude, req.Selector)
	if err != nil {
		return convert.Result{}, err
	}
	total := len(proj.Models)
	if err := send(frame{Kind: frameLoaded, Total: total}); err != nil {
		return convert.Result{}, err
	}
	if opts.Inspect != nil {
		opts.Inspect(proj)
	}
	every := max(req.ProgressEvery, 1)
	conv := convert.Prepare(proj)
	res := convert.Result{Files: make([]convert.File, conv.Len()), Warnings: conv.Warnings, Selection: selection}
	for i := range res.Files {
		res.Files[i] = conv.File(i)
		// Skipped models (warnings) count as done with the first file, so done reaches
		// total; the files of saved queries (views) count as none.
		done := min(i+1+total-conv.Len(), total)
		if done <= 0 || done%every != 0 || done == total {
			continue
		}
		if err := send(frame{Kind: frameProgress, Done: done, Total: total}); err != nil {
			return convert.Result{}, err
		}
	}
	return res, nil
}

// load reads the job's input: the manifest that follows the request, or the project of
// the integration's repository at the ref.
func load(ctx context.Context, req request, in io.Reader) (*convert.Project, error) {
	switch req.Source {
	case dbtsync.SourceManifest:
		return dbtsync.DecodeManifestWith(in, req.Git.ManifestLimits())
	case dbtsync.SourceGit:
		integ := req.Integration
		integ.Credentials = nil
		if len(req.Credentials) > 0 {
			integ.Credentials = []byte("opened by the worker") // any non-empty value: openedCredentials ignores it
		}
		src, err := gitsource.NewCloner(openedCredentials(req.Credentials), req.CloneDir, req.Git)
		if err != nil {
			return nil, err
		}
		return src.Load(ctx, integ, req.Ref, req.Commit)
	}
	return nil, fmt.Errorf("unknown job source %q", req.Source)
}

// openedCredentials hands gitsource the credentials the worker opened.
type openedCredentials []byte

func (o openedCredentials) Open([]byte, int64) ([]byte, error) { return o, nil }

func failureOf(err error) failure {
	f := failure{Permanent: dbtsync.IsPermanent(err), Text: err.Error()}
	var jf *dbtsync.JobFailure
	if errors.As(err, &jf) {
		f.Code, f.Message = jf.Code, jf.Message
	}
	return f
}

// err is the failure as the worker handles it.
func (f failure) err() error {
	var err error
	if f.Code != "" {
		err = dbtsync.Failure(f.Code, "%s", f.Message)
		if f.Text != f.Message {
			err = &detailed{JobFailure: err, text: f.Text}
		}
	} else {
		err = errors.New(f.Text)
	}
	if f.Permanent {
		err = dbtsync.Permanent(err)
	}
	return err
}

// detailed is a job failure whose logged text says more than its message.
type detailed struct {
	JobFailure error
	text       string
}

func (d *detailed) Error() string { return d.text }
func (d *detailed) Unwrap() error { return d.JobFailure }
