package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Group membership outside a mint: what mongostore does with its memberships field.

// Definition reads one definition of scope and kind by id.
func (s *Store) Definition(_ context.Context, accountID int64, scope, kind, id string) (embed.Definition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.defs[id]
	if !ok || d.AccountID != accountID || d.Scope != scope || d.Kind != kind {
		return embed.Definition{}, embed.ErrNotFound
	}
	return copyDefinition(d), nil
}

// FindExternalUsers reads the profiles of the users with these external ids.
func (s *Store) FindExternalUsers(_ context.Context, accountID int64, externalIDs []string) ([]embed.ExternalUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []embed.ExternalUser
	for _, ext := range externalIDs {
		if u, ok := s.users[userKey{accountID, ext}]; ok && !slices.ContainsFunc(out, func(o embed.ExternalUser) bool { return o.ExternalID == ext }) {
			out = append(out, profile(u))
		}
	}
	slices.SortFunc(out, func(a, b embed.ExternalUser) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// AddGroupMembers makes the users members of the group and counts those that were not.
func (s *Store) AddGroupMembers(_ context.Context, accountID int64, scope, groupID, groupName string, externalIDs []string, now time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var added int64
	for _, ext := range externalIDs {
		u, ok := s.users[userKey{accountID, ext}]
		if !ok || u.Deleting {
			continue
		}
		if _, member := u.Groups[scope][groupID]; member {
			continue
		}
		if u.Groups == nil {
			u.Groups = map[string]map[string]string{}
		}
		if u.Groups[scope] == nil {
			u.Groups[scope] = map[string]string{}
		}
		u.Groups[scope][groupID] = groupName
		u.Rev++
		u.UpdatedAt = stored(now)
		added++
	}
	return added, nil
}

// RemoveGroupMember ends one user's membership of the group.
func (s *Store) RemoveGroupMember(_ context.Context, accountID int64, scope, groupID, externalID string, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[userKey{accountID, externalID}]
	if !ok {
		return false, nil
	}
	if _, member := u.Groups[scope][groupID]; !member {
		return false, nil
	}
	delete(u.Groups[scope], groupID)
	u.Rev++
	u.UpdatedAt = stored(now)
	return true, nil
}

// ListGroupMembers lists the profiles of the group's members by id, after afterID.
func (s *Store) ListGroupMembers(_ context.Context, accountID int64, scope, groupID string, afterID int64, limit int) ([]embed.ExternalUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []embed.ExternalUser
	for k, u := range s.users {
		if _, member := u.Groups[scope][groupID]; k.account == accountID && member && u.ID > afterID {
			out = append(out, profile(u))
		}
	}
	slices.SortFunc(out, func(a, b embed.ExternalUser) int { return cmp.Compare(a.ID, b.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// profile is u as a listing reads it: no memberships or values.
func profile(u *embed.ExternalUser) embed.ExternalUser {
	c := copyUser(u)
	c.Memberships = nil
	return c
}
