package embed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/identity"
)

// TestGenerateSessionRefusals: each rule of generate-session, with the status, code and
// message a client gets, and nothing written by a refused mint.
func TestGenerateSessionRefusals(t *testing.T) {
	type request = embed.GenerateSessionRequest
	tests := []struct {
		name    string
		caller  func(f *fixture, p *identity.Principal) // changes the admin key's principal
		req     func(f *fixture) request
		status  int
		code    string
		message string // a substring
	}{
		{"generate-session-404-another-accounts-deployment", nil,
			func(f *fixture) request { return request{DeploymentID: ptr(f.otherDep), ExternalID: ptr("u")} }, 404, "not_found", "not found"},
		{"generate-session-404-unknown-deployment", nil,
			func(f *fixture) request { return request{DeploymentID: ptr(int64(987654)), ExternalID: ptr("u")} }, 404, "not_found", "deployment 987654 not found"},
		{"generate-session-403-key-out-of-scope", func(f *fixture, p *identity.Principal) { p.KeyScope = []int64{f.otherDep} },
			func(f *fixture) request { return f.external("u") }, 403, "key_out_of_scope", "scoped to other deployments"},
		{"generate-session-404-before-scope-for-another-accounts-deployment", func(f *fixture, p *identity.Principal) { p.KeyScope = []int64{f.dep} },
			func(f *fixture) request { return request{DeploymentID: ptr(f.otherDep), ExternalID: ptr("u")} }, 404, "not_found", "not found"},
		{"generate-session-403-personal-key", func(_ *fixture, p *identity.Principal) { p.KeyKind = identity.KeyPersonal },
			func(f *fixture) request { return f.external("u") }, 403, "personal_key", "personal API key"},
		{"generate-session-403-bearer", func(_ *fixture, p *identity.Principal) { p.Credential = identity.CredentialBearer },
			func(f *fixture) request { return f.external("u") }, 403, "forbidden", "account API key"},
		{"generate-session-403-free-plan", func(_ *fixture, p *identity.Principal) { p.Account.Plan = "free" },
			func(f *fixture) request { return f.external("u") }, 403, "plan_not_eligible", "premium or enterprise"},
		{"generate-session-403-embedding-off", func(_ *fixture, p *identity.Principal) { p.Account.EmbeddingEnabled = false },
			func(f *fixture) request { return f.external("u") }, 403, "forbidden", "embedding is not enabled"},
		{"generate-session-403-creator-mode-without-flag", func(_ *fixture, p *identity.Principal) { p.Account.UseCreatorMode = false },
			func(f *fixture) request { r := f.external("u"); r.CreatorMode = ptr(true); return r }, 403, "creator_mode_disabled", "useCreatorMode"},
		{"generate-session-404-unknown-internal-user", nil,
			func(f *fixture) request { return request{DeploymentID: ptr(f.dep), InternalID: ptr("globex-admin")} }, 404, "not_found", `internal user "globex-admin"`},
		{"generate-session-400-internal-with-groups-named-first", nil,
			func(f *fixture) request {
				return request{DeploymentID: ptr(f.dep), InternalID: ptr("acme-admin"), Groups: []string{}, UserProfile: &embed.UserProfile{}, SecurityContext: json.RawMessage(`{}`)}
			}, 400, "invalid_request", "groups is not allowed with internalId"},
		{"generate-session-400-unknown-groups-in-request-order", nil,
			func(f *fixture) request { r := f.external("u"); r.Groups = []string{"zeta", "alpha"}; return r }, 400, "invalid_request", "Groups with names zeta, alpha not found"},
		{"generate-session-400-unknown-attribute", nil,
			func(f *fixture) request {
				r := f.external("u")
				r.UserAttributes = []embed.AttributeValue{{Name: "nope", Value: json.RawMessage(`"x"`)}}
				return r
			}, 400, "invalid_request", "User attributes not found"},
		{"generate-session-400-branch-not-served", nil,
			func(f *fixture) request { r := f.external("u"); r.BranchName = ptr("stale-x"); return r }, 400, "branch_not_served", "not served"},
		{"generate-session-404-not-a-branch", nil,
			func(f *fixture) request { r := f.external("u"); r.BranchName = ptr("nope"); return r }, 404, "branch_not_found", "not a branch"},
		{"generate-session-400-validation-before-the-deployment", nil,
			func(f *fixture) request { return request{DeploymentID: ptr(f.otherDep)} }, 400, "invalid_request", "exactly one of externalId and internalId"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			p := f.adminKey()
			if tc.caller != nil {
				tc.caller(f, p)
			}
			_, err := f.svc.GenerateSession(context.Background(), p, tc.req(f))
			status, code, msg := answer(err)
			if status != tc.status || code != tc.code || !strings.Contains(msg, tc.message) {
				t.Fatalf("%d %s %q, want %d %s with %q", status, code, msg, tc.status, tc.code, tc.message)
			}
			f.nothingWritten(t)
		})
	}
}

