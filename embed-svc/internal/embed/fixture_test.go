package embed_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/memstore"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// The service's rules, tested on the in-memory stores (which the contract suites hold to
// MongoDB's and Redis's behaviour): no server is started. Each test builds its own
// fixture.

// fixture is the service over fresh fakes, with one account (acc) that may mint, its
// deployments (dep, dep2) and another account's deployment (otherDep).
type fixture struct {
	svc      embed.Service
	deps     embed.Ports
	opts     embed.Options
	store    *memstore.Store
	sessions *memstore.Sessions
	dir      *memstore.Directory
	trail    *audit.Memory
	reach    *fakeReach
	acc      identity.Account
	dep      int64
	dep2     int64
	otherDep int64
}

const (
	accountID      = 41
	otherAccountID = 42
)

var deployments atomic.Int64

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{store: memstore.New(), sessions: memstore.NewSessions(nil), dir: memstore.NewDirectory(), trail: &audit.Memory{Service: "embed-svc"},
		acc: identity.Account{ID: accountID, Plan: "enterprise", EmbeddingEnabled: true, UseCreatorMode: true, DefaultEmbedTenant: "acme-default"},
		dep: deployments.Add(1), dep2: deployments.Add(1), otherDep: deployments.Add(1)}
	f.dir.AddDeployment(embed.Deployment{ID: f.dep, AccountID: accountID, ProductionBranch: "main"})
	f.dir.AddDeployment(embed.Deployment{ID: f.dep2, AccountID: accountID, ProductionBranch: "main"})
	f.dir.AddDeployment(embed.Deployment{ID: f.otherDep, AccountID: otherAccountID, ProductionBranch: "main"})
	f.dir.AddUser(embed.InternalUser{ID: 7, AccountID: accountID, Username: "acme-admin", Email: "ada@acme.example", FirstName: "Ada", Role: identity.RoleAdmin})
	f.reach = &fakeReach{}
	f.deps = embed.Ports{Catalog: f.store, Users: f.store, Directory: f.dir, Sessions: f.sessions, Records: f.store,
		Branches: branches{}, Signer: newSigner(t), Audit: f.trail, Reach: f.reach}
	f.opts = embed.Options{Issuer: "https://embed.test"}
	f.svc = embed.NewService(f.deps, f.opts)
	return f
}

// withSessionClock gives f a session store whose keys expire on a clock that moves by
// what the returned offset holds, and rebuilds the service over it.
func (f *fixture) withSessionClock() *atomic.Int64 {
	var offset atomic.Int64
	f.sessions = memstore.NewSessions(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	f.deps.Sessions = f.sessions
	f.svc = embed.NewService(f.deps, f.opts)
	return &offset
}

// withLimits rebuilds f's service over the same stores with limits l.
func (f *fixture) withLimits(l embed.Limits) *fixture {
	f.opts.Limits = l
	f.svc = embed.NewService(f.deps, f.opts)
	return f
}

// adminKey is the principal of an admin's account API key of acc, as the gateway signs it.
func (f *fixture) adminKey() *identity.Principal {
	return &identity.Principal{Credential: identity.CredentialAPIKey, KeyKind: identity.KeyAccount, KeyID: "key-1", Account: f.acc,
		User: &identity.User{ID: 7, Username: "acme-admin", Role: identity.RoleAdmin}}
}

// scopedKey is the principal of an admin's account API key of acc scoped to deployments.
func (f *fixture) scopedKey(deployments ...int64) *identity.Principal {
	p := f.adminKey()
	p.KeyID, p.KeyScope = "key-scoped", deployments
	return p
}

// personalKey is the principal of the admin's personal API key (unscoped).
func (f *fixture) personalKey() *identity.Principal {
	p := f.adminKey()
	p.KeyID, p.KeyKind = "key-personal", identity.KeyPersonal
	return p
}

// mint generates a session for an external user and fails t unless it succeeds.
func (f *fixture) mint(t *testing.T, p *identity.Principal, req embed.GenerateSessionRequest) string {
	t.Helper()
	id, err := f.svc.GenerateSession(context.Background(), p, req)
	if err != nil {
		t.Fatalf("generate-session: %v", err)
	}
	return id
}

// external is a generate-session request for an external user of f's deployment.
func (f *fixture) external(ext string) embed.GenerateSessionRequest {
	return embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr(ext)}
}

