package embed

import (
	"slices"
	"strconv"
	"strings"

	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// Who may do what in embed-svc. The gateway only authenticates; every rule of role, key
// kind and key scope is decided here, so every refusal is answered, and audited, by the
// service that owns the resource.

// reach is what a principal's credential lets it act on in embed-svc, whatever its role:
// which of its account's deployments, and whether what belongs to the whole account
// (the embed settings, the catalogs, the external users).
type reach struct {
	deployments []int64 // nil: every deployment of the account
	accountWide bool    // may change what belongs to the whole account
	personal    bool    // a personal API key (never account-wide)
}

// keyReach is the one place a key's scope is read; every embed route asks it, except the
// spec's revoke by session id (Authentication 4: there the key's scope is not checked,
// holding the id is the authority). An admin's bearer token and an unscoped account API key
// reach everything; a key scoped to deployments reaches those, and the external users
// whose every session was minted in them (coversUser); a personal key reaches its
// scope's deployments (every one when it has none) and never the account as a whole; an
// embed token reaches its session's deployment.
func keyReach(p *identity.Principal) reach {
	switch {
	case p == nil:
		return reach{deployments: []int64{}}
	case p.Credential == identity.CredentialBearer && len(p.KeyScope) > 0:
		// A service account's token scoped to deployments reaches those, as a scoped key.
		return reach{deployments: slices.Clone(p.KeyScope)}
	case p.Credential == identity.CredentialBearer:
		return reach{accountWide: true}
	case p.Credential == identity.CredentialAPIKey:
		r := reach{personal: p.KeyKind != identity.KeyAccount}
		if len(p.KeyScope) > 0 {
			r.deployments = slices.Clone(p.KeyScope)
		}
		r.accountWide = !r.personal && r.deployments == nil
		return r
	case p.Credential == identity.CredentialEmbed && p.Embed != nil:
		return reach{deployments: []int64{p.Embed.DeploymentID}}
	}
	return reach{deployments: []int64{}}
}

// covers reports whether deploymentID is within reach.
func (r reach) covers(deploymentID int64) bool {
	return r.deployments == nil || slices.Contains(r.deployments, deploymentID)
}

// coversUser reports whether an external user with sessions in deps is within reach:
// every deployment the user was ever minted in is. A user with none recorded may have
// been minted anywhere, so only a reach of every deployment covers it.
func (r reach) coversUser(deps []int64) bool {
	if r.deployments == nil {
		return true
	}
	return len(deps) > 0 && !slices.ContainsFunc(deps, func(d int64) bool { return !r.covers(d) })
}

// userOutOfScope is the answer to a mint for an external user outside the reach
// (coversUser): 403 key_out_of_scope, naming neither the user's other deployments nor
// the key's.
func userOutOfScope(externalID string) error {
	return errs.Forbiddenf("external user %q has sessions in deployments outside this API key's scope; mint with a key that reaches them all", externalID).
		WithCode(errs.CodeKeyOutOfScope)
}

// deployment refuses a deployment outside the reach: 403 key_out_of_scope.
func (r reach) deployment(deploymentID int64) error {
	if r.covers(deploymentID) {
		return nil
	}
	return errs.Forbiddenf("this API key is scoped to other deployments than %d", deploymentID).WithCode(errs.CodeKeyOutOfScope)
}

// narrow keeps a session query inside the reach: a deployment it names outside the reach
// is 403 key_out_of_scope, and whatever else it selects matches the reach's deployments
// only.
func (r reach) narrow(q *SessionQuery) error {
	if q.DeploymentID > 0 {
		if err := r.deployment(q.DeploymentID); err != nil {
			return err
		}
	}
	q.Deployments = r.deployments
	return nil
}

// account refuses a change of what belongs to the whole account to a credential that
// reaches less: a scoped key 403 key_out_of_scope, a personal key 403 personal_key.
func (r reach) account(what string) error {
	switch {
	case r.accountWide:
		return nil
	case r.personal:
		return errs.Forbiddenf("a personal API key cannot %s: it belongs to the whole account; use an unscoped account API key", what).WithCode(errs.CodePersonalKey)
	case len(r.deployments) > 0:
		return errs.Forbiddenf("this API key is scoped to deployment %s and cannot %s: it belongs to the whole account; use an unscoped account API key",
			joinIDs(r.deployments), what).WithCode(errs.CodeKeyOutOfScope)
	}
	return errs.Forbiddenf("only an admin's unscoped account API key can %s", what)
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// requireMinter is the rule of who may mint (the spec's Authentication 3): an admin's
// account API key (a personal key is 403), on an account with embedding on a premium or
// enterprise plan. The deployment is checked against the key's reach once it is known.
func requireMinter(p *identity.Principal) error {
	if err := requireAdminAccountKey(p, "mint embed sessions"); err != nil {
		return err
	}
	if !token.PlanAllowsEmbedding(p.Account.Plan) {
		return errs.Forbiddenf("embed sessions need the premium or enterprise plan; this account is on %s", p.Account.Plan).WithCode(errs.CodePlanNotEligible)
	}
	if !p.Account.EmbeddingEnabled {
		return errs.Forbiddenf("embedding is not enabled for this account")
	}
	return nil
}

// requireAdminAccountKey refuses anything but an admin's account API key: a personal key
// is refused by name (personal_key).
func requireAdminAccountKey(p *identity.Principal, what string) error {
	switch {
	case p == nil || p.Credential != identity.CredentialAPIKey:
		return errs.Forbiddenf("only an admin's account API key can %s", what)
	case p.KeyKind != identity.KeyAccount:
		return errs.Forbiddenf("a personal API key cannot %s; use an account API key", what).WithCode(errs.CodePersonalKey)
	case !p.HasRole(identity.RoleAdmin):
		return errs.Forbiddenf("only an admin's account API key can %s", what)
	}
	return nil
}

// requireRevoker is the rule of who may revoke a session by its id (the spec's
// Authentication 4): an admin principal (any API key of an admin, an admin's bearer
// token, an internal admin's embed token), on an account with embedding.
func requireRevoker(p *identity.Principal) error {
	if p == nil || !p.HasRole(identity.RoleAdmin) || (p.Credential == identity.CredentialEmbed && (p.Embed == nil || !p.Embed.Internal)) ||
		p.Credential == identity.CredentialNone {
		return errs.Forbiddenf("revoking embed sessions requires an admin")
	}
	if !p.Account.EmbeddingEnabled {
		return errs.Forbiddenf("embedding is not enabled for this account")
	}
	return nil
}

// requireSessionControl is the rule of the operator's session list and bulk revoke: an
// admin's API key or bearer token on an account with embedding. An embed token, even an
// internal admin's, is held by a browser: it may revoke a session whose id it holds (the
// spec requires that much) but neither list the account's sessions nor revoke them in
// bulk. What the caller sees and revokes is then narrowed to its reach.
func requireSessionControl(p *identity.Principal) error {
	if p != nil && p.Credential == identity.CredentialEmbed {
		return errs.Forbiddenf("an embed token can revoke a session by its id (POST /api/v1/embed/session/revoke), not list or revoke sessions in bulk")
	}
	return requireRevoker(p)
}

// requireCatalogAdmin: tenant-scoped catalogs and users need an admin's account API key;
// the account-wide catalog also accepts an admin's bearer token. Reading is not bound to
// deployments (a scoped key mints for its deployments with these catalogs); changing
// them is an account-wide write (reach.account).
func requireCatalogAdmin(p *identity.Principal, scope string) error {
	if p == nil || !p.HasRole(identity.RoleAdmin) {
		return errs.Forbiddenf("this endpoint requires an admin")
	}
	if scope != AccountScope {
		return requireAdminAccountKey(p, "manage embed tenants")
	}
	if p.Credential != identity.CredentialAPIKey && p.Credential != identity.CredentialBearer {
		return errs.Forbiddenf("this endpoint requires an admin's API key or bearer token")
	}
	return nil
}

// requireAccountAdmin: the account-wide settings belong to the account's admins, by API
// key or bearer token (never an embed token: an embedded user cannot widen its own
// switches). Replacing them is an account-wide write (reach.account).
func requireAccountAdmin(p *identity.Principal) error {
	if p == nil || !p.HasRole(identity.RoleAdmin) || (p.Credential != identity.CredentialAPIKey && p.Credential != identity.CredentialBearer) {
		return errs.Forbiddenf("the account's embed settings require an admin's API key or bearer token")
	}
	return nil
}
