package gateway

import (
	"path"
	"strings"
	"testing"

	"github.com/analyticsco/platform/gateway/internal/credentials"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		path    string
		ok      bool
		svc     service
		pol     policy
		dep     int64
		bigBody bool
	}{
		{"/api/v1/deployments/7/workspace/bulk-move", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/workspace/import", true, svcWorkspace, policyBearer, 7, true},
		{"/api/v1/deployments/7/workspace/export", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/folders", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/folders/by-key/team-a", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/workbooks/by-key/sales.q1", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/dbt-sync", true, svcDBTSync, policyBearer, 7, true},
		{"/api/v1/deployments/7/dbt-sync/job-1", true, svcDBTSync, policyBearer, 7, false},
		{"/api/v1/deployments/7/dbt-git-integration", true, svcDBTSync, policyBearer, 7, false},
		{"/api/v1/deployments/7/dbt-git-integration/webhook", true, svcDBTSync, policySigned, 7, false},
		{"/api/v1/deployments/7/dbt-git-integration/other", true, svcDBTSync, policyBearer, 7, false},
		{"/api/v1/deployments/7/token", true, svcEmbed, policyEmbedToken, 7, false},
		{"/build/api/v1/deployments/7/branches/main", true, svcDBTSync, policyBearer, 7, false},
		{"/build/api/v1/other", true, svcDBTSync, policyBearer, 0, false},
		{"/api/v1/embed/generate-session", true, svcEmbed, policyGenerateSession, 0, false},
		{"/api/v1/embed/session/revoke", true, svcEmbed, policyRevoke, 0, false},
		{"/api/v1/embed/session/exchange", true, svcEmbed, policyPublic, 0, false},
		{"/api/v1/embed-tenants/acme-one/groups", true, svcEmbed, policyTenantAdmin, 0, false},
		{"/api/v1/groups/abc", true, svcEmbed, policyAccountAdmin, 0, false},
		{"/api/v1/deployments/7/folders/12/embed-access", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/workbooks/12/embed-access", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/embed-access", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/deployments/7/embed-tenants/acme-one/workbooks", true, svcWorkspace, policyBearer, 7, false},
		{"/api/v1/embed/dashboards", true, svcWorkspace, policyEmbedToken, 0, false},
		{"/api/v1/embed/dashboards/AbCdEfGhIjKlMn-_", true, svcWorkspace, policyEmbedToken, 0, false},
		{"/api/v1/embed/dashboards/not a public id", true, svcWorkspace, policyEmbedToken, 0, false},
		{"/api/v1/embed-tenants/acme-one/groups/g1/users", true, svcEmbed, policyTenantAdmin, 0, false},
		{"/api/v1/embed-tenants/acme-one/groups/g1/users/ext-1", true, svcEmbed, policyTenantAdmin, 0, false},
		{"/api/v1/groups/g1/users", true, svcEmbed, policyAccountAdmin, 0, false},
		{"/api/v1/groups/g1/users/ext-1", true, svcEmbed, policyAccountAdmin, 0, false},
		{"/api/v1/webhooks", true, svcEmbed, policyAccountAdmin, 0, false},
		{"/api/v1/webhooks/wh_01JF00000000000000000000AA", true, svcEmbed, policyAccountAdmin, 0, false},
		{"/api/v1/webhooks/wh_x/deliveries/dlv_y/redeliver", true, svcEmbed, policyAccountAdmin, 0, false},
		{"/api/v1/webhooks/wh_x/secret/rotate", true, svcEmbed, policyAccountAdmin, 0, false},
		{"/api/v1/webhooksx", false, 0, 0, 0, false},
		{"/api/v1/webhooks/", false, 0, 0, 0, false},
		{"/api/v1/deployments/7/embed-access/x", false, 0, 0, 0, false},
		{"/api/v1/deployments/7/embed-accessx", false, 0, 0, 0, false},
		{"/api/v1/embed/dashboards/", false, 0, 0, 0, false},
		{"/api/v1/embed/dashboardsx", false, 0, 0, 0, false},
		{"/api/v1/deployments/7/token/x", false, 0, 0, 0, false},
		{"/api/v1/deployments/0/folders", false, 0, 0, 0, false},
		{"/api/v1/deployments/-1/folders", false, 0, 0, 0, false},
		{"/api/v1/deployments/99999999999999999999/folders", false, 0, 0, 0, false},
		{"/api/v1/deployments/7/../8/folders", false, 0, 0, 0, false},
		{"/api/v1/deployments/7//folders", false, 0, 0, 0, false},
		{"/api/v1/deployments/7/folders/", false, 0, 0, 0, false},
		{"/build/api/v1/deployments/x/branches", false, 0, 0, 0, false},
		{"/api/v2/anything", false, 0, 0, 0, false},
	} {
		rt, ok := match(c.path)
		if ok != c.ok || (ok && (rt.svc != c.svc || rt.policy != c.pol || rt.deploymentID != c.dep || rt.bigBody != c.bigBody)) {
			t.Errorf("%s: got %+v %v", c.path, rt, ok)
		}
	}
}

// FuzzMatch: no path panics the router, and a matched path is always in clean form with
// a positive deployment id when it names one.
func FuzzMatch(f *testing.F) {
	for _, s := range []string{"/api/v1/deployments/1/folders", "/build/api/v1/deployments/2/x", "/api/v1/embed/session", "/a/../b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rt, ok := match(p)
		if !ok {
			return
		}
		if path.Clean(p) != p || rt.svc == svcNone {
			t.Fatalf("matched unclean or unrouted path %q: %+v", p, rt)
		}
		if strings.HasPrefix(p, "/api/v1/deployments/") && rt.deploymentID <= 0 {
			t.Fatalf("deployment route without a deployment: %q", p)
		}
	})
}

// FuzzParseAPIKey: parsing never panics and accepts only the documented shape.
func FuzzParseAPIKey(f *testing.F) {
	_, key, _ := credentials.NewAPIKey()
	f.Add(key)
	f.Add("pk_0123456789abcdef_x")
	f.Fuzz(func(t *testing.T, s string) {
		id, _, ok := credentials.ParseAPIKey(s)
		if ok && (len(id) != 16 || !strings.HasPrefix(s, "pk_"+id+"_") || len(s) != 3+16+1+43) {
			t.Fatalf("accepted malformed key %q", s)
		}
	})
}

// TestWritesThatCopyManyItemsCostMore: a promotion and a folder duplicate spend more of
// the account budget than a single write (docs/rate-limits.md).
func TestWritesThatCopyManyItemsCostMore(t *testing.T) {
	for _, c := range []struct {
		path string
		want int64
	}{
		{"/api/v1/deployments/7/workbooks/3/promotions", costPromotion},
		{"/api/v1/deployments/7/folders/3/duplicate", costDuplicate},
		{"/api/v1/deployments/7/workbooks/3/duplicate", 0},
		{"/api/v1/deployments/7/workbooks/3/promotion-previews", 0},
	} {
		r, ok := match(c.path)
		if !ok || r.writeCost != c.want {
			t.Errorf("%s: matched %v, writeCost %d, want %d", c.path, ok, r.writeCost, c.want)
		}
	}
}
