package embed

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// UserQuery selects a page of a tenant's users.
type UserQuery struct {
	First int
	After string // opaque cursor
	Q     string // external id prefix (case-insensitive, as ids are stored lower-case)
}

// ScopedName is a group membership, or an attribute value, with where it is defined:
// "account" (the account-wide catalog) or "tenant" (the tenant's creator-mode catalog).
type ScopedName struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

// ScopedValue is an attribute value with its scope.
type ScopedValue struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
	Scope string `json:"scope"`
}

// UserView is an external user as the tenant's admin sees it: the profile, and the
// memberships and values of the account-wide catalog and the tenant's.
type UserView struct {
	UserSummary
	Groups         []ScopedName  `json:"groups"`
	UserAttributes []ScopedValue `json:"userAttributes"`
}

// UserSummary is an external user as a list shows it: the profile, without memberships
// and values (GET the user for those), so a page is bounded by the profile's caps.
type UserSummary struct {
	ID          int64      `json:"id"`
	ExternalID  string     `json:"externalId"`
	Email       *string    `json:"email"`
	DisplayName *string    `json:"displayName"`
	Picture     *string    `json:"picture"`
	CreatedAt   httpx.Time `json:"createdAt"`
	UpdatedAt   httpx.Time `json:"updatedAt"`
}

func userSummary(u ExternalUser) UserSummary {
	return UserSummary{ID: u.ID, ExternalID: u.ExternalID, Email: u.Email, DisplayName: u.DisplayName, Picture: u.Picture,
		CreatedAt: httpx.At(u.CreatedAt.UTC()), UpdatedAt: httpx.At(u.UpdatedAt.UTC())}
}

// DeletedUser is the answer of a user deletion.
type DeletedUser struct {
	Deleted         bool `json:"deleted"`
	SessionsRevoked int  `json:"sessionsRevoked"`
}

func userView(u ExternalUser, tenant string) UserView {
	v := UserView{UserSummary: userSummary(u), Groups: []ScopedName{}, UserAttributes: []ScopedValue{}}
	for _, sc := range []struct{ scope, label string }{{AccountScope, "account"}, {tenant, "tenant"}} {
		var names []string
		for _, n := range u.Groups[sc.scope] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v.Groups = append(v.Groups, ScopedName{Name: n, Scope: sc.label})
		}
		var vals []StoredValue
		for _, sv := range u.Attributes[sc.scope] {
			vals = append(vals, sv)
		}
		sort.Slice(vals, func(i, j int) bool { return vals[i].Name < vals[j].Name })
		for _, sv := range vals {
			v.UserAttributes = append(v.UserAttributes, ScopedValue{Name: sv.Name, Value: sv.Value, Scope: sc.label})
		}
	}
	return v
}

func (s *service) tenantUserScope(ctx context.Context, p *identity.Principal, tenant string) error {
	if err := requireCatalogAdmin(p, tenant); err != nil {
		return err
	}
	return s.requireTenant(ctx, p.Account.ID, tenant)
}

// ListTenantUsers lists the external users that have had sessions in the tenant, by id,
// as summaries; a filtered page examines at most EMBED_MAX_LIST_SCAN users.
func (s *service) ListTenantUsers(ctx context.Context, p *identity.Principal, tenant string, q UserQuery) (httpx.Page[UserSummary], error) {
	if err := s.tenantUserScope(ctx, p, tenant); err != nil {
		return httpx.Page[UserSummary]{}, err
	}
	if q.First < 1 || q.First > MaxPageSize {
		return httpx.Page[UserSummary]{}, httpx.BadFirst(strconv.Itoa(q.First))
	}
	if len(q.Q) > 256 {
		return httpx.Page[UserSummary]{}, errs.Invalidf("q is at most 256 characters")
	}
	// The cursor is the last user's id.
	var after int64
	if q.After != "" {
		n, err := httpx.DecodeCursor[int64](q.After)
		if err != nil || n <= 0 {
			return httpx.Page[UserSummary]{}, httpx.ErrBadCursor
		}
		after = n
	}
	// A scoped key lists the users whose every session was in its deployments.
	return s.listTenantUsers(ctx, p.Account.ID, tenant, strings.ToLower(strings.TrimSpace(q.Q)), keyReach(p).deployments, q.First, after)
}

