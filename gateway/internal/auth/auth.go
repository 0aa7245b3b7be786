// Package auth turns the credential of a request into a verified principal. Verified
// credentials and the records behind them are cached so the hot path does no database
// work, but never past a token's expiry, and a revoked key, a changed user or account is
// evicted by a poller within one poll interval on every replica.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
)

// ErrUnauthenticated means the credential is missing, malformed, unknown, expired,
// revoked or wrongly signed: 401.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrUnavailable means a store needed to check the credential could not be reached: 503.
var ErrUnavailable = errors.New("credential store unavailable")

// ErrNotCached means the credential could be checked only by asking the identity store,
// and a throttled request may not ask now (Throttled).
var ErrNotCached = errors.New("credential not verified recently")

// LookupBudget is asked before a throttled request's API key id that this replica has
// never verified is looked up in the identity store; false refuses the lookup.
type LookupBudget func(ctx context.Context) bool

type throttledKey struct{}

// Throttled marks ctx as a request from a client address over AUTH_FAILURE_LIMIT. An API
// key the caches hold (or remember as missing) is checked as always. One they do not
// hold is looked up in the identity store at most once per key id per
// Options.ThrottledLookupInterval on this replica, and, when this replica has never
// verified that key id, only if budget allows it: a valid key whose cache entry expired
// is served again within one interval, while a guesser naming new key ids costs the store
// what budget grants (each id found missing is then remembered as missing). A refused
// lookup is ErrNotCached. Bearer tokens are checked as always: their signature is
// verified here, without the store.
func Throttled(ctx context.Context, budget LookupBudget) context.Context {
	return context.WithValue(ctx, throttledKey{}, budget)
}

func throttled(ctx context.Context) (LookupBudget, bool) {
	b, ok := ctx.Value(throttledKey{}).(LookupBudget)
	return b, ok
}

// Directory is what the authenticator reads from the identity store.
type Directory interface {
	Account(ctx context.Context, id int64) (store.Account, error)
	Deployment(ctx context.Context, id int64) (store.Deployment, error)
	User(ctx context.Context, id int64) (store.User, error)
	UserByUsername(ctx context.Context, accountID int64, username string) (store.User, error)
	APIKey(ctx context.Context, id string) (store.APIKey, error)
	ChangedSince(ctx context.Context, since time.Time) (store.Changes, error)
}

// Authenticator verifies bearer tokens and API keys.
type Authenticator struct {
	dir      Directory
	verifier *Verifier
	ttl      time.Duration
	now      func() time.Time
	log      *slog.Logger

	tokens      *Cache[string, tokenEntry]
	users       *Cache[int64, store.User]
	accounts    *Cache[int64, store.Account]
	deployments *Cache[int64, store.Deployment]
	keys        *Cache[string, store.APIKey]
	missingKeys *Cache[string, struct{}] // API key ids the identity store does not have
	// verifiedKeys are the API key ids this replica found in the identity store in the
	// last VerifiedKeyMemory, and throttledLookups those looked up for a throttled request
	// in the last throttledInterval.
	verifiedKeys      *Cache[string, struct{}]
	throttledLookups  *Cache[string, struct{}]
	throttledInterval time.Duration
	usernames         *Cache[usernameKey, int64] // the services' user lookups (LookupUser)
	// rechecked are the key ids whose record was read again for a secret the cached one
	// did not know, in the last throttledInterval.
	rechecked *Cache[string, struct{}]
	used      *usage
	// serviceKid is Options.ServiceTokenKeyID.
	serviceKid string
}

type tokenEntry struct {
	userID  int64
	service bool    // a service account's token, signed by the gateway's own key
	scope   []int64 // its deployment scope (nil: every deployment)
}

// Options configure an Authenticator.
type Options struct {
	Directory Directory
	Verifier  *Verifier
	CacheTTL  time.Duration
	Now       func() time.Time
	Logger    *slog.Logger
	// ThrottledLookupInterval is how often, at most, an API key id not in the caches is
	// looked up in the identity store for a throttled request (Throttled; default 1s).
	ThrottledLookupInterval time.Duration
	// ServiceTokenKeyID is the kid of the gateway's own key, which signs service
	// accounts' access tokens: a token with it must name a service account, and its
	// scope claim scopes it to deployments ("": none is issued).
	ServiceTokenKeyID string
}

// VerifiedKeyMemory is how long an API key id found in the identity store is remembered
// as a real key's (its record is cached for the much shorter CacheTTL): a throttled
// request with it is looked up again without the address's lookup budget.
const VerifiedKeyMemory = 24 * time.Hour

// MissingKeyTTL is how long an API key id the identity store does not have is remembered
// as missing.
const MissingKeyTTL = 5 * time.Second

