package embed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// A scoped key reaches the external users whose every session it could have minted: a
// user of another deployment is neither read (404) nor minted for (403
// key_out_of_scope), whatever the mint sends, so the key never sees or changes what the
// other deployment's sessions are built from.

// reachFixture is f with an account-wide attribute "region" and group "sales", and
// external user "alice" minted in f.dep2 by the unscoped key with an email, region
// "EU-only" and membership of sales.
func reachFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.svc.CreateDefinition(ctx, f.adminKey(), embed.KindAttribute, embed.DefinitionInput{Name: "region", Type: "string"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateDefinition(ctx, f.adminKey(), embed.KindGroup, embed.DefinitionInput{Name: "sales"}); err != nil {
		t.Fatal(err)
	}
	f.mint(t, f.adminKey(), alicesMint(f.dep2, `"EU-only"`))
	return f
}

// alicesMint is a mint for alice in dep, in tenant "scope-tenant", with an email, a
// region (JSON) and the sales group.
func alicesMint(dep int64, region string) embed.GenerateSessionRequest {
	return embed.GenerateSessionRequest{DeploymentID: ptr(dep), ExternalID: ptr("alice"), EmbedTenantName: ptr("scope-tenant"),
		Email: ptr("alice@customer.example"), UserAttributes: []embed.AttributeValue{{Name: "region", Value: json.RawMessage(region)}},
		Groups: []string{"sales"}}
}

// storedUser is external user ext as stored, with the account scope's values.
func (f *fixture) storedUser(t *testing.T, ext string) embed.ExternalUser {
	t.Helper()
	u, err := f.store.ExternalUser(context.Background(), accountID, ext, embed.AccountScope)
	if err != nil {
		t.Fatalf("user %s: %v", ext, err)
	}
	return u
}

// records is the number of the account's session records.
func (f *fixture) records(t *testing.T) int {
	t.Helper()
	recs, err := f.store.ListSessionRecords(context.Background(), accountID, "", embed.SessionCursor{}, time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// wantOutOfScope fails t unless err is the answer to a mint for a user outside the key's
// reach, naming the user and not the other deployment.
func wantOutOfScope(t *testing.T, err error, ext string, other int64) {
	t.Helper()
	status, code, msg := answer(err)
	// The other deployment's id as a number of its own: outside the user's quoted name,
	// which may hold the same digits (racer-5 beside deployment 5).
	rest := strings.ReplaceAll(msg, strconv.Quote(ext), "")
	named := regexp.MustCompile(`\b` + strconv.FormatInt(other, 10) + `\b`).MatchString(rest)
	if status != 403 || code != errs.CodeKeyOutOfScope || !strings.Contains(msg, strconv.Quote(ext)) || named {
		t.Fatalf("got %d %s %q (%v), want 403 key_out_of_scope naming %q and not deployment %d", status, code, msg, err, ext, other)
	}
}

func TestScopedKeyCannotMintForAUserWithASessionInAnotherDeployment(t *testing.T) {
	ctx := context.Background()
	f := reachFixture(t)
	before, sessions := f.storedUser(t, "alice"), f.records(t)
	scoped := f.scopedKey(f.dep)
	bare := embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr("alice"), EmbedTenantName: ptr("scope-tenant")}
	clearing := bare
	clearing.UserAttributes, clearing.Groups = []embed.AttributeValue{{Name: "region", Value: json.RawMessage(`null`)}}, []string{}
	overwriting := alicesMint(f.dep, `"anywhere"`)
	overwriting.Email, overwriting.UserProfile = ptr("mallory@attacker.example"), &embed.UserProfile{DisplayName: ptr("Mallory")}
	upper := bare
	upper.ExternalID = ptr("  ALICE ")
	for name, req := range map[string]embed.GenerateSessionRequest{"bare": bare, "clearing": clearing, "overwriting": overwriting, "other-case": upper} {
		_, err := f.svc.GenerateSession(ctx, scoped, req)
		wantOutOfScope(t, err, "alice", f.dep2)
		req.DryRun = true
		_, err = f.svc.DryRunSession(ctx, scoped, req)
		wantOutOfScope(t, err, "alice", f.dep2)
		if after := f.storedUser(t, "alice"); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the refused mint changed the user:\n%+v\nwas\n%+v", name, after, before)
		}
		if n := f.records(t); n != sessions {
			t.Fatalf("%s: %d session records after the refused mint, want %d", name, n, sessions)
		}
	}
	// A key that reaches every deployment alice was minted in mints for her; so does the
	// unscoped key, in any deployment, after which a key of one of them reaches her no
	// more.
	if _, err := f.svc.GenerateSession(ctx, f.scopedKey(f.dep, f.dep2), bare); err != nil {
		t.Fatalf("a key scoped to both of alice's deployments: %v", err)
	}
	f.mintIn(t, f.dep, "bob")
	f.mintIn(t, f.dep2, "bob")
	_, err := f.svc.GenerateSession(ctx, f.scopedKey(f.dep2), alicesMint(f.dep2, `"x"`))
	wantOutOfScope(t, err, "alice", f.dep)
	_, err = f.svc.GenerateSession(ctx, f.scopedKey(f.dep), embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr("bob")})
	wantOutOfScope(t, err, "bob", f.dep2)
	// A user minted in the key's deployments only, and a new one, are the key's to mint.
	f.mintIn(t, f.dep, "carol")
	for _, ext := range []string{"carol", "dave"} {
		if _, err := f.svc.GenerateSession(ctx, scoped, embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr(ext)}); err != nil {
			t.Fatalf("mint for %s by the key of its deployment: %v", ext, err)
		}
	}
	if got := f.storedUser(t, "dave").Deployments; !slices.Equal(got, []int64{f.dep}) {
		t.Fatalf("dave's deployments %v", got)
	}
}

