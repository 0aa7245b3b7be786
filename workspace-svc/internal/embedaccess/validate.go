package embedaccess

import (
	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/libs/errs"
)

// DefaultMaxEntries is the default bound of one object's entries (tenants and groups
// together, allEmbedUsers included): WORKSPACE_MAX_EMBED_ACCESS_ENTRIES.
const DefaultMaxEntries = 200

// Validate checks one object's grants as a PUT sends them: every access read or none,
// every tenant and group name well formed, scope account (no embedTenantName) or tenant
// (with one), no subject twice, and at most maxEntries entries (400
// embed_access_limit naming the limit). Its errors are 400s naming what was wrong.
func Validate(g Grants, maxEntries int) error {
	if n := g.Entries(); n > maxEntries {
		return errs.Invalidf("embed access has %d entries; at most %d (allEmbedUsers, tenants and groups together) are allowed on one object", n, maxEntries).
			WithCode(errs.CodeEmbedAccessLimit)
	}
	if g.AllEmbedUsers != "" && !validAccess(g.AllEmbedUsers) {
		return errs.Invalidf("allEmbedUsers must be %q or %q, not %q", Read, None, g.AllEmbedUsers)
	}
	tenants := make(map[string]bool, len(g.Tenants))
	for i, e := range g.Tenants {
		if !contract.ValidTenantName(e.EmbedTenantName) {
			return errs.Invalidf("tenants[%d]: embedTenantName %q is invalid: lowercase, 5 to 36 characters, starting with a letter, ending with a letter or digit, only a-z, 0-9 and -", i, e.EmbedTenantName)
		}
		if !validAccess(e.Access) {
			return errs.Invalidf("tenants[%d]: access must be %q or %q, not %q", i, Read, None, e.Access)
		}
		if tenants[e.EmbedTenantName] {
			return errs.Invalidf("tenants[%d]: embed tenant %q has more than one entry", i, e.EmbedTenantName)
		}
		tenants[e.EmbedTenantName] = true
	}
	type key struct{ scope, tenant, group string }
	groups := make(map[key]bool, len(g.Groups))
	for i, e := range g.Groups {
		switch e.Scope {
		case ScopeAccount:
			if e.EmbedTenantName != "" {
				return errs.Invalidf("groups[%d]: embedTenantName is only for scope %q; a group of scope %q is in the account's catalog", i, ScopeTenant, ScopeAccount)
			}
		case ScopeTenant:
			if !contract.ValidTenantName(e.EmbedTenantName) {
				return errs.Invalidf("groups[%d]: a group of scope %q needs a valid embedTenantName, not %q", i, ScopeTenant, e.EmbedTenantName)
			}
		default:
			return errs.Invalidf("groups[%d]: scope must be %q or %q, not %q", i, ScopeAccount, ScopeTenant, e.Scope)
		}
		if !contract.ValidGroupName(e.GroupName) {
			return errs.Invalidf("groups[%d]: groupName %q is invalid: 1 to %d bytes, not blank, no control character", i, e.GroupName, contract.MaxDefinitionNameLength)
		}
		if !validAccess(e.Access) {
			return errs.Invalidf("groups[%d]: access must be %q or %q, not %q", i, Read, None, e.Access)
		}
		k := key{e.Scope, e.EmbedTenantName, e.GroupName}
		if groups[k] {
			return errs.Invalidf("groups[%d]: group %q of scope %q has more than one entry", i, e.GroupName, e.Scope)
		}
		groups[k] = true
	}
	return nil
}

func validAccess(a Access) bool { return a == Read || a == None }