// TestGenerateSessionWhenTheIdentityStoreCannotBeAsked: a 503, never a 404.
func TestGenerateSessionWhenTheIdentityStoreCannotBeAsked(t *testing.T) {
	f := newFixture(t)
	f.dir.Fail(errGatewayDown)
	_, err := f.svc.GenerateSession(context.Background(), f.adminKey(), f.external("u"))
	if status, code, _ := answer(err); status != 503 || code != "unavailable" {
		t.Fatalf("%d %s, want 503 unavailable", status, code)
	}
	f.nothingWritten(t)
}

// TestGenerateSessionTakesTheDeploymentsProductionBranch: the production branch is the
// identity store's, resolved without asking dbtsync-svc.
func TestGenerateSessionTakesTheDeploymentsProductionBranch(t *testing.T) {
	f := newFixture(t)
	f.dir.AddDeployment(embed.Deployment{ID: f.dep, AccountID: accountID, ProductionBranch: "trunk"})
	for _, branch := range []*string{nil, ptr("production"), ptr("trunk")} {
		req := f.external("u")
		req.BranchName = branch
		dry, err := f.svc.DryRunSession(context.Background(), f.adminKey(), req)
		if err != nil || dry.Effective.BranchName != "trunk" || !dry.Effective.Production || dry.Effective.DeploymentID != f.dep {
			t.Fatalf("branch %v: %+v %v", branch, dry.Effective, err)
		}
	}
}

// TestInternalUserComesFromTheIdentityStore: an internalId session acts as the identity
// store's user, with its role.
func TestInternalUserComesFromTheIdentityStore(t *testing.T) {
	f := newFixture(t)
	dry, err := f.svc.DryRunSession(context.Background(), f.adminKey(), embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), InternalID: ptr(" acme-admin ")})
	u := dry.Effective.User
	if err != nil || u.Kind != "internal" || u.ID != 7 || *u.Username != "acme-admin" || *u.Email != "ada@acme.example" || *u.DisplayName != "Ada" {
		t.Fatalf("%+v %v", u, err)
	}
}

// TestDefinitionTypeConflictWritesNothing: a definition cannot change its type; the
// request that tries is 409 "cannot change type" and writes none of its other
// definitions, its user or its session.
func TestDefinitionTypeConflictWritesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	req := embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr("first"), CreatorMode: ptr(true), EmbedTenantName: ptr("cm-tenant"),
		UserAttributeDefinitions: []embed.DefinitionInput{{Name: "level", Type: embed.TypeNumber}}}
	f.mint(t, f.adminKey(), req)
	req.ExternalID = ptr("second")
	req.GroupDefinitions = []embed.DefinitionInput{{Name: "new-group"}}
	req.UserAttributeDefinitions = []embed.DefinitionInput{{Name: "other", Type: embed.TypeString}, {Name: "level", Type: embed.TypeString}}
	_, err := f.svc.GenerateSession(ctx, f.adminKey(), req)
	if status, code, msg := answer(err); status != 409 || code != "definition_type_conflict" || msg != "cannot change type" {
		t.Fatalf("%d %s %q", status, code, msg)
	}
	defs, _ := f.store.FindDefinitions(ctx, accountID, "cm-tenant", []string{"level", "other", "new-group"})
	if len(defs) != 1 || defs[0].Type != embed.TypeNumber {
		t.Fatalf("definitions after the refusal: %+v", defs)
	}
	if _, err := f.store.ExternalUser(ctx, accountID, "second"); err == nil {
		t.Fatal("the refused request's user was written")
	}
}

