package identity_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/identity"
)

func newSigner(t *testing.T) *identity.Signer {
	t.Helper()
	var k [32]byte
	_, _ = rand.Read(k[:])
	s, err := identity.NewSigner(base64.StdEncoding.EncodeToString(k[:]))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignVerifyRoundTrip(t *testing.T) {
	s := newSigner(t)
	in := &identity.Principal{Credential: identity.CredentialAPIKey, Account: identity.Account{ID: 7, Plan: "premium"},
		User: &identity.User{ID: 3, Role: identity.RoleAdmin}, KeyKind: identity.KeyAccount, KeyScope: []int64{4}, Deployment: &identity.Deployment{ID: 4, ProductionBranch: "main"}}
	v, err := s.Sign(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Verify(v)
	if err != nil {
		t.Fatal(err)
	}
	if got.Account.ID != 7 || got.User.Role != identity.RoleAdmin || !got.InScope(4) || got.InScope(5) || got.Deployment.ID != 4 {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestVerifyRejects(t *testing.T) {
	s := newSigner(t)
	other := newSigner(t)
	v, _ := s.Sign(&identity.Principal{Credential: identity.CredentialBearer, User: &identity.User{ID: 1, Role: identity.RoleViewer}})
	payload, sig, _ := strings.Cut(v, ".")
	tampered := base64.RawURLEncoding.EncodeToString([]byte(`{"cred":"bearer","user":{"id":1,"role":"admin"},"exp":9999999999}`)) + "." + sig
	expired, _ := s.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }).Sign(&identity.Principal{})
	for name, val := range map[string]string{
		"empty": "", "no-dot": payload, "tampered-payload": tampered, "other-key": mustSign(t, other), "expired": expired,
		"garbage-sig": payload + ".!!!", "empty-sig": payload + ".",
	} {
		if _, err := s.Verify(val); err == nil {
			t.Errorf("%s: verified, want rejection", name)
		}
	}
}

func mustSign(t *testing.T, s *identity.Signer) string {
	v, err := s.Sign(&identity.Principal{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNewSignerRejectsShortKeys(t *testing.T) {
	if _, err := identity.NewSigner(base64.StdEncoding.EncodeToString(make([]byte, 16))); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
	if _, err := identity.NewSigner("not base64!"); err == nil {
		t.Fatal("a non-base64 key was accepted")
	}
}

func TestRoles(t *testing.T) {
	order := []string{identity.RoleViewer, identity.RoleAIBIUser, identity.RoleDeveloper, identity.RoleAdmin}
	for i := 1; i < len(order); i++ {
		if identity.RoleRank(order[i-1]) >= identity.RoleRank(order[i]) {
			t.Fatalf("%s must rank below %s", order[i-1], order[i])
		}
	}
	p := &identity.Principal{User: &identity.User{Role: identity.RoleDeveloper}}
	if !p.HasRole(identity.RoleAIBIUser) || p.HasRole(identity.RoleAdmin) {
		t.Fatal("HasRole")
	}
	if (&identity.Principal{}).HasRole(identity.RoleViewer) {
		t.Fatal("a principal without a user has no role")
	}
}

func TestRequireAndDeploymentFromPath(t *testing.T) {
	s := newSigner(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /d/{deploymentId}/x", func(w http.ResponseWriter, r *http.Request) {
		if _, err := identity.DeploymentFromPath(r); err != nil {
			w.WriteHeader(404)
			return
		}
		w.WriteHeader(204)
	})
	h := identity.Require(s, mux)
	good, _ := s.Sign(&identity.Principal{Deployment: &identity.Deployment{ID: 5}})
	for _, c := range []struct {
		name, path, hdr string
		want            int
	}{
		{"no-identity-401", "/d/5/x", "", 401},
		{"verified-deployment-204", "/d/5/x", good, 204},
		{"other-deployment-404", "/d/6/x", good, 404},
		{"non-numeric-404", "/d/abc/x", good, 404},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		if c.hdr != "" {
			req.Header.Set(identity.Header, c.hdr)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, rec.Code, c.want)
		}
		if c.want == 401 && (rec.Header().Get("WWW-Authenticate") == "" || !strings.Contains(rec.Body.String(), `"status":401`)) {
			t.Errorf("%s: 401 without challenge or JSON body", c.name)
		}
	}
}

// A forwarded identity is good for the one service it was signed
// for; a header captured on its way to one service is refused by another.
func TestForwardedIdentityIsBoundToItsService(t *testing.T) {
	s, err := identity.NewSigner(base64.StdEncoding.EncodeToString(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Sign(&identity.Principal{Credential: identity.CredentialBearer, Audience: "workspace-svc"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForService("workspace-svc").Verify(v); err != nil {
		t.Fatalf("its own service: %v", err)
	}
	for _, other := range []string{"embed-svc", "dbtsync-svc"} {
		if _, err := s.ForService(other).Verify(v); err == nil {
			t.Errorf("%s accepted a header signed for workspace-svc", other)
		}
	}
	none, _ := s.Sign(&identity.Principal{})
	if _, err := s.ForService("embed-svc").Verify(none); err == nil {
		t.Error("a header without an audience was accepted by a service")
	}
}

// TestEachServiceHoldsOnlyItsOwnKey: a service given its own key (ServiceKey)
// verifies what the gateway sends it, but can sign nothing another service accepts: a
// compromised service cannot mint an identity for the others.
func TestEachServiceHoldsOnlyItsOwnKey(t *testing.T) {
	gatewayKey := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	gw, err := identity.NewSigner(gatewayKey)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]*identity.Signer{}
	for _, svc := range []string{"workspace-svc", "embed-svc", "dbtsync-svc"} {
		k, err := identity.ServiceKey(gatewayKey, svc)
		if err != nil || !strings.HasPrefix(k, "svc:"+svc+":") || strings.Contains(k, gatewayKey) {
			t.Fatalf("ServiceKey(%s) = %q, %v", svc, k, err)
		}
		if own[svc], err = identity.NewSigner(k); err != nil {
			t.Fatal(err)
		}
	}
	admin := func(aud string) *identity.Principal {
		return &identity.Principal{Credential: identity.CredentialBearer, Audience: aud, User: &identity.User{ID: 1, Role: identity.RoleAdmin}}
	}
	for svc, s := range own {
		// What the gateway signs for the service verifies with the service's own key...
		v, err := gw.Sign(admin(svc))
		if err != nil {
			t.Fatal(err)
		}
		if p, err := s.ForService(svc).Verify(v); err != nil || p.User.ID != 1 {
			t.Errorf("%s: the gateway's header: %v", svc, err)
		}
		// ...and with the gateway's key, as services holding it did before.
		if _, err := gw.ForService(svc).Verify(v); err != nil {
			t.Errorf("%s: verified with the gateway's key: %v", svc, err)
		}
		for other, o := range own {
			if other == svc {
				continue
			}
			// The service cannot sign for another...
			if _, err := s.Sign(admin(other)); err == nil {
				t.Errorf("%s signed a header for %s", svc, other)
			}
			// ...and a header it signs for itself does not pass elsewhere, however labelled.
			forged, _ := s.Sign(admin(svc))
			if _, err := o.ForService(other).Verify(forged); err == nil {
				t.Errorf("%s's header accepted by %s", svc, other)
			}
			if _, err := gw.ForService(other).Verify(forged); err == nil {
				t.Errorf("%s's header accepted by %s holding the gateway's key", svc, other)
			}
		}
	}
	// The gateway's key and another service's key are distinct from the service's.
	if _, err := identity.ServiceKey("svc:workspace-svc:"+gatewayKey, "embed-svc"); err == nil {
		t.Error("a service key derived another service's key")
	}
	for _, bad := range []string{"svc::" + gatewayKey, "svc:x", "svc:x:short"} {
		if _, err := identity.NewSigner(bad); err == nil {
			t.Errorf("NewSigner(%q) accepted", bad)
		}
	}
}
