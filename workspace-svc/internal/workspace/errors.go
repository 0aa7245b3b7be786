package workspace

import (
	"github.com/analyticsco/platform/libs/errs"
)

// The domain's errors are libs/errs errors: a kind (what went wrong), the code of the
// named rule that refused the request, if any, and the client-facing message. Only the
// transport turns them into statuses (errs.Encoder).

func invalidf(format string, args ...any) *errs.Error { return errs.New(errs.Invalid, format, args...) }
func forbiddenf(format string, args ...any) *errs.Error {
	return errs.New(errs.Forbidden, format, args...)
}
func conflictf(format string, args ...any) *errs.Error {
	return errs.New(errs.Conflict, format, args...)
}

// busyf: the tree (or an item) kept changing under the request; the client retries.
func busyf(format string, args ...any) *errs.Error {
	return errs.New(errs.Unavailable, format, args...)
}

// notAppliedf: a bulk move's item the store's failure (or its deadline) left unmoved.
func notAppliedf(format string, args ...any) *errs.Error {
	return errs.New(errs.Unavailable, format, args...).WithCode(errs.CodeNotApplied)
}

func notFound(t ItemType, id int64) *errs.Error {
	return errs.New(errs.NotFound, "%s %d not found", t.lower(), id)
}