// TestExternalUserLimitUnderConcurrency: with a limit of 5 and one user, 16 new users
// minted at once give exactly 4 sessions; the others are 403 external_user_limit, naming
// the limit; a known user still mints at the limit; one new user minted 8 times at once
// is one user.
func TestExternalUserLimitUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.adminKey()
	p.Account.ExternalUserLimit = 5
	f.mint(t, p, f.external("first"))
	var ok, limited atomic.Int64
	together(16, func(i int) {
		_, err := f.svc.GenerateSession(ctx, p, f.external(fmt.Sprintf("user-%d", i)))
		status, code, msg := answer(err)
		switch {
		case err == nil:
			ok.Add(1)
		case status == 403 && code == "external_user_limit" && strings.Contains(msg, "limit of 5 external users"):
			limited.Add(1)
		default:
			t.Errorf("%d %s %q", status, code, msg)
		}
	})
	if ok.Load() != 4 || limited.Load() != 12 {
		t.Fatalf("%d minted, %d refused for the limit; want 4 and 12", ok.Load(), limited.Load())
	}
	if n, _ := f.store.ExternalUserCount(ctx, accountID); n != 5 {
		t.Fatalf("counter %d, want 5", n)
	}
	f.mint(t, p, f.external("first"))
	p.Account.ExternalUserLimit = 1000
	together(8, func(int) {
		if _, err := f.svc.GenerateSession(ctx, p, f.external("same-new-user")); err != nil {
			t.Error(err)
		}
	})
	if n, _ := f.store.ExternalUserCount(ctx, accountID); n != 6 {
		t.Fatalf("counter after 8 mints of one new user: %d, want 6", n)
	}
}

// TestExternalUserLimitWithDeletes: deleting users racing new mints never leaves more
// users than the limit, and every place a delete frees can be taken again.
func TestExternalUserLimitWithDeletes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.adminKey()
	p.Account.ExternalUserLimit = 5
	for i := range 5 {
		f.mint(t, p, f.external(fmt.Sprintf("old-%d", i)))
	}
	if _, err := f.svc.GenerateSession(ctx, p, f.external("one-too-many")); err == nil {
		t.Fatal("a sixth user under a limit of 5")
	}
	var created atomic.Int64
	together(15, func(i int) {
		if i < 5 {
			if _, err := f.svc.DeleteTenantUser(ctx, p, "acme-default", fmt.Sprintf("old-%d", i)); err != nil {
				t.Errorf("delete old-%d: %v", i, err)
			}
			return
		}
		if _, err := f.svc.GenerateSession(ctx, p, f.external(fmt.Sprintf("new-%d", i))); err == nil {
			created.Add(1)
		}
	})
	n, _ := f.store.ExternalUserCount(ctx, accountID)
	if created.Load() > 5 || n != created.Load() {
		t.Fatalf("limit 5: %d created after 5 deletes, counter %d", created.Load(), n)
	}
	for i := int(n); i < 5; i++ {
		f.mint(t, p, f.external(fmt.Sprintf("later-%d", i)))
	}
	if _, err := f.svc.GenerateSession(ctx, p, f.external("over")); err == nil {
		t.Fatal("over the limit after refilling")
	}
}

// TestMintEventNamesItsDeployment: the audit event of a mint is its deployment's when the
// deployment is the caller's account's; another's is only named, as asked.
func TestMintEventNamesItsDeployment(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.mint(t, f.adminKey(), f.external("u"))
	_, _ = f.svc.GenerateSession(ctx, f.adminKey(), embed.GenerateSessionRequest{DeploymentID: ptr(f.otherDep), ExternalID: ptr("u")})
	evs := f.trail.Events()
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	if ev := evs[0]; ev.DeploymentID != f.dep || ev.Details["requestedDeploymentId"] != nil || ev.Outcome.Status != 200 || ev.Target.ID == "" {
		t.Fatalf("the mint's event: %+v", ev)
	}
	if ev := evs[1]; ev.DeploymentID != 0 || ev.Details["requestedDeploymentId"] != f.otherDep || ev.Outcome.Status != 404 {
		t.Fatalf("the refused mint's event: %+v", ev)
	}
}

