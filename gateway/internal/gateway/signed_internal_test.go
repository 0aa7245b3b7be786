package gateway

import (
	"strings"
	"testing"
)

// Security review #14: the signed-identity cache was keyed on the raw Authorization
// header, so padding one valid token differently on each request pinned a new entry
// holding the whole header. Variants of one credential now share one fixed-size key.
func TestFinding14_SignedIdentityCacheKeyIsNormalisedAndBounded(t *testing.T) {
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
