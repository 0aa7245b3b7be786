package embed

import (
	"errors"

	"github.com/analyticsco/platform/libs/errs"
)

// The service's errors are libs/errs errors, built with errs's shorthands (errs.Invalidf,
// errs.Forbiddenf, ...): the kind is the status the transport's one encoder
// (errs.Encoder) answers, a named rule adds its code (WithCode), the message is the
// client's.

// Sentinels the stores return; the service turns them into client errors.
var (
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate: a record with the same unique key exists.
	ErrDuplicate = errors.New("duplicate")
	// ErrLimitReached: the account's external-user counter is at its limit.
	ErrLimitReached = errors.New("external-user limit reached")
	// ErrUnavailable: the store could not be reached (the platform's one sentinel for it).
	ErrUnavailable = errs.ErrUnavailable
	// ErrSessionUnusable: a session id is unknown, expired or already exchanged.
	ErrSessionUnusable = errors.New("session id unusable")
	// ErrSessionRevoked: a reserved session id was revoked before its session was saved.
	ErrSessionRevoked = errors.New("session id revoked before it was saved")
	// ErrStale: the record changed since it was read (another write came first).
	ErrStale = errors.New("stale revision")
	// ErrUserDeleting: a delete of the external user has begun.
	ErrUserDeleting = errors.New("external user being deleted")
	// ErrOutOfReach: the external user has a recorded deployment outside the update's
	// UserUpdate.Within.
	ErrOutOfReach = errors.New("external user outside the key's deployments")
	// ErrLiveSessionLimit: the account has as many live sessions as it may.
	ErrLiveSessionLimit = errors.New("live session limit reached")
)

// ErrSessionID is the one answer for every unusable session id, so a caller learns
// nothing about which ids existed.
var ErrSessionID = errs.Unauthorizedf("session id is invalid, expired or already used").WithCode(errs.CodeSessionIDInvalid)

// storeErr is the client's answer to a store's error: an unreachable store is a 503
// that says so (its cause kept for the log: errs.Write logs it); a client error passes
// through; anything else stays a bug (500).
func storeErr(err error) error {
	if _, ok := errs.As(err); ok {
		return err
	}
	if errors.Is(err, ErrUnavailable) {
		return errors.Join(errs.Unavailablef("a backing store is unavailable; retry shortly"), err)
	}
	return err
}