func ptr[T any](v T) *T { return &v }

// answer is what a client is answered for err: status, code and message.
func answer(err error) (int, string, string) {
	status, code, msg, _ := errs.Answer(err)
	return status, code, msg
}

// branches is dbtsync-svc's resolver as the fixture knows it: "feature-*" is served,
// "stale-*" exists and is not served, anything else is no branch.
type branches struct{}

func (branches) ResolveBranch(_ context.Context, _ int64, branch, production string) (embed.BranchStatus, error) {
	switch {
	case branch == production:
		return embed.BranchStatus{Exists: true, Served: true, Production: true}, nil
	case len(branch) > 8 && branch[:8] == "feature-":
		return embed.BranchStatus{Exists: true, Served: true}, nil
	case len(branch) > 6 && branch[:6] == "stale-":
		return embed.BranchStatus{Exists: true}, nil
	}
	return embed.BranchStatus{}, nil
}

// signer signs with one Ed25519 key.
type signer struct{ key ed25519.PrivateKey }

func newSigner(t *testing.T) *signer {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{key: key}
}

func (s *signer) Sign(_ context.Context, claims jwt.Claims) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(s.key)
}

func (s *signer) JWKS(context.Context) (embed.JWKSet, error) { return embed.JWKSet{}, nil }

// nothingWritten fails t when the account has any tenant, user or session record.
func (f *fixture) nothingWritten(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if n, _ := f.store.CountTenants(ctx, accountID, 10); n != 0 {
		t.Errorf("%d tenants written", n)
	}
	if n, _ := f.store.ExternalUserCount(ctx, accountID); n != 0 {
		t.Errorf("%d external users written", n)
	}
	if recs, _ := f.store.ListSessionRecords(ctx, accountID, "", embed.SessionCursor{}, time.Now(), 10); len(recs) != 0 {
		t.Errorf("%d session records written", len(recs))
	}
	for _, scope := range []string{embed.AccountScope, "cm-tenant"} {
		if n, _ := f.store.CountDefinitions(ctx, accountID, scope, 10); n != 0 {
			t.Errorf("%d definitions written in scope %s", n, scope)
		}
	}
}

var errGatewayDown = errors.Join(errs.New(errs.Unavailable, "the identity store is unavailable; retry shortly"), errors.New("nats: no responders"))

// together runs fn(i) n times at once and waits.
func together(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// fakeReach answers the dashboard reach as workspace-svc would for one dashboard per
// group the viewer is in (publicId "dash-<group>", padded to 16 characters), remembering
// the queries; err, when set, is every answer.
type fakeReach struct {
	mu      sync.Mutex
	queries []embed.ReachQuery
	err     error
}

func (r *fakeReach) Dashboards(_ context.Context, q embed.ReachQuery) (embed.ReachAnswer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, q)
	if r.err != nil {
		return embed.ReachAnswer{}, r.err
	}
	out := embed.ReachAnswer{Dashboards: []embed.ReachDashboard{}}
	for _, g := range q.AccountGroups {
		out.Dashboards = append(out.Dashboards, embed.ReachDashboard{PublicID: fmt.Sprintf("%-16.16s", "dash-"+g), AccessSource: "group",
			Subject: embed.ReachSubject{Type: "group", Scope: "account", GroupName: g}})
	}
	return out, nil
}

// last is the last query the reach was asked.
func (r *fakeReach) last() embed.ReachQuery {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queries) == 0 {
		return embed.ReachQuery{}
	}
	return r.queries[len(r.queries)-1]
}