// New returns an authenticator.
func New(o Options) *Authenticator {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 30 * time.Second
	}
	if o.ThrottledLookupInterval <= 0 {
		o.ThrottledLookupInterval = time.Second
	}
	return &Authenticator{
		dir: o.Directory, verifier: o.Verifier, ttl: o.CacheTTL, now: o.Now, log: o.Logger,
		tokens:       NewCache[string, tokenEntry](100_000, o.Now),
		users:        NewCache[int64, store.User](100_000, o.Now),
		accounts:     NewCache[int64, store.Account](10_000, o.Now),
		deployments:  NewCache[int64, store.Deployment](100_000, o.Now),
		keys:         NewCache[string, store.APIKey](100_000, o.Now),
		missingKeys:  NewCache[string, struct{}](100_000, o.Now),
		verifiedKeys: NewCache[string, struct{}](100_000, o.Now), throttledLookups: NewCache[string, struct{}](100_000, o.Now),
		throttledInterval: o.ThrottledLookupInterval,
		usernames:         NewCache[usernameKey, int64](100_000, o.Now),
		rechecked:         NewCache[string, struct{}](100_000, o.Now),
		used:              newUsage(),
		serviceKid:        o.ServiceTokenKeyID,
	}
}

// Bearer authenticates a bearer token: a user's, or a service account's access token
// (signed by the gateway's own key, scoped to deployments by its scope claim).
func (a *Authenticator) Bearer(ctx context.Context, token string) (*identity.Principal, error) {
	e, ok := a.tokens.Get(token)
	if !ok {
		claims, kid, err := a.verifier.VerifyKid(token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		}
		e.userID, err = claims.UserID()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		}
		if a.serviceKid != "" && kid == a.serviceKid {
			e.service = true
			if e.scope, err = claims.DeploymentScope(); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
			}
		}
		// Cached until the token's own expiry at the latest: a hit is then as good as a
		// fresh verification.
		exp := claims.ExpiresAt.Time
		if limit := a.now().Add(a.ttl); limit.Before(exp) {
			exp = limit
		}
		a.tokens.Put(token, e, exp)
	}
	u, err := a.user(ctx, e.userID)
	if err != nil {
		return nil, err
	}
	if e.service != u.IsService() {
		// The gateway's key signs service accounts' tokens only, and only it does.
		return nil, fmt.Errorf("%w: token signer does not match user %d", ErrUnauthenticated, u.ID)
	}
	acct, err := a.Account(ctx, u.AccountID)
	if err != nil {
		return nil, err
	}
	return &identity.Principal{Credential: identity.CredentialBearer, Account: acct.Identity(), User: u.Identity(), KeyScope: e.scope}, nil
}

// APIKey authenticates an API key.
func (a *Authenticator) APIKey(ctx context.Context, raw string) (*identity.Principal, error) {
	keyID, hash, ok := credentials.ParseAPIKey(raw)
	if !ok {
		return nil, fmt.Errorf("%w: malformed API key", ErrUnauthenticated)
	}
	k, cached := a.keys.Get(keyID)
	if !cached {
		if _, missing := a.missingKeys.Get(keyID); missing {
			return nil, fmt.Errorf("%w: unknown API key", ErrUnauthenticated)
		}
		if budget, ok := throttled(ctx); ok && !a.mayLookUpThrottled(ctx, keyID, budget) {
			return nil, ErrNotCached
		}
		var err error
		k, err = a.dir.APIKey(ctx, keyID)
		if errors.Is(err, store.ErrNotFound) {
			// Remembered briefly, so well-formed random keys cost the identity store one
			// query per id and MissingKeyTTL, not one per request; a key created since is
			// seen by the change poller, which forgets the miss.
			a.missingKeys.Put(keyID, struct{}{}, a.now().Add(MissingKeyTTL))
			return nil, fmt.Errorf("%w: unknown API key", ErrUnauthenticated)
		}
		if err != nil {
			return nil, err
		}
		a.keys.Put(keyID, k, a.now().Add(a.ttl))
		a.verifiedKeys.Put(keyID, struct{}{}, a.now().Add(VerifiedKeyMemory))
	}
	// The hash is compared on every request, cached or not, so a cache entry can never
	// authenticate a different secret. A cached record that does not know the secret may
	// predate a rotation on another replica: it is read again, at most once per key id
	// and throttled interval, so a new secret works at once and guesses cost no more.
	if !k.Authenticates(hash[:], a.now()) {
		if !cached || !a.mayRecheck(keyID) {
			return nil, fmt.Errorf("%w: unknown API key", ErrUnauthenticated)
		}
		fresh, err := a.dir.APIKey(ctx, keyID)
		if err != nil || !fresh.Authenticates(hash[:], a.now()) {
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: unknown API key", ErrUnauthenticated)
		}
		k = fresh
		a.keys.Put(keyID, k, a.now().Add(a.ttl))
	}
	if k.RevokedAt != nil {
		return nil, fmt.Errorf("%w: API key revoked", ErrUnauthenticated)
	}
	if k.ExpiresAt != nil && !a.now().Before(*k.ExpiresAt) {
		return nil, fmt.Errorf("%w: API key expired", ErrUnauthenticated)
	}
	u, err := a.user(ctx, k.UserID)
	if err != nil {
		return nil, err
	}
	acct, err := a.Account(ctx, k.AccountID)
	if err != nil {
		return nil, err
	}
	a.used.mark(k.ID, a.now())
	return &identity.Principal{Credential: identity.CredentialAPIKey, Account: acct.Identity(), User: u.Identity(),
		KeyID: k.ID, KeyKind: k.Kind, KeyScope: k.Scope}, nil
}

