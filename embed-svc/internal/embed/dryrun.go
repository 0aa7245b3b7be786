package embed

import (
	"context"
	"errors"
	"slices"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// DryRunSession runs every validation and resolution of generate-session (user lookup,
// definitions, groups, attributes, settings layering, branch resolution, the tenant and
// external-user limits) and returns what the session would carry, writing nothing: no
// session, no user, no definition, no tenant, no counter. Every error is the one the
// real mint would give.
func (s *service) DryRunSession(ctx context.Context, p *identity.Principal, req GenerateSessionRequest) (DryRun, error) {
	dep, err := s.ownDeployment(ctx, p, &req)
	if err != nil {
		return DryRun{}, err
	}
	m, err := s.prepare(ctx, p, dep, &req)
	if err != nil {
		return DryRun{}, err
	}
	if err := s.wouldFitTenant(ctx, p.Account.ID, m.tenant); err != nil {
		return DryRun{}, err
	}
	sess := m.newSession(p, &req, s.now().UTC())
	groups, attrs := []string{}, []AttributeValue{}
	memberships := DryRunMemberships{Account: []string{}, Tenant: []string{}}
	if req.InternalID == nil {
		if err := s.wouldFitUser(ctx, p, m); err != nil {
			return DryRun{}, err
		}
		upd := m.userUpdate(&req, m.standInIDs())
		u := applyUserUpdate(m.user, upd)
		sess.setExternalUser(u)
		groups, attrs = userScopeView(u, m.scope)
		if memberships, err = s.wouldBeMemberOf(ctx, m, upd); err != nil {
			return DryRun{}, err
		}
	}
	reach, err := s.wouldReach(ctx, sess, m, memberships, req.Resources)
	if err != nil {
		return DryRun{}, err
	}
	out := DryRun{DryRun: true, Effective: DryRunEffective{
		User: sess.User, AccountID: sess.AccountID, DeploymentID: sess.DeploymentID, BranchName: sess.Branch,
		Production: sess.Production, EmbedTenant: sess.Tenant, CreatorMode: sess.CreatorMode, Groups: groups,
		UserAttributes: attrs, SecurityContext: securityContextOf(req.SecurityContext), Settings: sess.Settings,
		ExpiresAt: httpx.At(s.sessionExpiry(sess)), DefinitionsCreated: []DryRunDefinition{},
		UserCreated: sess.User.Kind == "external" && sess.User.ID == 0,
		Resources:   req.Resources, GroupMemberships: memberships, Dashboards: reach.Dashboards, DashboardsTruncated: reach.Truncated,
	}}
	for _, u := range m.definitions.upserts {
		if u.Existing == nil {
			out.Effective.DefinitionsCreated = append(out.Effective.DefinitionsCreated, DryRunDefinition{Kind: u.Kind, Name: u.Input.Name})
		}
	}
	return out, nil
}

// standInIDs are the ids of the definitions a mint would name: the stored ones', and a
// stand-in for each it would create (they only key the user's memberships and values in
// memory).
func (m *mintPlan) standInIDs() map[string]string {
	ids := make(map[string]string, len(m.definitions.byKey)+len(m.definitions.upserts))
	for k, d := range m.definitions.byKey {
		ids[k] = d.ID
	}
	for _, u := range m.definitions.upserts {
		if u.Existing == nil {
			ids[key(u.Kind, u.Input.Name)] = "new:" + key(u.Kind, u.Input.Name)
		}
	}
	return ids
}

// wouldFitUser is the mint's check of the account's external-user limit: a user that
// does not exist yet (prepare read it) needs a place.
func (s *service) wouldFitUser(ctx context.Context, p *identity.Principal, m *mintPlan) error {
	if m.userExists {
		return nil
	}
	limit := externalUserLimit(p)
	n, err := s.d.Users.ExternalUserCount(ctx, p.Account.ID)
	if err != nil {
		return storeErr(err)
	}
	if n >= limit {
		return limitReached(limit)
	}
	return nil
}

// applyUserUpdate is what UserStore.UpdateExternalUser does to u, in memory.
func applyUserUpdate(u ExternalUser, upd UserUpdate) ExternalUser {
	if upd.Email != nil {
		u.Email = upd.Email
	}
	if upd.DisplayName != nil {
		u.DisplayName = upd.DisplayName
	}
	if upd.Picture != nil {
		u.Picture = upd.Picture
	}
	groups := make(map[string]map[string]string, len(u.Groups)+1)
	for k, v := range u.Groups {
		groups[k] = v
	}
	if upd.Groups != nil {
		groups[upd.Scope] = upd.Groups
	}
	u.Memberships = membershipsAfter(u, upd)
	u.Groups = groups
	attrs := make(map[string]map[string]StoredValue, len(u.Attributes)+1)
	for k, v := range u.Attributes {
		attrs[k] = v
	}
	scoped := make(map[string]StoredValue, len(attrs[upd.Scope])+len(upd.SetAttributes))
	for id, v := range attrs[upd.Scope] {
		scoped[id] = v
	}
	for id, v := range upd.SetAttributes {
		scoped[id] = v
	}
	for _, id := range upd.ClearAttributes {
		delete(scoped, id)
	}
	attrs[upd.Scope] = scoped
	u.Attributes = attrs
	if upd.Tenant != "" && !slices.Contains(u.Tenants, upd.Tenant) {
		u.Tenants = append(slices.Clone(u.Tenants), upd.Tenant)
	}
	if upd.Deployment != 0 && !slices.Contains(u.Deployments, upd.Deployment) {
		u.Deployments = append(slices.Clone(u.Deployments), upd.Deployment)
	}
	return u
}

// wouldBeMemberOf are the memberships grants would match once the mint's update is
// applied: the user's in the account's catalog and the tenant's (the mint read one of
// them; the dry run reads the user once more with both).
func (s *service) wouldBeMemberOf(ctx context.Context, m *mintPlan, upd UserUpdate) (DryRunMemberships, error) {
	u := ExternalUser{}
	if m.userExists {
		var err error
		u, err = s.d.Users.ExternalUser(ctx, m.user.AccountID, m.externalID, AccountScope, m.tenant) // the user prepare read
		if err != nil && !errors.Is(err, ErrNotFound) {
			return DryRunMemberships{}, storeErr(err)
		}
	}
	u = applyUserUpdate(u, upd)
	return DryRunMemberships{Account: groupNames(u.Groups[AccountScope]), Tenant: groupNames(u.Groups[m.tenant])}, nil
}

// wouldReach asks the dashboard reach which dashboards the session would open. A reach
// that cannot answer fails the dry run (503): a dry run is asked to explain access, and
// an answer without its dashboards would read as "opens nothing".
func (s *service) wouldReach(ctx context.Context, sess Session, m *mintPlan, g DryRunMemberships, res *SessionResources) (ReachAnswer, error) {
	q := ReachQuery{AccountID: sess.AccountID, DeploymentID: sess.DeploymentID, Tenant: sess.Tenant, AccountGroups: g.Account, TenantGroups: g.Tenant}
	if res != nil {
		ds := slices.Clone(res.Dashboards)
		q.Resources = &ds
	}
	if sess.User.Kind == "internal" {
		q.InternalUserID, q.InternalRole = m.internal.ID, m.internal.Role
	}
	if s.d.Reach == nil {
		return ReachAnswer{}, errs.Unavailablef("the dashboard reach is not configured; the dry run cannot say which dashboards the session would open")
	}
	a, err := s.d.Reach.Dashboards(ctx, q)
	if err != nil {
		// Whatever the reach answered (its cause is kept for the log), the caller may retry.
		return ReachAnswer{}, errors.Join(errs.Unavailablef("the dashboard reach is unavailable; retry shortly"), err)
	}
	if a.Dashboards == nil {
		a.Dashboards = []ReachDashboard{}
	}
	return a, nil
}
