// Package platformctl implements the platformctl commands over the identity store.
package platformctl

import (
	"context"
	"fmt"
	"time"

	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
)

// SeedTokenTTL is how long the bearer tokens printed by seed stay valid.
const SeedTokenTTL = 24 * time.Hour

// SeedUser is a user in the seed output.
type SeedUser struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Email    string `json:"email"`
	Role     string `json:"role"`
	Bearer   string `json:"bearer"`
}

// SeedDeployment is a deployment in the seed output.
type SeedDeployment struct {
	ID               int64  `json:"id"`
	ProductionBranch string `json:"productionBranch"`
}

// SeedAccount is an account in the seed output.
type SeedAccount struct {
	ID                int64               `json:"id"`
	Plan              string              `json:"plan"`
	EmbeddingEnabled  bool                `json:"embeddingEnabled"`
	UseCreatorMode    bool                `json:"useCreatorMode"`
	ExternalUserLimit int64               `json:"externalUserLimit"`
	DefaultTenant     string              `json:"defaultEmbedTenant"`
	Deployments       []SeedDeployment    `json:"deployments"`
	Users             map[string]SeedUser `json:"users"`
	APIKeys           map[string]string   `json:"apiKeys"`
}

// SeedOutput is what `platformctl seed` prints.
type SeedOutput struct {
	Gateway  string                 `json:"gateway"`
	Accounts map[string]SeedAccount `json:"accounts"`
}

type seedUser struct{ key, role string }

type seedAccount struct {
	spec        store.AccountSpec
	deployments []string
	users       []seedUser
	keys        []seedKey
}

type seedKey struct {
	name    string
	user    string // the users[] key that owns it
	kind    string
	scopeTo int // 1-based index into deployments; 0 = unscoped
}

var seedAccounts = []seedAccount{
	{
		spec:        store.AccountSpec{Name: "acme", Plan: store.PlanEnterprise, EmbeddingEnabled: true, UseCreatorMode: true, DefaultEmbedTenant: "acme-default"},
		deployments: []string{"acme-analytics", "acme-sandbox"},
		users: []seedUser{{"admin", identity.RoleAdmin}, {"developer", identity.RoleDeveloper},
			{"aiBiUser", identity.RoleAIBIUser}, {"viewer", identity.RoleViewer}},
		keys: []seedKey{{"admin", "admin", identity.KeyAccount, 0}, {"adminScoped", "admin", identity.KeyAccount, 1},
			{"personal", "admin", identity.KeyPersonal, 0}},
	},
	{
		spec:        store.AccountSpec{Name: "globex", Plan: store.PlanPremium, EmbeddingEnabled: true, UseCreatorMode: false, DefaultEmbedTenant: "globex-default"},
		deployments: []string{"globex-main"},
		users:       []seedUser{{"admin", identity.RoleAdmin}, {"aiBiUser", identity.RoleAIBIUser}},
		keys:        []seedKey{{"admin", "admin", identity.KeyAccount, 0}},
	},
	{
		spec:        store.AccountSpec{Name: "initech", Plan: store.PlanFree, EmbeddingEnabled: false, UseCreatorMode: false, DefaultEmbedTenant: "initech-default"},
		deployments: []string{"initech-main"},
		users:       []seedUser{{"admin", identity.RoleAdmin}},
		keys:        []seedKey{{"admin", "admin", identity.KeyAccount, 0}},
	},
}

// Seed creates the demo accounts once (updating them to the seed's settings on later
// runs, keeping their ids) and returns fresh credentials for them.
func Seed(ctx context.Context, st *store.Store, issuer credentials.Issuer, gateway string) (SeedOutput, error) {
	out := SeedOutput{Gateway: gateway, Accounts: map[string]SeedAccount{}}
	for _, sa := range seedAccounts {
		acct, err := st.UpsertAccount(ctx, sa.spec)
		if err != nil {
			return out, fmt.Errorf("account %s: %w", sa.spec.Name, err)
		}
		res := SeedAccount{ID: acct.ID, Plan: acct.Plan, EmbeddingEnabled: acct.EmbeddingEnabled, UseCreatorMode: acct.UseCreatorMode,
			ExternalUserLimit: acct.ExternalUserLimit, DefaultTenant: acct.DefaultEmbedTenant,
			Users: map[string]SeedUser{}, APIKeys: map[string]string{}}
		var deps []store.Deployment
		for _, name := range sa.deployments {
			d, err := st.UpsertDeployment(ctx, acct.ID, name, "main")
			if err != nil {
				return out, fmt.Errorf("deployment %s: %w", name, err)
			}
			deps = append(deps, d)
			res.Deployments = append(res.Deployments, SeedDeployment{ID: d.ID, ProductionBranch: d.ProductionBranch})
		}
		users := map[string]store.User{}
		for _, su := range sa.users {
			username := sa.spec.Name + "-" + kebab(su.key)
			u, err := st.UpsertUser(ctx, store.UserSpec{AccountID: acct.ID, Username: username,
				Email: username + "@" + sa.spec.Name + ".example", FirstName: firstName(su.key), Role: su.role})
			if err != nil {
				return out, fmt.Errorf("user %s: %w", username, err)
			}
			users[su.key] = u
			tok, _, err := issuer.Issue(u.ID, SeedTokenTTL)
			if err != nil {
				return out, err
			}
			res.Users[su.key] = SeedUser{ID: u.ID, Username: u.Username, Email: u.Email, Role: u.Role, Bearer: tok}
		}
		for _, sk := range sa.keys {
			var scope []int64
			if sk.scopeTo > 0 {
				scope = []int64{deps[sk.scopeTo-1].ID}
			}
			key, err := CreateKey(ctx, st, users[sk.user], sk.kind, scope, "seed "+sk.name, 0)
			if err != nil {
				return out, err
			}
			res.APIKeys[sk.name] = key
		}
		out.Accounts[sa.spec.Name] = res
	}
	return out, nil
}

// CreateKey creates an API key for user and returns the key, which is shown only now:
// the API-key service's Create (the same rules as POST /api/v1/api-keys), unaudited.
// A zero ttl takes the service's longest.
func CreateKey(ctx context.Context, st *store.Store, u store.User, kind string, scope []int64, name string, ttl time.Duration) (string, error) {
	req := apikeys.CreateRequest{Name: name, Kind: kind, Scope: scope, Owner: &apikeys.Owner{Type: apikeys.OwnerUser, ID: u.ID}}
	if ttl > 0 {
		exp := time.Now().Add(ttl)
		req.ExpiresAt = &exp
	}
	out, err := apikeys.New(st, nil, apikeys.Limits{}, nil).Create(ctx, apikeys.Operator(u.AccountID), req)
	return out.Token, err
}

func kebab(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			b = append(b, '-', c+'a'-'A')
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

func firstName(key string) string {
	switch key {
	case "admin":
		return "Ada"
	case "developer":
		return "Dev"
	case "aiBiUser":
		return "Bea"
	case "viewer":
		return "Vic"
	}
	return ""
}