func TestScopedKeyReadsOnlyUsersWhollyInItsDeployments(t *testing.T) {
	ctx := context.Background()
	f := reachFixture(t)
	f.mintIn(t, f.dep, "ann")
	f.mintIn(t, f.dep, "cat")
	f.mintIn(t, f.dep2, "cat") // cat has sessions in both
	listed := func(p *identity.Principal) []string {
		page, err := f.svc.ListTenantUsers(ctx, p, "scope-tenant", embed.UserQuery{First: 50})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range page.Items {
			out = append(out, u.ExternalID)
		}
		return out
	}
	read := func(p *identity.Principal, ext string) int {
		_, err := f.svc.GetTenantUser(ctx, p, "scope-tenant", ext)
		status, _, _ := answer(err)
		if err == nil {
			status = 200
		}
		return status
	}
	for _, c := range []struct {
		name   string
		p      *identity.Principal
		listed []string
		reads  map[string]int
	}{
		{"unscoped", f.adminKey(), []string{"alice", "ann", "cat"}, map[string]int{"alice": 200, "ann": 200, "cat": 200}},
		{"scoped-1", f.scopedKey(f.dep), []string{"ann"}, map[string]int{"alice": 404, "ann": 200, "cat": 404}},
		{"scoped-2", f.scopedKey(f.dep2), []string{"alice"}, map[string]int{"alice": 200, "ann": 404, "cat": 404}},
		{"scoped-both", f.scopedKey(f.dep, f.dep2), []string{"alice", "ann", "cat"}, map[string]int{"alice": 200, "ann": 200, "cat": 200}},
	} {
		if got := listed(c.p); !slices.Equal(got, c.listed) {
			t.Errorf("%s lists %v, want %v", c.name, got, c.listed)
		}
		for ext, want := range c.reads {
			if got := read(c.p, ext); got != want {
				t.Errorf("%s reads %s: %d, want %d", c.name, ext, got, want)
			}
		}
	}
	// The unscoped key reads alice's values as deployment 2 stored them.
	v, err := f.svc.GetTenantUser(ctx, f.adminKey(), "scope-tenant", "alice")
	if err != nil || v.Email == nil || *v.Email != "alice@customer.example" || len(v.UserAttributes) != 1 || string(v.UserAttributes[0].Value.(json.RawMessage)) != `"EU-only"` {
		t.Fatalf("alice as the unscoped key reads her: %+v %v", v, err)
	}
}

