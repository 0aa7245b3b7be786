package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// The dbt push webhook is public: no credential, whatever Authorization a sender adds;
// dbtsync-svc gets the anonymous principal with the path's deployment, and an unknown
// deployment is the 401 dbtsync-svc answers a bad signature with.
func TestPushWebhookRouteIsSignedNotAuthenticated(t *testing.T) {
	h := newHarness(t)
	acme := h.acme()
	a1 := acme.Deployments[0].ID
	for _, auth := range []string{"", "Bearer not-a-token", "Api-Key nope"} {
		code, _, body := h.do("POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration/webhook", a1), auth, map[string]any{"ref": "refs/heads/main"})
		if code != 200 {
			t.Fatalf("Authorization %q: %d %s", auth, code, body)
		}
		var e echoed
		mustJSON(t, body, &e)
		p := e.Principal
		if p.Credential != identity.CredentialNone || p.User != nil || p.Account.ID != acme.ID || p.Deployment == nil ||
			p.Deployment.ID != a1 || p.Deployment.ProductionBranch != "main" {
			t.Fatalf("principal = %+v", p)
		}
	}
	code, hdr, body := h.do("POST", "/api/v1/deployments/999999/dbt-git-integration/webhook", "", map[string]any{"ref": "refs/heads/main"})
	if code != 401 {
		t.Fatalf("unknown deployment: %d %s", code, body)
	}
	var e struct{ Code, Message string }
	mustJSON(t, body, &e)
	if e.Code != errs.CodeUnauthenticated || e.Message != errs.PushUnverified || hdr.Get("WWW-Authenticate") != "" {
		t.Fatalf("unknown deployment: %s (WWW-Authenticate %q)", body, hdr.Get("WWW-Authenticate"))
	}
	// The integration's own route still needs a credential.
	if code, _, _ := h.do("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", a1), "", nil); code != 401 {
		t.Fatalf("integration without a credential: %d", code)
	}
}

// Push webhooks are limited per deployment, not per address: GitHub and GitLab send
// every customer's pushes from a few addresses.
func TestPushWebhookLimitedPerDeployment(t *testing.T) {
	h := limitedHarness(t, devstack.RedisForTest(t), func(o *gateway.Options) {
		o.DbtWebhookLimit = ratelimit.Limit{N: 2, Window: time.Minute}
	})
	acme := h.acme()
	a1, a2 := acme.Deployments[0].ID, acme.Deployments[1].ID
	for i := 1; i <= 3; i++ {
		want := 200
		if i == 3 {
			want = 429
		}
		if code, _, body := h.do("POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration/webhook", a1), "", map[string]any{}); code != want {
			t.Fatalf("push %d: %d %s, want %d", i, code, body, want)
		}
	}
	if code, _, body := h.do("POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration/webhook", a2), "", map[string]any{}); code != 200 {
		t.Fatalf("another deployment, same address: %d %s", code, body)
	}
}
