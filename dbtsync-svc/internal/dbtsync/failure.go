package dbtsync

import (
	"errors"
	"fmt"
)

// JobFailure is why a job failed as its tenant is shown it: a stable code, and words
// that name only what the tenant controls (its manifest, its repository and its host,
// paths inside it, the limits it met). Every other error a job ends with (a store or
// queue out of reach, the worker's file system, a bug) is shown as CodeInternal with
// internalMessage; the worker logs its detail.
type JobFailure struct {
	Code    string
	Message string
}

func (f *JobFailure) Error() string { return f.Message }

// Failure is a JobFailure of code.
func Failure(code, format string, args ...any) error {
	return &JobFailure{Code: code, Message: fmt.Sprintf(format, args...)}
}

// The codes of failed jobs (SyncJob.errorCode, openapi.yaml's SyncJobErrorCode).
const (
	CodeInvalidManifest       = "invalid_manifest"        // the manifest is not JSON (duplicate names, invalid UTF-8), has no nodes, is no manifest, has an unsupported schema version, or a member of the wrong shape
	CodeInvalidProject        = "invalid_project"         // the dbt project files cannot be read or hold no model
	CodeRepositoryLimit       = "repository_limit"        // the repository is over a clone limit, or a link leads out of it
	CodeRepositoryRefused     = "repository_refused"      // the repository's URL is not one the platform clones
	CodeRepositoryUnavailable = "repository_unavailable"  // the git server cannot be reached, refuses the credentials, or has no such repository
	CodeRefNotFound           = "ref_not_found"           // the ref is neither a branch nor a tag of the repository
	CodeInputGone             = "input_gone"              // the uploaded manifest expired, or the integration was removed
	CodeJobTimeout            = "job_timeout"             // the job ran longer than DBT_SYNC_JOB_TIMEOUT
	CodeWorkLimit             = "work_limit"              // reading the input passed a work budget or a manifest read limit, or the isolated run met its CPU or memory limit
	CodeWorkerStopped         = "worker_stopped"          // the job's runs alone each stopped their worker
	CodeStorageQuota          = "storage_quota"           // the files result would pass a storage quota
	CodeSelectorNeedsManifest = "selector_needs_manifest" // the model selector has graph operators and the repository has no manifest at manifestPath
	CodeNothingSelected       = "nothing_selected"        // the model selector selects none of the project's models
	CodeCommitSuperseded      = "commit_superseded"       // a push's commit is no longer its branch's head: the newer push syncs the branch
	CodeInternal              = "internal_error"          // anything else: the detail is in the worker's log
)

// JobFailureCodes are the codes a failed job can carry.
var JobFailureCodes = []string{CodeInvalidManifest, CodeInvalidProject, CodeRepositoryLimit, CodeRepositoryRefused,
	CodeRepositoryUnavailable, CodeRefNotFound, CodeInputGone, CodeJobTimeout, CodeWorkLimit, CodeWorkerStopped, CodeStorageQuota,
	CodeSelectorNeedsManifest, CodeNothingSelected, CodeCommitSuperseded, CodeInternal}

// internalMessage is what a tenant reads of a job that failed on the platform's side.
const internalMessage = "the sync job failed on an error of the platform, not of its input; retry it, and if it keeps failing, contact support with the job id"

// PublicFailure is what a job's tenant is shown of err: its code and message, and
// whether err was the job's own failure (false: an internal error, whose detail only the
// worker's log may carry).
func PublicFailure(err error) (code, message string, own bool) {
	var f *JobFailure
	if errors.As(err, &f) {
		return f.Code, f.Message, true
	}
	return CodeInternal, internalMessage, false
}
