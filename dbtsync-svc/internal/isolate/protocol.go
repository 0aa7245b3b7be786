// Package isolate runs the untrusted phases of a dbt sync job (the clone, tree walk, link
// resolution and project read of a repository, or the scan of an uploaded manifest; then
// the conversion) in a child process that the worker can kill whatever the code is doing.
//
// The worker re-executes its own binary with a hidden subcommand (Serve is its body).
// The child sets RLIMIT_CPU and RLIMIT_AS on itself, with GOMEMLIMIT below the address
// space limit, before it reads anything a tenant supplied. The two talk over pipes:
//
//   - stdin: one gob-encoded request (what to read, the git limits, the credentials the
//     worker opened), then, for a manifest job, the manifest's bytes to their end;
//   - stdout: gob-encoded frames: the models found, progress, each file of the result,
//     and last the warnings or the job's failure;
//   - stderr: captured (its head and tail, bounded) and logged when the child fails.
//
// The child needs no database, queue or key: the worker keeps every store write, progress
// update, cancel watch and keep-alive. A child killed for a cancel or the job's deadline
// reports the context's error; one killed by its CPU or memory limit fails the job with
// work_limit, naming the limit; any other death is a retryable internal failure of that
// job alone.
package isolate

import (
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/gitsource"
)

// request is what the worker sends the child first.
type request struct {
	Source string // dbtsync.SourceManifest (the manifest follows on stdin) or dbtsync.SourceGit
	// Git jobs: the integration (its sealed credentials left out), the ref, the opened
	// credentials (GitCredentials JSON; none when empty), the limits and the directory
	// clones go under. Git's manifest limits bound the manifest read of both sources.
	Integration dbtsync.Integration
	Ref         string
	Commit      string // a push's commit, which must be ref's head ("": any)
	Credentials []byte
	Git         gitsource.Limits // gob leaves out the policy's resolver: the child uses the system's
	CloneDir    string
	// The child's own limits, set on itself before it reads any input.
	CPU           time.Duration
	Memory        int64 // GOMEMLIMIT; the address space limit is Memory plus addressHeadroom
	ProgressEvery int
	// The job's model selector (nil: none), applied to the input before conversion.
	Select, Exclude *string
	Selector        convert.SelectorLimits
}

// Frame kinds, in the order the child sends them.
const (
	frameLoaded   = "loaded"   // Total: the project's models
	frameProgress = "progress" // Done of Total models converted
	frameFile     = "file"     // File: one file of the result, in order
	frameDone     = "done"     // Warnings: the conversion is complete
	frameFailed   = "failed"   // Failure: the job's input failed to read or convert
)

// frame is one message of the child.
type frame struct {
	Kind     string
	Total    int
	Done     int
	File     convert.File
	Warnings []convert.Warning
	// Selection (frameDone): what the model selector kept and dropped (nil: no selector).
	Selection *convert.Selection
	Failure   failure
}

// failure is an error of the child as the worker needs it: the job failure's code and
// message when it has one, whether retrying cannot help, and the error's text (logged).
type failure struct {
	Code, Message string
	Permanent     bool
	Text          string
}
