// Package errs is the error model every service shares: a domain error has a kind (what
// went wrong, in the domain's terms), a stable code when a named rule refused it, and a
// message for the client. Only the transport turns a kind into an HTTP status (Status),
// and Write is every service's one error encoder: the JSON error body for client errors,
// 503 with Retry-After for an unavailable dependency, and a logged 500 that says nothing
// else for the rest.
package errs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/analyticsco/platform/libs/logging"
)

// Kind classifies a domain error.
type Kind int

// The kinds, with the status each is answered with.
const (
	Invalid      Kind = iota + 1 // 400: the request is malformed or breaks a rule
	Unauthorized                 // 401: the credential (a session id, a token) is not valid
	Forbidden                    // 403: the caller may not do this
	NotFound                     // 404: no such thing for this caller
	Conflict                     // 409: the request contradicts the stored state
	TooLarge                     // 413: a part of the request is over its size limit
	Unavailable                  // 503: a dependency cannot be reached; retry
)

// Status is the HTTP status of kind k (500 for an unknown kind).
func Status(k Kind) int {
	switch k {
	case Invalid:
		return http.StatusBadRequest
	case Unauthorized:
		return http.StatusUnauthorized
	case Forbidden:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case Conflict:
		return http.StatusConflict
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// KindOf is the kind answered with status, the inverse of Status: any other client
// error is Invalid, any other server error Unavailable.
func KindOf(status int) Kind {
	for k := Invalid; k <= Unavailable; k++ {
		if Status(k) == status {
			return k
		}
	}
	if status >= 500 {
		return Unavailable
	}
	return Invalid
}

// Error is the one error type of every service and of the gateway: a domain error with
// a client-facing message and, for a named rule, its code (one of the codes in codes.go;
// "" takes the code of the status). A transport's refusal that no kind names (a 415, a
// 408, a limit's 429) sets Status beside the kind that status falls in (Statusf), and an
// answer that needs header fields beside the body carries them in Header (WithHeader).
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Status  int         // the answer's status where it is not the kind's; 0: Status(Kind)
	Header  http.Header // fields the answer carries, set over those Write sets itself
}

func (e *Error) Error() string { return e.Message }

// StatusCode is the status e is answered with (go-kit's StatusCoder).
func (e *Error) StatusCode() int {
	if e.Status != 0 {
		return e.Status
	}
	return Status(e.Kind)
}

// New builds an *Error of kind k.
func New(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// One shorthand per kind, the domains' one way to build their errors (a named rule adds
// its code with WithCode).

// Invalidf is a 400: the request is malformed or breaks a rule.
func Invalidf(format string, args ...any) *Error { return New(Invalid, format, args...) }

// Unauthorizedf is a 401: the credential (a session id, a token) is not valid.
func Unauthorizedf(format string, args ...any) *Error { return New(Unauthorized, format, args...) }

// Forbiddenf is a 403: the caller may not do this.
func Forbiddenf(format string, args ...any) *Error { return New(Forbidden, format, args...) }

// NotFoundf is a 404: no such thing for this caller.
func NotFoundf(format string, args ...any) *Error { return New(NotFound, format, args...) }

// Conflictf is a 409: the request contradicts the stored state.
func Conflictf(format string, args ...any) *Error { return New(Conflict, format, args...) }

// TooLargef is a 413: a part of the request is over its size limit.
func TooLargef(format string, args ...any) *Error { return New(TooLarge, format, args...) }

// Unavailablef is a 503 the domain names (a store that cannot be reached, a tree that
// kept changing); the client retries.
func Unavailablef(format string, args ...any) *Error { return New(Unavailable, format, args...) }

// Statusf is an error answered with status, for a refusal no kind names (415: the body
// is not JSON; 429: a limit of requests or jobs in flight); its kind is the status's
// (KindOf).
func Statusf(status int, format string, args ...any) *Error {
	e := New(KindOf(status), format, args...)
	e.Status = status
	return e
}

// WithCode sets the error's code and returns it.
func (e *Error) WithCode(code string) *Error {
	e.Code = code
	return e
}

// WithHeader adds the header field key: value to the error's answer and returns it.
func (e *Error) WithHeader(key, value string) *Error {
	if e.Header == nil {
		e.Header = http.Header{}
	}
	e.Header.Add(key, value)
	return e
}

// As returns the *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// ErrUnavailable marks an error of a dependency that could not be reached (a store, a
// queue): Write answers it 503 with Retry-After. Adapters wrap their driver's errors
// with it (errors.Join or %w): errs knows no driver, so a driver error nobody wrapped is
// a 500.
var ErrUnavailable = errors.New("a dependency is unavailable")

// Answer is what a request that failed with err is answered: status, code and message.
// ok is false for an error no client caused (the caller logs it; the answer is a 500).
func Answer(err error) (status int, code, message string, ok bool) {
	if e, isErr := As(err); isErr {
		status = e.StatusCode()
		code = e.Code
		if code == "" {
			code = DefaultCode(status)
		}
		return status, code, e.Message, true
	}
	if IsUnavailable(err) {
		return http.StatusServiceUnavailable, CodeUnavailable, "a dependency of the service is unavailable; retry shortly", true
	}
	return http.StatusInternalServerError, CodeInternal, "", false
}

// IsUnavailable reports whether err means a dependency could not be reached (or did not
// answer in time), as opposed to a bad request or a bug.
func IsUnavailable(err error) bool {
	if e, ok := As(err); ok {
		return e.Kind == Unavailable
	}
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// Write writes err as the JSON error body: a 401 says how to authenticate
// (WWW-Authenticate), a 503 when to retry (Retry-After), and a dependency's failure
// (ErrUnavailable in err's chain) is logged; an error no client caused is logged with the
// request id and answered 500 "internal error".
func Write(ctx context.Context, w http.ResponseWriter, logger *slog.Logger, err error) {
	status, code, msg, ok := Answer(err)
	if !ok {
		Internal(ctx, w, logger, err)
		return
	}
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="platform"`)
	case http.StatusServiceUnavailable:
		// A dependency's failure is logged with its cause, also when the domain named it
		// for the client (a domain error beside ErrUnavailable); a 503 the domain decided
		// alone (a tree that kept changing) is not a failure to log.
		if _, domain := As(err); !domain || errors.Is(err, ErrUnavailable) {
			logger.WarnContext(ctx, "dependency unavailable", "err", err)
		}
		w.Header().Set("Retry-After", "1")
	}
	if e, isErr := As(err); isErr {
		for k, v := range e.Header {
			w.Header()[k] = v
		}
	}
	WriteBody(w, status, code, msg)
}

// Body is the JSON error body: {"status": 404, "code": "not_found", "message": "folder
// 12 not found"}. It is what a client decodes, and what a bulk answer's failed items
// carry (BodyOf); an error is built as an *Error, never as a Body.
type Body struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// BodyOf is the body err is answered with (Answer's status, code and message).
func BodyOf(err error) Body {
	status, code, message, _ := Answer(err)
	return Body{Status: status, Code: code, Message: message}
}

// WriteBody writes the JSON error body {"status", "code", "message"} ("" code: the code
// of the status).
func WriteBody(w http.ResponseWriter, status int, code, message string) {
	if code == "" {
		code = DefaultCode(status)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // an API answer, not HTML: "<token>" stays readable
	_ = enc.Encode(Body{Status: status, Code: code, Message: message})
}

// Internal logs err with its request id (and attrs) and answers a 500 that reveals
// nothing else.
func Internal(ctx context.Context, w http.ResponseWriter, logger *slog.Logger, err error, attrs ...any) {
	logger.ErrorContext(ctx, "internal error", append([]any{"err", err}, attrs...)...)
	WriteBody(w, http.StatusInternalServerError, "", "internal error (request id "+logging.RequestID(ctx)+")")
}

// Encoder is Write for a logger, in the shape of go-kit's ServerErrorEncoder.
func Encoder(logger *slog.Logger) func(ctx context.Context, err error, w http.ResponseWriter) {
	return func(ctx context.Context, err error, w http.ResponseWriter) { Write(ctx, w, logger, err) }
}
