package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// errRepoTooLarge: the server sent more than the repository size limit.
var errRepoTooLarge = errors.New("repository over the size limit")

// cloneFailure turns a clone error into a message naming the host and the kind of
// failure, never the server's own words (they would make the clone an oracle for whatever
// the URL reaches). A failure retrying cannot mend is permanent.
func cloneFailure(ctx context.Context, host, ref string, err error, l Limits) error {
	var refused *dbtsync.RepositoryRefusedError
	var limit *limitError
	var work *workLimitError
	switch {
	case errors.As(err, &refused):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryRefused, "%s", refused.Reason))
	case errors.As(err, &work):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeWorkLimit, "%s", work.msg))
	case errors.As(err, &limit):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "%s", limit.msg))
	case errors.Is(err, errMalformedPack):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryUnavailable, "the repository at %s sent objects that are not a git pack this platform reads", host))
	case errors.Is(err, errAdvertTooLarge) || strings.Contains(err.Error(), errAdvertTooLarge.Error()):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "the repository at %s lists references over the limit of %d bytes for its list of references", host, l.MaxRefAdverts))
	case errors.Is(err, errRepoTooLarge):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "the repository at %s is over the size limit of %d bytes", host, l.MaxRepoBytes))
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryUnavailable, "cloning from %s took longer than the limit of %s", host, l.CloneTimeout))
	case errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryUnavailable, "git server %s refused the credentials", host))
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryUnavailable, "no repository at %s under that path", host))
	case errors.Is(err, plumbing.ErrReferenceNotFound) || strings.Contains(err.Error(), "couldn't find remote ref") || strings.Contains(err.Error(), "reference not found"):
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRefNotFound, "git ref %q not found in the repository at %s", ref, host))
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("%w: %w", dbtsync.Failure(dbtsync.CodeRepositoryUnavailable, "git server %s cannot be reached (network error)", host), err)
	}
	// The error stays in the worker's log (it may name the worker's paths); the job says
	// what failed.
	return fmt.Errorf("%w: %w", dbtsync.Failure(dbtsync.CodeRepositoryUnavailable, "cloning from %s failed (the server's answer is not a git repository we can read)", host), err)
}
