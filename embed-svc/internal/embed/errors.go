package embed

import (
	"errors"
	"fmt"

	"github.com/analyticsco/platform/libs/httpx"
)

// Kind classifies a domain error; only the transport turns it into a status code.
type Kind int

// Error kinds.
const (
	KindInvalid      Kind = iota + 1 // the request is malformed or breaks a rule
	KindUnauthorized                 // the credential (a session id) is not valid
	KindForbidden                    // the caller may not do this
	KindNotFound                     // the thing does not exist for this caller
	KindConflict                     // the request contradicts stored state
	KindUnavailable                  // a dependency cannot be reached
	KindTooLarge                     // a part of the request is over its size limit
)

// Error is a domain error with a client-facing message and, for a named rule, its stable
// code (httpx.Code*; "" takes the code of the kind's status).
type Error struct {
	Kind    Kind
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Coded sets the code of err when it is an *Error, and returns it.
func Coded(err error, code string) error {
	if e, ok := err.(*Error); ok {
		e.Code = code
	}
	return err
}

func errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns a KindInvalid error.
func Invalid(format string, args ...any) error { return errorf(KindInvalid, format, args...) }

// Forbidden returns a KindForbidden error.
func Forbidden(format string, args ...any) error { return errorf(KindForbidden, format, args...) }

// NotFound returns a KindNotFound error.
func NotFound(format string, args ...any) error { return errorf(KindNotFound, format, args...) }

// Conflict returns a KindConflict error.
func Conflict(format string, args ...any) error { return errorf(KindConflict, format, args...) }

// TooLarge returns a KindTooLarge error.
func TooLarge(format string, args ...any) error { return errorf(KindTooLarge, format, args...) }

// Unavailable returns a KindUnavailable error.
func Unavailable(format string, args ...any) error { return errorf(KindUnavailable, format, args...) }

// Sentinels the stores return; the service turns them into client errors.
var (
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate: a record with the same unique key exists.
	ErrDuplicate = errors.New("duplicate")
	// ErrLimitReached: the account's external-user counter is at its limit.
	ErrLimitReached = errors.New("external-user limit reached")
	// ErrUnavailable: the store could not be reached.
	ErrUnavailable = errors.New("store unavailable")
	// ErrSessionUnusable: a session id is unknown, expired or already exchanged.
	ErrSessionUnusable = errors.New("session id unusable")
)

// ErrSessionID is the one answer for every unusable session id, so a caller learns
// nothing about which ids existed.
var ErrSessionID = &Error{Kind: KindUnauthorized, Code: httpx.CodeSessionIDInvalid, Message: "session id is invalid, expired or already used"}
