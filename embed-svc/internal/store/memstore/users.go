package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// ExternalUser reads one user, with the memberships and values of scopes only.
func (s *Store) ExternalUser(_ context.Context, accountID int64, externalID string, scopes ...string) (embed.ExternalUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[userKey{accountID, externalID}]
	if !ok {
		return embed.ExternalUser{}, embed.ErrNotFound
	}
	return copyUser(u, scopes...), nil
}

// apply writes one mint's changes onto u, as mongostore's update document does.
func apply(u *embed.ExternalUser, upd embed.UserUpdate, now time.Time) error {
	u.UpdatedAt = stored(now)
	if upd.Email != nil {
		u.Email = copyString(upd.Email)
	}
	if upd.DisplayName != nil {
		u.DisplayName = copyString(upd.DisplayName)
	}
	if upd.Picture != nil {
		u.Picture = copyString(upd.Picture)
	}
	if upd.Groups != nil {
		if u.Groups == nil {
			u.Groups = map[string]map[string]string{}
		}
		u.Groups[upd.Scope] = map[string]string{}
		for id, name := range upd.Groups {
			u.Groups[upd.Scope][id] = name
		}
	}
	if len(upd.SetAttributes) > 0 && u.Attributes[upd.Scope] == nil {
		u.Attributes[upd.Scope] = map[string]embed.StoredValue{}
	}
	for id, v := range upd.SetAttributes {
		raw, err := normalized(v.Value)
		if err != nil {
			return err
		}
		u.Attributes[upd.Scope][id] = embed.StoredValue{Name: v.Name, Value: raw}
	}
	for _, id := range upd.ClearAttributes {
		delete(u.Attributes[upd.Scope], id)
	}
	if upd.Tenant != "" && !slices.Contains(u.Tenants, upd.Tenant) {
		u.Tenants = append(u.Tenants, upd.Tenant)
	}
	if upd.Deployment != 0 && !slices.Contains(u.Deployments, upd.Deployment) {
		u.Deployments = append(u.Deployments, upd.Deployment)
	}
	u.AttributeBytes = upd.AttributeBytes
	return nil
}

// UpdateExternalUser applies u to a known user at revision rev (embed.ErrNotFound when
// there is none, embed.ErrOutOfReach when it has a deployment outside u.Within,
// embed.ErrStale when it is at another revision).
func (s *Store) UpdateExternalUser(_ context.Context, accountID int64, externalID string, upd embed.UserUpdate, rev int64, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[userKey{accountID, externalID}]
	if !ok {
		return embed.ErrNotFound
	}
	if u.Deleting {
		return embed.ErrUserDeleting
	}
	if upd.Within != nil && (len(u.Deployments) == 0 || slices.ContainsFunc(u.Deployments, func(d int64) bool { return !slices.Contains(upd.Within, d) })) {
		return embed.ErrOutOfReach
	}
	if u.Rev != rev {
		return embed.ErrStale
	}
	next := copyUser(u, allScopes(u)...)
	if err := apply(&next, upd, now); err != nil {
		return err
	}
	next.Rev++
	*u = next
	return nil
}

// CreateExternalUser takes a place under the account's limit (embed.ErrLimitReached when
// there is none, even for a user that exists: the place is taken first, as in MongoDB)
// and creates the user; one that exists is embed.ErrStale, its place given back.
func (s *Store) CreateExternalUser(_ context.Context, accountID int64, externalID string, limit int64, upd embed.UserUpdate, now time.Time) (embed.ExternalUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counters[accountID] >= limit {
		return embed.ExternalUser{}, embed.ErrLimitReached
	}
	k := userKey{accountID, externalID}
	if _, exists := s.users[k]; exists {
		return embed.ExternalUser{}, embed.ErrStale
	}
	s.userSeq++
	u := embed.ExternalUser{ID: s.userSeq, AccountID: accountID, ExternalID: externalID, Attributes: map[string]map[string]embed.StoredValue{},
		CreatedAt: stored(now), Rev: 1}
	if err := apply(&u, upd, now); err != nil {
		return embed.ExternalUser{}, err
	}
	s.counters[accountID]++
	s.users[k] = &u
	return copyUser(&u, upd.Scope), nil
}

// ExternalUserCount is the account's counter: the places taken under its limit.
func (s *Store) ExternalUserCount(_ context.Context, accountID int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters[accountID], nil
}

// ListTenantUsers lists the profiles of users with sessions in tenant by id, after
// afterID.
func (s *Store) ListTenantUsers(_ context.Context, accountID int64, tenant string, afterID int64, limit int) ([]embed.ExternalUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []embed.ExternalUser
	for k, u := range s.users {
		if k.account == accountID && slices.Contains(u.Tenants, tenant) && u.ID > afterID {
			out = append(out, profile(u)) // the profile, as mongostore projects it
		}
	}
	slices.SortFunc(out, func(a, b embed.ExternalUser) int { return cmp.Compare(a.ID, b.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// MarkExternalUserDeleting records the start of the user's delete at a new revision.
func (s *Store) MarkExternalUserDeleting(_ context.Context, accountID int64, externalID string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[userKey{accountID, externalID}]
	if !ok {
		return false, nil
	}
	u.Deleting = true
	u.Rev++
	return true, nil
}

// DeleteExternalUser deletes the user and, only when it deleted one, gives its place
// under the limit back.
func (s *Store) DeleteExternalUser(_ context.Context, accountID int64, externalID string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := userKey{accountID, externalID}
	if _, ok := s.users[k]; !ok {
		return false, nil
	}
	delete(s.users, k)
	if s.counters[accountID] > 0 {
		s.counters[accountID]--
	}
	return true, nil
}
