package dbtsync

import (
	"errors"
	"fmt"

	"github.com/analyticsco/platform/libs/identity"
)

// Kind classifies a domain error; only the transport turns it into a status code.
type Kind int

// Error kinds.
const (
	KindInvalid   Kind = iota + 1 // the request breaks a rule
	KindForbidden                 // the caller's role does not allow it
	KindNotFound                  // the thing does not exist in the caller's deployment
	KindConflict                  // the thing's state does not allow it (a finished job canceled)
)

// Error is a domain error with a client-facing message.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error   { return errorf(KindInvalid, format, args...) }
func forbidden(format string, args ...any) error { return errorf(KindForbidden, format, args...) }
func notFound(format string, args ...any) error  { return errorf(KindNotFound, format, args...) }
func conflict(format string, args ...any) error  { return errorf(KindConflict, format, args...) }

// Sentinels the stores return; the service turns ErrNotFound into client errors, the
// unavailability ones travel to the transport as they are.
var (
	ErrNotFound    = errors.New("not found")
	ErrUnavailable = errors.New("storage unavailable")
	// ErrQueueUnavailable is NATS (job queue, job state, manifests) out of reach; it is also
	// an ErrUnavailable.
	ErrQueueUnavailable = fmt.Errorf("%w: the job queue (NATS JetStream)", ErrUnavailable)
)

// authorize refuses a caller below role.
func authorize(p *identity.Principal, role string) error {
	if p == nil || p.User == nil || !p.HasRole(role) {
		return forbidden("requires the %s role or higher", role)
	}
	return nil
}
