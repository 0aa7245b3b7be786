package embed

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Group membership outside a mint: the members of a group of the account's catalog
// (/api/v1/groups/{id}/users) or of an embed tenant's (/api/v1/embed-tenants/{tenant}/
// groups/{id}/users), listed, added in batches and removed one by one. A mint's groups
// keep their meaning over what these set: omitted keeps the memberships, a list
// replaces the scope's, empty clears them. Every change is an account-wide write: an
// unscoped admin key (or an admin's bearer token on the account's catalog).

// MaxMembersPerRequest bounds the external ids one POST adds.
const MaxMembersPerRequest = 100

// GroupMembersInput is the body of a POST of members.
type GroupMembersInput struct {
	ExternalIDs []string `json:"externalIds"`
}

// GroupMembersAdded is the answer of a POST of members: how many users became members,
// and how many already were.
type GroupMembersAdded struct {
	Added          int64 `json:"added"`
	AlreadyMembers int64 `json:"alreadyMembers"`
}

// memberScope checks who may manage the group's members and reads the group: another
// scope's, another account's, another kind's or an unknown id is 404.
func (s *service) memberScope(ctx context.Context, p *identity.Principal, scope, groupID, what string) (Definition, error) {
	if err := requireCatalogAdmin(p, scope); err != nil {
		return Definition{}, err
	}
	if err := keyReach(p).account(what); err != nil {
		return Definition{}, err
	}
	if err := s.requireTenant(ctx, p.Account.ID, scope); err != nil {
		return Definition{}, err
	}
	g, err := s.d.Catalog.Definition(ctx, p.Account.ID, scope, KindGroup, groupID)
	if errors.Is(err, ErrNotFound) {
		return Definition{}, errs.NotFoundf("group %q not found", groupID)
	}
	if err != nil {
		return Definition{}, storeErr(err)
	}
	return g, nil
}

// member reports whether u is a user the scope's members may be chosen from: any of
// the account's for its catalog, a tenant's own users (as its user listing has them)
// for a tenant's; a user being deleted is none.
func member(u ExternalUser, scope string) bool {
	if u.Deleting {
		return false
	}
	if scope == AccountScope {
		return true
	}
	for _, t := range u.Tenants {
		if t == scope {
			return true
		}
	}
	return false
}

// ListGroupMembers lists the group's members by id, as summaries.
func (s *service) ListGroupMembers(ctx context.Context, p *identity.Principal, scope, groupID string, q UserQuery) (httpx.Page[UserSummary], error) {
	if _, err := s.memberScope(ctx, p, scope, groupID, "list group members"); err != nil {
		return httpx.Page[UserSummary]{}, err
	}
	if q.First < 1 || q.First > MaxPageSize {
		return httpx.Page[UserSummary]{}, httpx.BadFirst(strconv.Itoa(q.First))
	}
	var after int64
	if q.After != "" {
		n, err := httpx.DecodeCursor[int64](q.After)
		if err != nil || n <= 0 {
			return httpx.Page[UserSummary]{}, httpx.ErrBadCursor
		}
		after = n
	}
	users, err := s.d.Users.ListGroupMembers(ctx, p.Account.ID, scope, groupID, after, q.First+1)
	if err != nil {
		return httpx.Page[UserSummary]{}, storeErr(err)
	}
	more := len(users) > q.First
	if more {
		users = users[:q.First]
	}
	items := make([]UserSummary, 0, len(users))
	for _, u := range users {
		items = append(items, userSummary(u))
	}
	return httpx.PageOf(items, more, func(u UserSummary) int64 { return u.ID }), nil
}

// normalizeMembers checks a POST's external ids: 1 to MaxMembersPerRequest, each a
// well-formed external id (normalized as a mint normalizes it), none twice.
func normalizeMembers(in GroupMembersInput) ([]string, error) {
	if len(in.ExternalIDs) == 0 || len(in.ExternalIDs) > MaxMembersPerRequest {
		return nil, errs.Invalidf("externalIds must list 1 to %d external ids, not %d", MaxMembersPerRequest, len(in.ExternalIDs))
	}
	out := make([]string, 0, len(in.ExternalIDs))
	seen := make(map[string]bool, len(in.ExternalIDs))
	for i, raw := range in.ExternalIDs {
		ext := strings.ToLower(strings.TrimSpace(raw))
		switch {
		case ext == "":
			return nil, errs.Invalidf("externalIds[%d] must not be empty", i)
		case len(ext) > maxNameLen:
			return nil, errs.Invalidf("externalIds[%d] must be at most %d characters", i, maxNameLen)
		case seen[ext]:
			return nil, errs.Invalidf("externalIds: duplicate %q", ext)
		}
		seen[ext] = true
		out = append(out, ext)
	}
	return out, nil
}

