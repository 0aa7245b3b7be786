package embedaccess_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

func tenants(n int) []embedaccess.TenantEntry {
	out := make([]embedaccess.TenantEntry, n)
	for i := range out {
		out[i] = tenant(fmt.Sprintf("tenant-%04d", i), read)
	}
	return out
}

// TestValidate: every 400 names what was wrong; nothing else is refused.
func TestValidate(t *testing.T) {
	long := strings.Repeat("g", 256)
	for _, c := range []struct {
		name string
		g    embedaccess.Grants
		max  int
		code string // "" : accepted
		msg  string
	}{
		{"no entries", embedaccess.Grants{}, 200, "", ""},
		{"every kind of entry", embedaccess.Grants{AllEmbedUsers: none, Tenants: []embedaccess.TenantEntry{tenant(acme, read), tenant(globex, none)},
			Groups: []embedaccess.GroupEntry{accountGroup("Sales EMEA", read), tenantGroup(acme, "Sales EMEA", none), tenantGroup(globex, "Sales EMEA", read)}}, 200, "", ""},
		{"exactly the limit", embedaccess.Grants{AllEmbedUsers: read, Tenants: tenants(199)}, 200, "", ""},
		{"one over the limit", embedaccess.Grants{Tenants: tenants(201)}, 200, errs.CodeEmbedAccessLimit,
			"embed access has 201 entries; at most 200 (allEmbedUsers, tenants and groups together) are allowed on one object"},
		{"allEmbedUsers counts toward the limit", embedaccess.Grants{AllEmbedUsers: read, Tenants: tenants(2)}, 2, errs.CodeEmbedAccessLimit,
			"embed access has 3 entries; at most 2"},
		{"allEmbedUsers neither read nor none", embedaccess.Grants{AllEmbedUsers: "write"}, 200, "invalid_request", `allEmbedUsers must be "read" or "none", not "write"`},
		{"a tenant name too short", embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant("acme", read)}}, 200, "invalid_request",
			`tenants[0]: embedTenantName "acme" is invalid: lowercase, 5 to 36 characters`},
		{"a tenant name in upper case", embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, read), tenant("Globex-Inc", read)}}, 200, "invalid_request",
			`tenants[1]: embedTenantName "Globex-Inc" is invalid`},
		{"a tenant entry without a name", embedaccess.Grants{Tenants: []embedaccess.TenantEntry{{Access: read}}}, 200, "invalid_request", `tenants[0]: embedTenantName "" is invalid`},
		{"a tenant's access", embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, "READ")}}, 200, "invalid_request",
			`tenants[0]: access must be "read" or "none", not "READ"`},
		{"a tenant's access missing", embedaccess.Grants{Tenants: []embedaccess.TenantEntry{{EmbedTenantName: acme}}}, 200, "invalid_request",
			`tenants[0]: access must be "read" or "none", not ""`},
		{"a tenant twice", embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, read), tenant(acme, none)}}, 200, "invalid_request",
			`tenants[1]: embed tenant "acme-corp" has more than one entry`},
		{"an account group naming a tenant", embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: "account", EmbedTenantName: acme, GroupName: "g", Access: read}}}, 200, "invalid_request",
			`groups[0]: embedTenantName is only for scope "tenant"; a group of scope "account" is in the account's catalog`},
		{"a tenant group without a tenant", embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: "tenant", GroupName: "g", Access: read}}}, 200, "invalid_request",
			`groups[0]: a group of scope "tenant" needs a valid embedTenantName, not ""`},
		{"a tenant group with a bad tenant", embedaccess.Grants{Groups: []embedaccess.GroupEntry{tenantGroup("x", "g", read)}}, 200, "invalid_request",
			`groups[0]: a group of scope "tenant" needs a valid embedTenantName, not "x"`},
		{"a scope that is neither", embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: "global", GroupName: "g", Access: read}}}, 200, "invalid_request",
			`groups[0]: scope must be "account" or "tenant", not "global"`},
		{"a group without a scope", embedaccess.Grants{Groups: []embedaccess.GroupEntry{{GroupName: "g", Access: read}}}, 200, "invalid_request",
			`groups[0]: scope must be "account" or "tenant", not ""`},
		{"a blank group name", embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("  ", read)}}, 200, "invalid_request",
			`groups[0]: groupName "  " is invalid: 1 to 255 bytes, not blank, no control character`},
		{"a group name with a control character", embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("a\nb", read)}}, 200, "invalid_request",
			`groups[0]: groupName "a\nb" is invalid`},
		{"a group name too long", embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup(long, read)}}, 200, "invalid_request", `groups[0]: groupName "ggg`},
		{"a group's access", embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("g", "all")}}, 200, "invalid_request",
			`groups[0]: access must be "read" or "none", not "all"`},
		{"a group twice in one catalog", embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("g", read), tenantGroup(acme, "g", read), accountGroup("g", none)}}, 200, "invalid_request",
			`groups[2]: group "g" of scope "account" has more than one entry`},
		{"a tenant group twice for one tenant", embedaccess.Grants{Groups: []embedaccess.GroupEntry{tenantGroup(acme, "g", read), tenantGroup(acme, "g", none)}}, 200, "invalid_request",
			`groups[1]: group "g" of scope "tenant" has more than one entry`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := embedaccess.Validate(c.g, c.max)
			if c.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			status, code, msg, ok := errs.Answer(err)
			if !ok || status != 400 || code != c.code || !strings.HasPrefix(msg, c.msg) {
				t.Fatalf("answer %d %q %q (%v), want 400 %q starting %q", status, code, msg, err, c.code, c.msg)
			}
		})
	}
}
