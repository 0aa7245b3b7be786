package gateway_test

import (
	"crypto/ed25519"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/embedauth"
	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/libs/identity"
)

// TestEmbedAccessRoutes: the embed grants' routes reach the service that serves them with
// the credential each accepts. The grant routes of a workbook, a folder and the root and a
// tenant's workbook listing are workspace-svc's bearer routes, with the deployment of the
// path checked as on every deployment route; the viewer's dashboards are workspace-svc's
// with the embed token, whose principal (signed for workspace-svc) carries the session's
// deployment, tenant and narrowing; the group membership routes are embed-svc's, with the
// catalogs' credentials.
func TestEmbedAccessRoutes(t *testing.T) {
	red := devstack.RedisForTest(t)
	ropts, _ := redis.ParseURL(red.URL)
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	ek := &embedKeys{keys: map[string]ed25519.PrivateKey{}}
	ek.rotate(t)
	jwks := httptest.NewServer(ek)
	defer jwks.Close()
	h := newHarness(t, func(o *gateway.Options) {
		ek.signer = o.Signer
		keys := auth.NewKeySet(nil, jwks.URL).WithRequestDecorator(embedauth.SignedRequest(o.Signer)).WithMinRefresh(0)
		o.Embed = embedauth.New(keys, "https://embed.test", rdb, o.Auth, nil)
	})
	acme, globex := h.acme(), h.globex()
	a1, a2 := acme.Deployments[0].ID, acme.Deployments[1].ID
	claims := token.Claims{Registered: token.Registered{Subject: "viewer-1"}, SessionID: "sid-viewer", AccountID: acme.ID,
		DeploymentID: a1, Branch: "main", Tenant: "acme-north"}
	embed := "Bearer " + ek.token(t, claims)
	admin := "Bearer " + acme.Users["admin"].Bearer
	viewer := "Bearer " + acme.Users["viewer"].Bearer
	key := "Api-Key " + acme.APIKeys["admin"]
	scoped := "Api-Key " + acme.APIKeys["adminScoped"] // scoped to a1

	grantRoutes := []string{
		fmt.Sprintf("/api/v1/deployments/%d/workbooks/12/embed-access", a1),
		fmt.Sprintf("/api/v1/deployments/%d/folders/12/embed-access", a1),
		fmt.Sprintf("/api/v1/deployments/%d/embed-access", a1),
		fmt.Sprintf("/api/v1/deployments/%d/embed-tenants/acme-north/workbooks?accessSource=folder&first=5", a1),
	}
	viewerRoutes := []string{"/api/v1/embed/dashboards?first=5", "/api/v1/embed/dashboards/AbCdEfGhIjKlMn-_"}
	memberRoutes := []string{"/api/v1/embed-tenants/acme-north/groups/g1/users", "/api/v1/groups/g1/users"}

	for _, c := range []struct {
		name, method, path, authz string
		body                      any
		want                      int
		service                   string
	}{
		{"grant-get-200-admin", "GET", grantRoutes[0], admin, nil, 200, "workspace-svc"},
		{"grant-put-200-admin", "PUT", grantRoutes[0], admin, map[string]any{"allEmbedUsers": "read"}, 200, "workspace-svc"},
		{"folder-grant-put-200-viewer-decided-by-the-service", "PUT", grantRoutes[1], viewer, map[string]any{}, 200, "workspace-svc"},
		{"root-grant-get-200-admin", "GET", grantRoutes[2], admin, nil, 200, "workspace-svc"},
		{"root-grant-put-200-admin", "PUT", grantRoutes[2], admin, map[string]any{}, 200, "workspace-svc"},
		{"tenant-workbooks-200-admin", "GET", grantRoutes[3], admin, nil, 200, "workspace-svc"},
		{"grant-get-401-no-credential", "GET", grantRoutes[0], "", nil, 401, ""},
		{"grant-get-401-api-key", "GET", grantRoutes[0], key, nil, 401, ""},
		{"root-grant-get-401-embed-token", "GET", grantRoutes[2], embed, nil, 401, ""},
		{"tenant-workbooks-401-embed-token", "GET", grantRoutes[3], embed, nil, 401, ""},
		{"grant-get-404-other-account-bearer", "GET", grantRoutes[0], "Bearer " + globex.Users["admin"].Bearer, nil, 404, ""},
		{"root-grant-get-404-other-account-bearer", "GET", grantRoutes[2], "Bearer " + globex.Users["admin"].Bearer, nil, 404, ""},
		{"root-grant-get-404-unknown-deployment", "GET", "/api/v1/deployments/987654321/embed-access", admin, nil, 404, ""},
		{"root-grant-404-no-route-below", "GET", fmt.Sprintf("/api/v1/deployments/%d/embed-access/x", a1), admin, nil, 404, ""},
		{"viewer-list-200-embed-token", "GET", viewerRoutes[0], embed, nil, 200, "workspace-svc"},
		{"viewer-get-200-embed-token", "GET", viewerRoutes[1], embed, nil, 200, "workspace-svc"},
		{"viewer-get-malformed-id-reaches-the-service", "GET", "/api/v1/embed/dashboards/not%20an%20id", embed, nil, 200, "workspace-svc"},
		{"viewer-list-401-no-credential", "GET", viewerRoutes[0], "", nil, 401, ""},
		{"viewer-get-401-no-credential", "GET", viewerRoutes[1], "", nil, 401, ""},
		{"viewer-list-401-user-bearer", "GET", viewerRoutes[0], admin, nil, 401, ""},
		{"viewer-get-401-user-bearer", "GET", viewerRoutes[1], admin, nil, 401, ""},
		{"viewer-get-401-api-key", "GET", viewerRoutes[1], key, nil, 401, ""},
		{"tenant-members-200-admin-key", "GET", memberRoutes[0], key, nil, 200, "embed-svc"},
		{"tenant-members-post-200-scoped-key-decided-by-the-service", "POST", memberRoutes[0], scoped, map[string]any{"externalIds": []string{"a"}}, 200, "embed-svc"},
		{"tenant-member-delete-200-admin-key", "DELETE", memberRoutes[0] + "/ext-1", key, nil, 200, "embed-svc"},
		{"tenant-members-401-bearer", "GET", memberRoutes[0], admin, nil, 401, ""},
		{"tenant-members-401-embed-token", "GET", memberRoutes[0], embed, nil, 401, ""},
		{"account-members-200-admin-key", "GET", memberRoutes[1], key, nil, 200, "embed-svc"},
		{"account-members-200-admin-bearer", "POST", memberRoutes[1], admin, map[string]any{"externalIds": []string{"a"}}, 200, "embed-svc"},
		{"account-member-delete-200-admin-key", "DELETE", memberRoutes[1] + "/ext-1", key, nil, 200, "embed-svc"},
		{"account-members-401-embed-token", "GET", memberRoutes[1], embed, nil, 401, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, hdr, body := h.do(c.method, c.path, c.authz, c.body)
			if code != c.want {
				t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, code, c.want, body)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without a challenge")
			}
			if c.service == "" {
				return
			}
			var e echoed
			mustJSON(t, body, &e)
			if e.Service != c.service || e.Principal == nil || e.Principal.Audience != c.service {
				t.Fatalf("answered by %q for audience %q, want %s", e.Service, audience(e.Principal), c.service)
			}
		})
	}

	t.Run("grant-routes-carry-the-checked-deployment", func(t *testing.T) {
		for _, p := range grantRoutes {
			_, _, body := h.do("GET", p, admin, nil)
			var e echoed
			mustJSON(t, body, &e)
			if e.Principal.Deployment == nil || e.Principal.Deployment.ID != a1 || e.Principal.User == nil || e.Principal.User.ID != acme.Users["admin"].ID {
				t.Fatalf("%s: principal %+v", p, e.Principal)
			}
		}
	})
	t.Run("viewer-routes-carry-the-session", func(t *testing.T) {
		for _, p := range viewerRoutes {
			_, _, body := h.do("GET", p, embed, nil)
			var e echoed
			mustJSON(t, body, &e)
			pe := e.Principal.Embed
			if e.Principal.Credential != identity.CredentialEmbed || pe == nil || pe.SessionID != "sid-viewer" || pe.DeploymentID != a1 ||
				pe.Tenant != "acme-north" || pe.Subject != "viewer-1" || e.Principal.Account.ID != acme.ID || e.Principal.User != nil {
				t.Fatalf("%s: principal %+v embed %+v", p, e.Principal, pe)
			}
			if pe.Resources != nil {
				t.Fatalf("%s: a session minted without resources is narrowed to %+v", p, pe.Resources)
			}
			// The path names no deployment: the session's is the embed identity's, never one
			// the gateway attached.
			if e.Principal.Deployment != nil {
				t.Fatalf("%s: deployment %+v attached", p, e.Principal.Deployment)
			}
		}
	})
	t.Run("viewer-routes-carry-the-sessions-narrowing", func(t *testing.T) {
		for _, c := range []struct {
			name string
			res  *token.Resources
			want []string
		}{
			{"two-dashboards", &token.Resources{Dashboards: []string{"AbCdEfGhIjKlMn-_", "zzzzzzzzzzzzzzzz"}}, []string{"AbCdEfGhIjKlMn-_", "zzzzzzzzzzzzzzzz"}},
			{"empty-list-opens-nothing", &token.Resources{Dashboards: []string{}}, []string{}},
		} {
			t.Run(c.name, func(t *testing.T) {
				narrowed := claims
				narrowed.SessionID = "sid-narrowed-" + c.name
				narrowed.Resources = c.res
				_, _, body := h.do("GET", viewerRoutes[0], "Bearer "+ek.token(t, narrowed), nil)
				var e echoed
				mustJSON(t, body, &e)
				pe := e.Principal.Embed
				if pe == nil || pe.Resources == nil || pe.Resources.Dashboards == nil || !slices.Equal(pe.Resources.Dashboards, c.want) {
					t.Fatalf("resources %+v, want %q", pe, c.want)
				}
			})
		}
	})
	t.Run("embed-token-of-another-deployment-still-reaches-the-viewer-routes", func(t *testing.T) {
		// The viewer's routes name no deployment: the gateway forwards the session's own,
		// and workspace-svc answers from it alone (its tests prove the 404 for another's).
		other := claims
		other.SessionID, other.DeploymentID = "sid-d2", a2
		_, _, body := h.do("GET", viewerRoutes[1], "Bearer "+ek.token(t, other), nil)
		var e echoed
		mustJSON(t, body, &e)
		if e.Principal.Embed == nil || e.Principal.Embed.DeploymentID != a2 {
			t.Fatalf("principal %+v", e.Principal)
		}
	})
}

func audience(p *identity.Principal) string {
	if p == nil {
		return ""
	}
	return p.Audience
}
