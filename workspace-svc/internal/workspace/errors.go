package workspace

import (
	"errors"
	"fmt"
)

// Kind classifies a domain failure; only the transport turns it into a status code.
type Kind int

// Failure kinds.
const (
	KindInvalid    Kind = iota + 1 // the request or the move is invalid
	KindForbidden                  // the caller lacks access
	KindNotFound                   // missing, or in another deployment or account
	KindConflict                   // the state forbids it (non-empty folder, no draft)
	KindBusy                       // the tree kept changing under us; retry
	KindTooLarge                   // a document of the request is over its size limit
	KindLimit                      // the deployment is at a configured limit
	KindNotApplied                 // a bulk move's item was not applied: the store failed or timed out
)

// Failure is a domain error with a client-facing message and, for a named rule, its
// stable code (httpx.Code*; "" takes the code of the kind's status).
type Failure struct {
	Kind    Kind
	Code    string
	Message string
}

func (f *Failure) Error() string { return f.Message }

// with sets the failure's code.
func (f *Failure) with(code string) *Failure {
	f.Code = code
	return f
}

func failf(k Kind, format string, args ...any) *Failure {
	return &Failure{Kind: k, Message: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) *Failure   { return failf(KindInvalid, format, args...) }
func forbiddenf(format string, args ...any) *Failure { return failf(KindForbidden, format, args...) }

func notFound(t ItemType, id int64) *Failure {
	return failf(KindNotFound, "%s %d not found", t.lower(), id)
}

// AsFailure returns the *Failure in err's chain.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}
