package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serviceAccountRules: service accounts and the client-credentials grant, through the
// real services (docs/service-accounts.md).
var serviceAccountRules = []rule{
	{"a-token-acts-under-the-role-on-workspace-and-dbt-sync-routes", func(t *testing.T, p *platform) {
		dev := p.serviceAccountToken(t, "developer", "")
		p.call(t, "POST", p.ws(p.dep1, "/folders"), dev, map[string]any{"name": p.unique("sa-folder")}).want(t, 200)
		p.call(t, "GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches", p.dep1), dev, nil).want(t, 200)
		viewer := p.serviceAccountToken(t, "viewer", "")
		p.call(t, "GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches", p.dep1), viewer, nil).want(t, 403)
		p.call(t, "POST", "/api/v1/api-keys", viewer, map[string]any{"name": "x", "kind": "account"}).want(t, 403)
	}},
	{"a-scoped-token-reaches-its-deployments-only", func(t *testing.T, p *platform) {
		tok := p.serviceAccountToken(t, "developer", fmt.Sprint(p.dep1))
		p.call(t, "GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches", p.dep1), tok, nil).want(t, 200)
		p.call(t, "GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches", p.dep2), tok, nil).want(t, 403).wantCode(t, "key_out_of_scope")
	}},
	{"an-admin-service-accounts-key-mints-a-session", func(t *testing.T, p *platform) {
		for _, c := range []struct {
			role string
			want int
		}{{"admin", 200}, {"developer", 403}} {
			sa := p.createServiceAccount(t, c.role)
			var key struct{ Token string }
			p.call(t, "POST", "/api/v1/api-keys", bearer(p.acme.Users["admin"]), map[string]any{"name": "sa-mint", "kind": "account",
				"owner": map[string]any{"type": "serviceAccount", "id": sa}}).want(t, 201).decode(t, &key)
			p.call(t, "POST", generateSession, apiKey(key.Token), map[string]any{"deploymentId": p.dep1, "externalId": p.unique("sa-viewer")}).want(t, c.want)
		}
	}},
	{"a-deleted-service-account-stops-within-the-revocation-bound", func(t *testing.T, p *platform) {
		sa := p.createServiceAccount(t, "developer")
		tok := "Bearer " + p.token(t, p.createClientSecret(t, sa), "").want(t, 200).obj(t)["access_token"].(string)
		path := fmt.Sprintf("/build/api/v1/deployments/%d/branches", p.dep1)
		p.call(t, "GET", path, tok, nil).want(t, 200)
		p.call(t, "DELETE", fmt.Sprintf("/api/v1/service-accounts/%d", sa), bearer(p.acme.Users["admin"]), nil).want(t, 204)
		deadline := time.Now().Add(2 * time.Second)
		for p.call(t, "GET", path, tok, nil).status != 401 {
			if time.Now().After(deadline) {
				t.Fatal("the deleted service account's token still works 2 s later")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}},
	{"token-errors-have-the-oauth-body", func(t *testing.T, p *platform) {
		s := p.createClientSecret(t, p.createServiceAccount(t, "viewer"))
		s.secret = "sas_wrong"
		r := p.token(t, s, "")
		if r.status != 401 || r.obj(t)["error"] != "invalid_client" {
			t.Fatalf("wrong secret: %d %s", r.status, r.body)
		}
		if r := p.token(t, s, "", "grant_type", "password"); r.status != 400 || r.obj(t)["error"] != "unsupported_grant_type" {
			t.Fatalf("password grant: %d %s", r.status, r.body)
		}
	}},
}

type saSecret struct{ clientID, secret string }

func (p *platform) createServiceAccount(t *testing.T, role string) int64 {
	t.Helper()
	var sa struct{ ID int64 }
	p.call(t, "POST", "/api/v1/service-accounts", bearer(p.acme.Users["admin"]), map[string]any{"name": p.unique("sa"), "role": role}).want(t, 201).decode(t, &sa)
	return sa.ID
}

func (p *platform) createClientSecret(t *testing.T, sa int64) saSecret {
	t.Helper()
	var s struct{ ClientID, ClientSecret string }
	p.call(t, "POST", fmt.Sprintf("/api/v1/service-accounts/%d/secrets", sa), bearer(p.acme.Users["admin"]), nil).want(t, 201).decode(t, &s)
	return saSecret{s.ClientID, s.ClientSecret}
}

// token asks the token endpoint for a token, the client's credentials by HTTP Basic;
// extra overrides form fields by name/value pairs.
func (p *platform) token(t *testing.T, s saSecret, scope string, extra ...string) response {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		form.Set(extra[i], extra[i+1])
	}
	req, err := http.NewRequest("POST", p.s.Gateway+"/api/v1/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(s.clientID), url.QueryEscape(s.secret))
	return p.send(t, req)
}

// serviceAccountToken is the bearer Authorization of a new service account of acme.
func (p *platform) serviceAccountToken(t *testing.T, role, scope string) string {
	t.Helper()
	tok, _ := p.token(t, p.createClientSecret(t, p.createServiceAccount(t, role)), scope).want(t, 200).obj(t)["access_token"].(string)
	return "Bearer " + tok
}