// TestTenantLimit: past the account's tenant limit a mint naming a new tenant is 400,
// writes no tenant, and the dry run answers the same; a known tenant still mints.
func TestTenantLimit(t *testing.T) {
	f := newFixture(t).withLimits(embed.Limits{TenantsPerAccount: 2})
	ctx := context.Background()
	inTenant := func(tenant string) embed.GenerateSessionRequest {
		r := f.external("u")
		r.EmbedTenantName = ptr(tenant)
		return r
	}
	f.mint(t, f.adminKey(), inTenant("tenant-one"))
	f.mint(t, f.adminKey(), inTenant("tenant-two"))
	_, dryErr := f.svc.DryRunSession(ctx, f.adminKey(), inTenant("tenant-three"))
	_, err := f.svc.GenerateSession(ctx, f.adminKey(), inTenant("tenant-three"))
	status, code, msg := answer(err)
	if status != 400 || code != "invalid_request" || !strings.Contains(msg, "the account has 2 embed tenants, the limit") || !strings.Contains(msg, `"tenant-three"`) || strings.Contains(msg, "EMBED_") {
		t.Fatalf("mint in a third tenant: %d %s %q", status, code, msg)
	}
	if ds, dc, dm := answer(dryErr); ds != status || dc != code || dm != msg {
		t.Fatalf("the dry run answers %d %s %q, the mint %d %s %q", ds, dc, dm, status, code, msg)
	}
	if ok, _ := f.store.TenantExists(ctx, accountID, "tenant-three"); ok {
		t.Fatal("the refused tenant was recorded")
	}
	if n, _ := f.store.CountTenants(ctx, accountID, 10); n != 2 {
		t.Fatalf("%d tenants, want 2", n)
	}
	f.mint(t, f.adminKey(), inTenant("tenant-one"))
}

// TestExternalUserLimitDefault: an account without a limit of its own has the spec's
// 10,000 external users; the next new user is refused by the mint and the dry run alike.
func TestExternalUserLimitDefault(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const specLimit = 10_000 // the spec's Limits, not the constant: changing the default must fail here
	for i := range specLimit {
		if _, err := f.store.CreateExternalUser(ctx, accountID, fmt.Sprintf("seed-%d", i), specLimit, embed.UserUpdate{Scope: embed.AccountScope}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	_, dryErr := f.svc.DryRunSession(ctx, f.adminKey(), f.external("one-more"))
	_, err := f.svc.GenerateSession(ctx, f.adminKey(), f.external("one-more"))
	for name, err := range map[string]error{"mint": err, "dry run": dryErr} {
		if status, code, msg := answer(err); status != 403 || code != "external_user_limit" || !strings.Contains(msg, "limit of 10000 external users") {
			t.Errorf("%s: %d %s %q", name, status, code, msg)
		}
	}
	f.mint(t, f.adminKey(), f.external("seed-7"))
}

// TestAttributeValueLimit: a userAttributes value is stored on the user and signed into
// its tokens, so its size is bounded: one byte past EMBED_MAX_ATTRIBUTE_VALUE_BYTES is 413
// naming the limit and the entry, and writes nothing; a value of exactly the limit mints.
func TestAttributeValueLimit(t *testing.T) {
	const limit = 64
	f := newFixture(t).withLimits(embed.Limits{AttributeValueBytes: limit})
	req := func(value string) embed.GenerateSessionRequest {
		return embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr("big-values"), CreatorMode: ptr(true), EmbedTenantName: ptr("cm-tenant"),
			UserAttributeDefinitions: []embed.DefinitionInput{{Name: "region", Type: embed.TypeString}},
			UserAttributes:           []embed.AttributeValue{{Name: "region", Value: json.RawMessage(value)}}}
	}
	atLimit := `"` + strings.Repeat("x", limit-2) + `"`
	over := `"` + strings.Repeat("x", limit-1) + `"`
	_, err := f.svc.GenerateSession(context.Background(), f.adminKey(), req(over))
	if status, code, msg := answer(err); status != 413 || !strings.Contains(msg, "userAttributes[0]") || !strings.Contains(msg, "over the limit of 64 bytes") || strings.Contains(msg, "EMBED_") {
		t.Fatalf("a value of %d bytes: %d %s %q", len(over), status, code, msg)
	}
	f.nothingWritten(t)
	f.mint(t, f.adminKey(), req(atLimit))
}