// mayRecheck reports whether a cached key's record may be read again now because a
// secret did not match it, and if so remembers that it was.
func (a *Authenticator) mayRecheck(keyID string) bool {
	if _, recent := a.rechecked.Get(keyID); recent {
		return false
	}
	a.rechecked.Put(keyID, struct{}{}, a.now().Add(a.throttledInterval))
	return true
}

// mayLookUpThrottled decides whether a throttled request may look key id up in the
// identity store now (see Throttled), and if so remembers that it did.
func (a *Authenticator) mayLookUpThrottled(ctx context.Context, keyID string, budget LookupBudget) bool {
	if _, recent := a.throttledLookups.Get(keyID); recent {
		return false
	}
	if _, known := a.verifiedKeys.Get(keyID); !known && (budget == nil || !budget(ctx)) {
		return false
	}
	a.throttledLookups.Put(keyID, struct{}{}, a.now().Add(a.throttledInterval))
	return true
}

// User returns a user, cached; ErrUnauthenticated when it no longer exists.
func (a *Authenticator) User(ctx context.Context, id int64) (store.User, error) {
	return a.user(ctx, id)
}

func (a *Authenticator) user(ctx context.Context, id int64) (store.User, error) {
	if u, ok := a.users.Get(id); ok {
		return u, nil
	}
	u, err := a.dir.User(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.DeletedAt != nil) {
		return store.User{}, fmt.Errorf("%w: user %d no longer exists", ErrUnauthenticated, id)
	}
	if err != nil {
		return u, err
	}
	a.users.Put(id, u, a.now().Add(a.ttl))
	return u, nil
}

// Account returns an account, cached.
func (a *Authenticator) Account(ctx context.Context, id int64) (store.Account, error) {
	if acct, ok := a.accounts.Get(id); ok {
		return acct, nil
	}
	acct, err := a.dir.Account(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return acct, fmt.Errorf("%w: account %d no longer exists", ErrUnauthenticated, id)
	}
	if err != nil {
		return acct, err
	}
	a.accounts.Put(id, acct, a.now().Add(a.ttl))
	return acct, nil
}

// Deployment returns a deployment, cached; store.ErrNotFound when there is none.
func (a *Authenticator) Deployment(ctx context.Context, id int64) (store.Deployment, error) {
	if d, ok := a.deployments.Get(id); ok {
		return d, nil
	}
	d, err := a.dir.Deployment(ctx, id)
	if err != nil {
		return d, err
	}
	a.deployments.Put(id, d, a.now().Add(a.ttl))
	return d, nil
}

// ClockSkewAllowance is how far behind the gateway's clock a writer's updatedAt may be
// and a change still be seen on the next poll (writers stamp updatedAt with their own
// clock: platformctl runs anywhere).
const ClockSkewAllowance = 5 * time.Second

// WatchChanges evicts changed keys, users, accounts and deployments from the caches,
// polling every interval until ctx ends. Each poll looks back one extra interval plus
// ClockSkewAllowance, so neither a write racing the previous poll nor a writer whose
// clock runs behind is missed; evicting an entry twice costs one reload.
func (a *Authenticator) WatchChanges(ctx context.Context, interval time.Duration) {
	since := a.now().Add(-interval - ClockSkewAllowance)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		polled := a.now()
		if err := a.Evict(ctx, since); err != nil {
			if a.log != nil && ctx.Err() == nil {
				a.log.Warn("polling identity changes failed; caches expire on their TTL", "err", err)
			}
			continue
		}
		since = polled.Add(-interval - ClockSkewAllowance)
	}
}

// Evict drops everything changed since the given time from the caches.
func (a *Authenticator) Evict(ctx context.Context, since time.Time) error {
	ch, err := a.dir.ChangedSince(ctx, since)
	if err != nil {
		return err
	}
	for _, id := range ch.Keys {
		a.keys.Delete(id)
		a.missingKeys.Delete(id)
	}
	for _, id := range ch.Users {
		a.users.Delete(id)
	}
	for _, id := range ch.Accounts {
		a.accounts.Delete(id)
	}
	for _, id := range ch.Deployments {
		a.deployments.Delete(id)
	}
	return nil
}
