package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/identity"
)

// Padding one valid token differently on each request must not pin a new signed-identity
// cache entry holding the whole Authorization header: variants of one credential share
// one fixed-size key.
func TestSignedIdentityCacheKeyIsNormalisedAndBounded(t *testing.T) {
	key := func(h string) [32]byte {
		return credentialKey(parseCredential(h))
	}
	base := key("Bearer tok.en.sig")
	for _, v := range []string{"bearer tok.en.sig", "BEARER    tok.en.sig", "Bearer tok.en.sig" + strings.Repeat(" ", 60000), "Bearer \t tok.en.sig\t"} {
		if key(v) != base {
			t.Errorf("%q: a variant of the same credential got another cache key", v[:min(len(v), 30)])
		}
	}
	if key("Bearer other") == base || key("Api-Key tok.en.sig") == base {
		t.Error("different credentials share a cache key")
	}
}

// BenchmarkSignedIdentity compares the two ways to the header of an unchanged principal
// (a bearer user's, with a deployment): signing it on every request, and the cache of
// signed headers (the credential's SHA-256, the principal's fingerprint, a lookup). The
// README's "Performance" section quotes its figures.
func BenchmarkSignedIdentity(b *testing.B) {
	signer, err := identity.NewSigner("c2lnbmluZy1rZXktb2YtdGhlLWJlbmNobWFyay0zMmJ5dGVzIQ==")
	if err != nil {
		b.Fatal(err)
	}
	principal := func() *identity.Principal {
		return &identity.Principal{Credential: identity.CredentialBearer,
			Account:    identity.Account{ID: 1, Plan: "enterprise", EmbeddingEnabled: true, UseCreatorMode: true},
			User:       &identity.User{ID: 7, Username: "ada", Email: "ada@acme.test", FirstName: "Ada", Role: identity.RoleAdmin},
			Deployment: &identity.Deployment{ID: 3, ProductionBranch: "main"}, Audience: "workspace-svc", ClientAddr: "203.0.113.9"}
	}
	authz := "Bearer " + strings.Repeat("t", 420) // a signed user token is about this long
	b.Run("sign-every-request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := signer.Sign(principal()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		s := newSignedIdentities(time.Now)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.header(signer, credentialKey(parseCredential(authz)), principal()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
