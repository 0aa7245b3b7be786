package embed

import (
	"slices"
	"testing"

	"github.com/analyticsco/platform/libs/identity"
)

// TestKeyReachOfBearerTokens: a person's bearer token reaches the whole account; a
// service account's token scoped to deployments reaches those only, as a scoped key
// does, and never the account as a whole.
func TestKeyReachOfBearerTokens(t *testing.T) {
	admin := &identity.User{ID: 1, Role: identity.RoleAdmin}
	for _, c := range []struct {
		name        string
		p           *identity.Principal
		deployments []int64
		accountWide bool
	}{
		{"unscoped-bearer", &identity.Principal{Credential: identity.CredentialBearer, User: admin}, nil, true},
		{"scoped-bearer", &identity.Principal{Credential: identity.CredentialBearer, User: admin, KeyScope: []int64{7}}, []int64{7}, false},
		{"scoped-key", &identity.Principal{Credential: identity.CredentialAPIKey, KeyKind: identity.KeyAccount, User: admin, KeyScope: []int64{7}}, []int64{7}, false},
	} {
		got := keyReach(c.p)
		if !slices.Equal(got.deployments, c.deployments) || got.accountWide != c.accountWide || got.covers(8) != (c.deployments == nil) {
			t.Errorf("%s: %+v, want deployments %v accountWide %v", c.name, got, c.deployments, c.accountWide)
		}
	}
}