// AddGroupMembers makes existing users members of the group. Any id that names no user
// the scope's members are chosen from is 404, naming them all, and nothing is added. A
// group deleted while the members were written takes its memberships with it: the
// group is read again after the write, and when it is gone the write is undone.
func (s *service) AddGroupMembers(ctx context.Context, p *identity.Principal, scope, groupID string, in GroupMembersInput) (_ GroupMembersAdded, err error) {
	ev := membershipEvent(p, ActionGroupMembershipAdd, scope, groupID)
	defer func() { s.record(ctx, &ev, err, http.StatusOK) }()
	g, err := s.memberScope(ctx, p, scope, groupID, "change group members")
	if err != nil {
		return GroupMembersAdded{}, err
	}
	ids, err := normalizeMembers(in)
	if err != nil {
		return GroupMembersAdded{}, err
	}
	ev.Details["externalIds"] = ids
	users, err := s.d.Users.FindExternalUsers(ctx, p.Account.ID, ids)
	if err != nil {
		return GroupMembersAdded{}, storeErr(err)
	}
	found := make(map[string]bool, len(users))
	for _, u := range users {
		if member(u, scope) {
			found[u.ExternalID] = true
		}
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return GroupMembersAdded{}, errs.NotFoundf("external users not found: %s", strings.Join(missing, ", "))
	}
	added, err := s.d.Users.AddGroupMembers(ctx, p.Account.ID, scope, g.ID, g.Name, ids, s.now().UTC())
	if err != nil {
		return GroupMembersAdded{}, storeErr(err)
	}
	if _, err := s.d.Catalog.Definition(ctx, p.Account.ID, scope, KindGroup, g.ID); errors.Is(err, ErrNotFound) {
		for _, id := range ids {
			if _, err := s.d.Users.RemoveGroupMember(ctx, p.Account.ID, scope, g.ID, id, s.now().UTC()); err != nil {
				return GroupMembersAdded{}, storeErr(err)
			}
		}
		return GroupMembersAdded{}, errs.NotFoundf("group %q not found", groupID)
	} else if err != nil {
		return GroupMembersAdded{}, storeErr(err)
	}
	out := GroupMembersAdded{Added: added, AlreadyMembers: int64(len(ids)) - added}
	ev.Details["added"], ev.Details["alreadyMembers"] = out.Added, out.AlreadyMembers
	return out, nil
}

// RemoveGroupMember ends a user's membership of the group. A user that is not a
// member is answered as one that was (204): the membership is gone either way, and a
// retried DELETE succeeds; an unknown user or group is 404.
func (s *service) RemoveGroupMember(ctx context.Context, p *identity.Principal, scope, groupID, externalID string) (err error) {
	ev := membershipEvent(p, ActionGroupMembershipRemove, scope, groupID)
	defer func() { s.record(ctx, &ev, err, http.StatusNoContent) }()
	g, err := s.memberScope(ctx, p, scope, groupID, "change group members")
	if err != nil {
		return err
	}
	ext := strings.ToLower(strings.TrimSpace(externalID))
	ev.Details["externalId"] = ext
	notFound := errs.NotFoundf("external user %q not found", externalID)
	if scope != AccountScope {
		notFound = errs.NotFoundf("user %q not found in embed tenant %q", externalID, scope)
	}
	if ext == "" || len(ext) > maxNameLen {
		return notFound
	}
	users, err := s.d.Users.FindExternalUsers(ctx, p.Account.ID, []string{ext})
	if err != nil {
		return storeErr(err)
	}
	if len(users) != 1 || (scope != AccountScope && !member(users[0], scope)) {
		return notFound
	}
	removed, err := s.d.Users.RemoveGroupMember(ctx, p.Account.ID, scope, g.ID, ext, s.now().UTC())
	if err != nil {
		return storeErr(err)
	}
	ev.Details["removed"] = removed
	return nil
}

// membershipEvent starts the event of a membership change: its target is the group.
func membershipEvent(p *identity.Principal, action, scope, groupID string) audit.Event {
	ev := audit.New(p, action, audit.Target{Type: TargetGroup, ID: groupID})
	ev.Details = map[string]any{"scope": "account"}
	if scope != AccountScope {
		ev.Details = map[string]any{"scope": "embed_tenant", "embedTenant": scope}
	}
	return ev
}
