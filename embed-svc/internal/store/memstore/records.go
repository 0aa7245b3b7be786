package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// InsertSessionRecord stores a minted session's record; embed.ErrDuplicate when its id
// or sid is taken.
func (s *Store) InsertSessionRecord(_ context.Context, r embed.SessionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.records {
		if x.ID == r.ID || x.SID == r.SID {
			return embed.ErrDuplicate
		}
	}
	r = copyRecord(r)
	r.CreatedAt, r.PendingUntil, r.ExpiresAt = stored(r.CreatedAt), stored(r.PendingUntil), stored(r.ExpiresAt)
	s.records[r.ID] = r
	return nil
}

func copyRecord(r embed.SessionRecord) embed.SessionRecord {
	r.User.ExternalID, r.User.Username = copyString(r.User.ExternalID), copyString(r.User.Username)
	if r.Profile != nil {
		r.Profile = &embed.SessionProfile{Email: copyString(r.Profile.Email), DisplayName: copyString(r.Profile.DisplayName), Picture: copyString(r.Profile.Picture)}
	}
	r.SecurityContext = slices.Clone(r.SecurityContext)
	return r
}

// listed is a record as a listing reads it: without what the session shows.
func listed(r embed.SessionRecord) embed.SessionRecord {
	r = copyRecord(r)
	r.Profile, r.SecurityContext = nil, nil
	return r
}

// SessionRecordBySID reads a session's record by its sid, in any account.
func (s *Store) SessionRecordBySID(_ context.Context, sid string) (embed.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if r.SID == sid {
			return copyRecord(r), nil
		}
	}
	return embed.SessionRecord{}, embed.ErrNotFound
}

// matches is mongostore's query of q for the account at now: a state is narrowed by
// time only (what the record knows).
func (s *Store) matches(r embed.SessionRecord, accountID int64, q embed.SessionQuery, now time.Time) bool {
	switch {
	case r.AccountID != accountID || !r.ExpiresAt.Add(s.retention).After(now):
		return false
	case q.ID != "" && r.ID != q.ID, q.DeploymentID > 0 && r.DeploymentID != q.DeploymentID, q.Tenant != "" && r.Tenant != q.Tenant:
		return false
	case q.DeploymentID == 0 && q.Deployments != nil && !slices.Contains(q.Deployments, r.DeploymentID):
		return false
	case q.ExternalID != "" && (r.User.Kind != "external" || r.User.ExternalID == nil || *r.User.ExternalID != q.ExternalID):
		return false
	case q.InternalID != "" && (r.User.Kind != "internal" || r.User.Username == nil || *r.User.Username != q.InternalID):
		return false
	case (q.State == embed.StateActive || q.State == embed.StateRevoked) && !r.ExpiresAt.After(now):
		return false
	case q.State == embed.StatePending && !r.PendingUntil.After(now):
		return false
	}
	return q.After.IsZero() || r.CreatedAt.Before(q.After.CreatedAt) || (r.CreatedAt.Equal(q.After.CreatedAt) && r.ID < q.After.ID)
}

// newestFirst orders records by creation, then id, newest first.
func newestFirst(a, b embed.SessionRecord) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// ListSessionRecords returns up to limit of the account's records, newest first, after
// after (the one with id when id is set).
func (s *Store) ListSessionRecords(_ context.Context, accountID int64, id string, after embed.SessionCursor, now time.Time, limit int) ([]embed.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []embed.SessionRecord
	for _, r := range s.records {
		if s.matches(r, accountID, embed.SessionQuery{ID: id, After: after}, now) {
			out = append(out, listed(r))
		}
	}
	slices.SortFunc(out, newestFirst)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// EachRevocable calls fn with batches of the matching records whose token has not
// expired at now (id, sid and account only, as mongostore reads them).
func (s *Store) EachRevocable(_ context.Context, accountID int64, q embed.SessionQuery, now time.Time, batch int, fn func([]embed.SessionRecord) error) error {
	q.State = ""
	s.mu.Lock()
	var all []embed.SessionRecord
	for _, r := range s.records {
		if s.matches(r, accountID, q, now) && r.ExpiresAt.After(now) {
			all = append(all, embed.SessionRecord{ID: r.ID, SID: r.SID, AccountID: accountID})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b embed.SessionRecord) int { return strings.Compare(a.ID, b.ID) })
	for len(all) > 0 {
		n := min(batch, len(all))
		if err := fn(all[:n:n]); err != nil {
			return err
		}
		all = all[n:]
	}
	return nil
}
