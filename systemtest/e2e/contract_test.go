package e2e_test

import (
	"testing"
)

// TestContract checks every rule, limit and error row of ../shared/spec/api.md through
// the gateway of one running stack, one named subtest per rule. Subtests create their own
// folders, users, tenants and branches, so they share the stack without interfering.
func TestContract(t *testing.T) {
	p := startPlatform(t)
	for _, group := range []struct {
		name  string
		rules []rule
	}{
		{"bulk-move", bulkMoveRules},
		{"workspace-features", workspaceFeatureRules},
		{"create-folder", createFolderRules},
		{"generate-session", generateSessionRules},
		{"groups", groupRules},
		{"user-attributes", userAttributeRules},
		{"user-profile", userProfileRules},
		{"settings", settingsRules},
		{"session", sessionRules},
		{"token", tokenRules},
		{"revoke", revokeRules},
		{"embed-tenant-admin", embedTenantAdminRules},
		{"data-token", dataTokenRules},
		{"dbt-sync", dbtSyncRules},
		{"limits", limitRules},
		{"auth", authRules},
		{"errors", errorRules},
		{"routes", routeRules},
		{"pagination", paginationRules},
		{"audit", auditRules},
		{"generated-client", clientRules},
		{"service-accounts", serviceAccountRules},
		{"dashboard-versions", dashboardVersionRules},
		{"promotion", promotionRules},
	} {
		for _, r := range group.rules {
			t.Run(group.name+"/"+r.name, func(t *testing.T) { r.check(t, p) })
		}
	}
}

// rule is one named rule of the contract and the check that proves it.
type rule struct {
	name  string
	check func(t *testing.T, p *platform)
}
