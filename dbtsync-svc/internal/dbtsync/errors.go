package dbtsync

import (
	"errors"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Sentinels of the ports. ErrNotFound is turned into client errors by the service; the
// unavailability errors travel to the transport as they are (503 with Retry-After,
// their cause logged there). They are shared values: compare with errors.Is, never
// change them.
var (
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("not found")
	// ErrQueueUnavailable: NATS JetStream (the job queue, job state, manifests) cannot be
	// reached. Adapters wrap their errors with it (QueueUnavailable).
	ErrQueueUnavailable = errs.New(errs.Unavailable, "the dbt sync job queue (NATS) is unavailable; retry shortly")
	// ErrStoreUnavailable: MongoDB (branches, integrations) cannot be reached.
	ErrStoreUnavailable = errs.New(errs.Unavailable, "a dependency of dbtsync-svc is unavailable; retry shortly")
	// ErrRoleRequired marks a caller refused for its role alone (403): the operation is
	// not one it may use at all.
	ErrRoleRequired = errors.New("the caller's role does not allow the operation")
	// ErrJobLimit: the deployment's queue holds its limit of jobs queued or running.
	ErrJobLimit = errors.New("the deployment's queue is full")
	// ErrBadCursor: a list cursor the list did not return.
	ErrBadCursor = httpx.ErrBadCursor
)

// QueueUnavailable wraps an error of the job queue's server: it is ErrQueueUnavailable
// (and errs.ErrUnavailable), and keeps the cause for the log.
func QueueUnavailable(cause error) error {
	if errors.Is(cause, ErrQueueUnavailable) {
		return cause
	}
	return &unavailableError{kind: ErrQueueUnavailable, what: "job queue (NATS)", cause: cause}
}

// StoreUnavailable wraps an error of the branch store's server: it is
// ErrStoreUnavailable (and errs.ErrUnavailable), and keeps the cause for the log.
func StoreUnavailable(cause error) error {
	return &unavailableError{kind: ErrStoreUnavailable, what: "data-model store (MongoDB)", cause: cause}
}

// unavailableError is a port's server out of reach: the client is answered kind (a 503
// with Retry-After), a log or a failed job's error reads what failed and why.
type unavailableError struct {
	kind  *errs.Error
	what  string
	cause error
}

func (e *unavailableError) Error() string   { return e.what + " unavailable: " + e.cause.Error() }
func (e *unavailableError) Unwrap() []error { return []error{e.kind, errs.ErrUnavailable, e.cause} }

// authorize refuses a caller below role.
func authorize(p *identity.Principal, role string) error {
	if p == nil || p.User == nil || !p.HasRole(role) {
		return roleRefusal{errs.New(errs.Forbidden, "requires the %s role or higher", role)}
	}
	return nil
}

// roleRefusal is the 403 of a caller below an operation's role: an *errs.Error that is
// also ErrRoleRequired.
type roleRefusal struct{ e *errs.Error }

func (r roleRefusal) Error() string      { return r.e.Message }
func (r roleRefusal) Unwrap() error      { return r.e }
func (roleRefusal) Is(target error) bool { return target == ErrRoleRequired }

// PermanentError fails a job at once: retrying cannot help (a malformed manifest, an
// unknown ref, a repository over its limits).
type PermanentError struct{ Err error }

func (e PermanentError) Error() string { return e.Err.Error() }
func (e PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as a PermanentError.
func Permanent(err error) error { return PermanentError{Err: err} }

// IsPermanent reports whether err is a PermanentError.
func IsPermanent(err error) bool {
	var p PermanentError
	return errors.As(err, &p)
}
