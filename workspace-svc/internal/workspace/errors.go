package workspace

import (
	"github.com/analyticsco/platform/libs/errs"
)

// The domain's errors are libs/errs errors: a kind (what went wrong), the code of the
// named rule that refused the request, if any, and the client-facing message. Only the
// transport turns them into statuses (errs.Encoder). They are built with errs's
// shorthands (errs.Invalidf, errs.Forbiddenf, ...; errs.Unavailablef when the tree kept
// changing under a request and the client retries); the ones below carry more.

// notAppliedf: a bulk move's item the store's failure (or its deadline) left unmoved.
func notAppliedf(format string, args ...any) *errs.Error {
	return errs.New(errs.Unavailable, format, args...).WithCode(errs.CodeNotApplied)
}

func notFound(t ItemType, id int64) *errs.Error {
	return errs.New(errs.NotFound, "%s %d not found", t.lower(), id)
}

// keyTaken: a create or a key change whose key a live item of the type holds
// (ErrKeyTaken).
func keyTaken(t ItemType, key string) *errs.Error {
	return errs.New(errs.Conflict, "a live %s of this deployment has the key %q already", t.lower(), key).WithCode(errs.CodeKeyTaken)
}

// versionConflict: expectedVersion is not the item's version.
func versionConflict(t ItemType, id, want, got int64) *errs.Error {
	return errs.New(errs.Conflict, "%s %d is at version %d, not the expected version %d", t.lower(), id, got, want).WithCode(errs.CodeVersionConflict)
}

// idTaken: a create whose allocated id turned out to be another item's (ErrIDTaken).
// Nothing was stored and the next id is a fresh one, so the client retries.
func idTaken(t ItemType, id int64) *errs.Error {
	return errs.Unavailablef("the %s was not created: the id allocated for it, %d, is another item's; retry", t.lower(), id)
}
