package natsx

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/libs/errs"
)

// The request-reply wire, both sides of it in this package (Serve, Endpoint):
//
//   - a request is its JSON body; its headers carry the trace context (W3C traceparent)
//     and the caller's remaining time (timeoutHeader, a Go duration such as "1.5s");
//   - a reply is the handler's answer as JSON, or an error answer: errorCodeHeader set to
//     its status (and errorHeader to its message), the names of NATS's micro services,
//     and for body errs' model {"status", "code", "message"} plus "reason" (busy,
//     timeout) when the server, not the handler, refused it.
const (
	errorCodeHeader = "Nats-Service-Error-Code"
	errorHeader     = "Nats-Service-Error"
	timeoutHeader   = "Request-Timeout"
)

// Why a server answered an error without its handler's say: a closed set.
const (
	reasonBusy    = "busy"
	reasonTimeout = "timeout"
)

// ErrBusy marks an error answer of a server with as many requests in flight as its cap
// (ServerOptions.MaxInFlight): nothing was done; another replica, or the same one a
// moment later, may answer. An Endpoint retries it within its caller's deadline.
var ErrBusy = errors.New("the server is busy")

// ErrHandlerTimeout marks an error answer of a server whose handler did not finish
// within its timeout (ServerOptions.Timeout, or what the caller had left).
var ErrHandlerTimeout = errors.New("the handler did not answer within its timeout")

// wireError is an error answer's body.
type wireError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
}

// errorReply is the reply message carrying w.
func errorReply(w wireError) *nats.Msg {
	msg := nats.NewMsg("")
	msg.Header.Set(errorCodeHeader, strconv.Itoa(w.Status))
	msg.Header.Set(errorHeader, w.Message)
	msg.Data, _ = json.Marshal(w)
	return msg
}

// remoteError is the typed error of an error answer: an *errs.Error of the status's kind
// with the server's code and message, joined with ErrBusy or ErrHandlerTimeout when the
// server gave that reason. A server's failure (5xx) is, for its caller, a dependency
// unavailable: kind Unavailable, and it wraps errs.ErrUnavailable.
func remoteError(subject string, resp *nats.Msg) error {
	var w wireError
	if err := json.Unmarshal(resp.Data, &w); err != nil || w.Status < 400 || w.Status > 599 {
		return errors.Join(errs.ErrUnavailable, fmt.Errorf("%s: an unreadable error answer", subject))
	}
	e := &errs.Error{Kind: errs.KindOf(w.Status), Code: w.Code, Message: w.Message}
	if errs.Status(e.Kind) != w.Status {
		e.Code = "" // a status without a kind of its own: its code would not match the kind's status
	}
	if e.Kind != errs.Unavailable {
		return e
	}
	switch w.Reason {
	case reasonBusy:
		return errors.Join(e, ErrBusy, errs.ErrUnavailable)
	case reasonTimeout:
		return errors.Join(e, ErrHandlerTimeout, errs.ErrUnavailable)
	}
	return errors.Join(e, errs.ErrUnavailable)
}

// callerTimeout is what the caller had left when it sent m (0: it did not say).
func callerTimeout(m *nats.Msg) time.Duration {
	if m.Header == nil {
		return 0
	}
	d, err := time.ParseDuration(m.Header.Get(timeoutHeader))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// backoff is a pause before the next attempt: half to all of wait (so callers that
// failed together do not retry together), and the next wait, doubled up to a limit.
func backoff(wait time.Duration) (pause, next time.Duration) {
	return wait/2 + rand.N(wait/2+1), min(wait*2, 500*time.Millisecond)
}