// tenantUser reads a user of the tenant: another tenant's or an unknown user is 404, and
// so is a user with a session outside the caller's reach (a scoped key reads the users
// minted in its deployments only: coversUser).
func (s *service) tenantUser(ctx context.Context, p *identity.Principal, tenant, externalID string) (ExternalUser, error) {
	ext := strings.ToLower(strings.TrimSpace(externalID))
	if ext == "" || len(ext) > 256 {
		return ExternalUser{}, errs.NotFoundf("user %q not found in embed tenant %q", externalID, tenant)
	}
	u, err := s.d.Users.ExternalUser(ctx, p.Account.ID, ext, AccountScope, tenant)
	if errors.Is(err, ErrNotFound) || (err == nil && (!slices.Contains(u.Tenants, tenant) || !keyReach(p).coversUser(u.Deployments))) {
		return ExternalUser{}, errs.NotFoundf("user %q not found in embed tenant %q", externalID, tenant)
	}
	if err != nil {
		return ExternalUser{}, storeErr(err)
	}
	return u, nil
}

// GetTenantUser returns one user of the tenant with its memberships and values.
func (s *service) GetTenantUser(ctx context.Context, p *identity.Principal, tenant, externalID string) (UserView, error) {
	if err := s.tenantUserScope(ctx, p, tenant); err != nil {
		return UserView{}, err
	}
	u, err := s.tenantUser(ctx, p, tenant, externalID)
	if err != nil {
		return UserView{}, err
	}
	return userView(u, tenant), nil
}

// DeleteTenantUser marks the user as being deleted (from then on no mint writes it or
// keeps a session for it: confirmUser), revokes every session of the user (in any
// tenant: the user is the account's), then deletes the user, which frees its place under
// the account's external-user limit. A user minted again later is a new user. A delete
// that fails midway leaves the mark, and mints of the user are 409 until it is retried.
func (s *service) DeleteTenantUser(ctx context.Context, p *identity.Principal, tenant, externalID string) (_ DeletedUser, err error) {
	ev := audit.New(p, ActionExternalUserDelete, audit.Target{Type: TargetExternalUser, ID: externalID})
	ev.Details = map[string]any{"embedTenant": tenant}
	defer func() { s.record(ctx, &ev, err, http.StatusOK) }()
	if err := s.tenantUserScope(ctx, p, tenant); err != nil {
		return DeletedUser{}, err
	}
	// The user is the account's, with sessions in any deployment.
	if err := keyReach(p).account("delete an external user"); err != nil {
		return DeletedUser{}, err
	}
	u, err := s.tenantUser(ctx, p, tenant, externalID)
	if err != nil {
		return DeletedUser{}, err
	}
	if _, err := s.d.Users.MarkExternalUserDeleting(ctx, p.Account.ID, u.ExternalID); err != nil {
		return DeletedUser{}, storeErr(err)
	}
	// Sessions next: a user that is gone never keeps a working token.
	revoked, err := s.revokeMatching(ctx, p.Account.ID, SessionQuery{ExternalID: u.ExternalID})
	if err != nil {
		return DeletedUser{}, err
	}
	deleted, err := s.d.Users.DeleteExternalUser(ctx, p.Account.ID, u.ExternalID)
	if err != nil {
		return DeletedUser{}, storeErr(err)
	}
	ev.Target.ID = u.ExternalID
	ev.Details["sessionsRevoked"] = revoked
	return DeletedUser{Deleted: deleted, SessionsRevoked: revoked}, nil
}
