package embed

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// maxUserWrites bounds the attempts of one mint to write its user while concurrent mints
// of the same user keep writing it first (each attempt but one of every round wins).
const maxUserWrites = 16

// readUser reads the mint's external user, with the values of the mint's scope (what
// the mint may overwrite), into m; a user that does not exist yet is an empty one. A
// user with a session in a deployment outside the caller's reach is 403
// key_out_of_scope, whatever the mint would write: a scoped key neither reads nor
// changes what another deployment's sessions are built from.
func (s *service) readUser(ctx context.Context, accountID int64, m *mintPlan) error {
	u, err := s.d.Users.ExternalUser(ctx, accountID, m.externalID, m.scope)
	switch {
	case errors.Is(err, ErrNotFound):
		m.user, m.userExists = ExternalUser{AccountID: accountID, ExternalID: m.externalID}, false
	case err != nil:
		return storeErr(err)
	case u.Deleting:
		return userDeleting(m.externalID)
	case !m.reach.coversUser(u.Deployments):
		return userOutOfScope(m.externalID)
	default:
		m.user, m.userExists = u, true
	}
	return nil
}

// userDeleting is the answer to a mint for a user whose delete has begun: the delete
// wins; a mint after it has finished makes a new user.
func userDeleting(externalID string) error {
	return errs.Conflictf("external user %q is being deleted; mint again once the delete has finished", externalID).WithCode(errs.CodeExternalUserDeleting)
}

// confirmUser lets a delete of the mint's user that began while the mint wrote win. A
// delete marks the user before it revokes the user's sessions, and the mint stored its
// session before this read: a user found unmarked was marked (if ever) after the session
// was stored, so the delete's revoke finds it; a user found marked, gone or made again
// (another id) has the mint revoke its own session.
func (s *service) confirmUser(ctx context.Context, accountID int64, sess Session) error {
	u, err := s.d.Users.ExternalUser(ctx, accountID, *sess.User.ExternalID)
	if err == nil && !u.Deleting && u.ID == sess.User.ID {
		return nil
	}
	if _, rerr := s.d.Sessions.RevokeSIDs(ctx, accountID, []string{sess.SID}); rerr != nil {
		return storeErr(rerr)
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return storeErr(err) // unknown: the session is revoked to be safe
	}
	return userDeleting(*sess.User.ExternalID)
}

// provisionExternalUser writes a mint's changes onto its external user, creating the
// user within the account's limit, and returns the user as written and whether this mint
// created it. The update is computed from the user as last read and is written only if
// no other write came first (the user's revision); otherwise the user is read again and
// the update computed again, so the bound on the user's stored values holds under
// concurrent mints. A scoped key's update is conditional on the user's deployments too
// (UserUpdate.Within): a user that another deployment's mint reached since it was read is
// refused, not written.
func (s *service) provisionExternalUser(ctx context.Context, p *identity.Principal, m *mintPlan, upd UserUpdate, now time.Time) (ExternalUser, bool, error) {
	limit := externalUserLimit(p)
	for attempt := 1; ; attempt++ {
		upd.AttributeBytes = attributeBytesAfter(m.user, upd)
		upd.Memberships = membershipsAfter(m.user, upd)
		if err := s.limits.checkUserAttributes(m.externalID, m.user.AttributeBytes, upd.AttributeBytes); err != nil {
			return ExternalUser{}, false, err
		}
		var u ExternalUser
		var err error
		if m.userExists {
			err = s.d.Users.UpdateExternalUser(ctx, p.Account.ID, m.externalID, upd, m.user.Rev, now)
			u = applyUserUpdate(m.user, upd) // what the user now is: the update was made on it
		} else {
			u, err = s.d.Users.CreateExternalUser(ctx, p.Account.ID, m.externalID, limit, upd, now)
		}
		if err == nil {
			return u, !m.userExists, nil
		}
		if errors.Is(err, ErrUserDeleting) {
			return ExternalUser{}, false, userDeleting(m.externalID)
		}
		if errors.Is(err, ErrOutOfReach) {
			return ExternalUser{}, false, userOutOfScope(m.externalID)
		}
		// Another mint wrote the user first, deleted it, created it or took the last place
		// under the limit: read the user again.
		if !errors.Is(err, ErrStale) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrLimitReached) {
			return ExternalUser{}, false, storeErr(err)
		}
		if attempt == maxUserWrites {
			return ExternalUser{}, false, errs.Conflictf("external user %q is being changed by concurrent requests; retry", m.externalID)
		}
		atLimit := errors.Is(err, ErrLimitReached)
		if err := s.readUser(ctx, p.Account.ID, m); err != nil {
			return ExternalUser{}, false, err
		}
		if atLimit && !m.userExists {
			return ExternalUser{}, false, limitReached(limit)
		}
	}
}

// setExternalUser makes u the session's user, with the profile as written.
func (s *Session) setExternalUser(u ExternalUser) {
	ext := u.ExternalID
	s.User = SessionUser{Kind: "external", ID: u.ID, ExternalID: &ext, Email: u.Email, DisplayName: u.DisplayName, Picture: u.Picture}
}

// stored is the session as Redis keeps it: its user without the profile, which the
// session's record keeps.
func (s Session) stored() Session {
	s.User.Email, s.User.DisplayName, s.User.Picture = nil, nil, nil
	s.SecurityContext = nil
	return s
}