// A user stored before deployments were recorded may have been minted in any of them: a
// scoped key neither reads it nor mints for it; the unscoped key does both.
func TestAUserWithNoRecordedDeploymentIsTheUnscopedKeys(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.store.EnsureTenant(ctx, accountID, "scope-tenant"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CreateExternalUser(ctx, accountID, "old", 10, embed.UserUpdate{Scope: embed.AccountScope, Tenant: "scope-tenant"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.GenerateSession(ctx, f.scopedKey(f.dep), embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr("old")})
	wantOutOfScope(t, err, "old", f.dep2)
	if _, err := f.svc.GetTenantUser(ctx, f.scopedKey(f.dep), "scope-tenant", "old"); err == nil {
		t.Fatal("a scoped key reads a user with no recorded deployment")
	}
	if _, err := f.svc.GetTenantUser(ctx, f.adminKey(), "scope-tenant", "old"); err != nil {
		t.Fatalf("the unscoped key reads it: %v", err)
	}
	f.mint(t, f.adminKey(), embed.GenerateSessionRequest{DeploymentID: ptr(f.dep), ExternalID: ptr("old")})
	if got := f.storedUser(t, "old").Deployments; !slices.Equal(got, []int64{f.dep}) {
		t.Fatalf("deployments after the unscoped key's mint: %v", got)
	}
}

// interposed is a user store that runs once, after the first read of an external user
// it is armed for, what it is given: another mint that comes in between the read and
// the write.
type interposed struct {
	embed.UserStore
	mu      sync.Mutex
	ext     string
	between func()
}

func (s *interposed) arm(ext string, between func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ext, s.between = ext, between
}

func (s *interposed) ExternalUser(ctx context.Context, accountID int64, externalID string, scopes ...string) (embed.ExternalUser, error) {
	u, err := s.UserStore.ExternalUser(ctx, accountID, externalID, scopes...)
	s.mu.Lock()
	fn := s.between
	if externalID != s.ext {
		fn = nil
	}
	if fn != nil {
		s.between = nil
	}
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
	return u, err
}

// A scoped key's mint that read the user before another deployment's mint reached it is
// refused when it writes: the user's new deployment is checked in the write itself.
func TestAScopedMintRacingAnotherDeploymentsMintDoesNotWrite(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("user-existed-%v", existing), func(t *testing.T) {
			ctx := context.Background()
			f := reachFixture(t)
			users := &interposed{UserStore: f.store}
			f.deps.Users = users
			f.svc = embed.NewService(f.deps, f.opts)
			ext := "erin"
			if existing {
				req := alicesMint(f.dep, `"first"`)
				req.ExternalID = ptr(ext)
				f.mint(t, f.scopedKey(f.dep), req)
			}
			users.arm(ext, func() {
				req := alicesMint(f.dep2, `"B's"`)
				req.ExternalID = ptr(ext)
				f.mint(t, f.adminKey(), req)
			})
			sessions := f.records(t) + 1 // the interposed mint's
			req := alicesMint(f.dep, `"A's"`)
			req.ExternalID, req.Groups = ptr(ext), []string{}
			_, err := f.svc.GenerateSession(ctx, f.scopedKey(f.dep), req)
			wantOutOfScope(t, err, ext, f.dep2)
			u := f.storedUser(t, ext)
			want := []int64{f.dep2}
			if existing {
				want = []int64{f.dep, f.dep2}
			}
			if vals := u.Attributes[embed.AccountScope]; len(vals) != 1 || len(u.Groups[embed.AccountScope]) != 1 || !slices.Equal(u.Deployments, want) {
				t.Fatalf("the user after the refused mint: values %v groups %v deployments %v, want B's values and membership in %v",
					vals, u.Groups, u.Deployments, want)
			}
			for _, v := range u.Attributes[embed.AccountScope] {
				if string(v.Value) != `"B's"` {
					t.Fatalf("region %s, want B's", v.Value)
				}
			}
			if n := f.records(t); n != sessions {
				t.Fatalf("%d session records, want %d: the refused mint stored one", n, sessions)
			}
		})
	}
}

// Racing for real: of a scoped key's mint and an unscoped mint in another deployment for
// a new user, the scoped one either wrote first or was refused; it never writes after.
func TestScopedAndUnscopedMintsRacingLeaveTheOtherDeploymentsValues(t *testing.T) {
	ctx := context.Background()
	f := reachFixture(t)
	for i := range 40 {
		ext := fmt.Sprintf("racer-%d", i)
		var scopedErr error
		together(2, func(j int) {
			req := alicesMint(f.dep2, `"B's"`)
			p := f.adminKey()
			if j == 1 {
				req, p = alicesMint(f.dep, `"A's"`), f.scopedKey(f.dep)
			}
			req.ExternalID = ptr(ext)
			_, err := f.svc.GenerateSession(ctx, p, req)
			if j == 1 {
				scopedErr = err
			} else if err != nil {
				t.Errorf("the unscoped mint: %v", err)
			}
		})
		if scopedErr != nil {
			wantOutOfScope(t, scopedErr, ext, f.dep2)
		}
		u := f.storedUser(t, ext)
		for _, v := range u.Attributes[embed.AccountScope] {
			if string(v.Value) != `"B's"` {
				t.Fatalf("%s: region %s after both mints (the scoped one: %v), want B's", ext, v.Value, scopedErr)
			}
		}
		if _, err := f.svc.GetTenantUser(ctx, f.scopedKey(f.dep), "scope-tenant", ext); err == nil {
			t.Fatalf("%s: the scoped key reads a user of deployment 2", ext)
		}
	}
}
