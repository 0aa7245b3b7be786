// Package apikeys creates, lists, rotates and revokes API keys: the one code path of
// the gateway's /api/v1/api-keys routes and of `platformctl keys`. Every change is an
// audit event. The secret is made by package credentials and stored only as its hash.
package apikeys

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The audit actions of key changes.
const (
	ActionCreate = "platform.api_key.create"
	ActionRevoke = "platform.api_key.revoke"
	ActionRotate = "platform.api_key.rotate"
)

// Owner types of the API (store.OwnerUser is "user").
const (
	OwnerUser           = "user"
	OwnerServiceAccount = "serviceAccount"
)

// Limits bound what a key may be and how many an account keeps. Zero values take the
// defaults (DefaultLimits).
type Limits struct {
	MaxPerAccount int64         // live (neither revoked nor expired) keys per account
	MaxTTL        time.Duration // farthest expiresAt from now; a key without one expires then
	MaxNameBytes  int
	MaxScope      int           // deployment ids in a scope
	Overlap       time.Duration // how long a rotated-out secret keeps working
	Retention     time.Duration // how long a revoked key stays listed
}

// DefaultLimits are the limits when none are configured.
var DefaultLimits = Limits{MaxPerAccount: 100, MaxTTL: 365 * 24 * time.Hour, MaxNameBytes: 128, MaxScope: 100,
	Overlap: 24 * time.Hour, Retention: 30 * 24 * time.Hour}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxPerAccount > 0 {
		d.MaxPerAccount = l.MaxPerAccount
	}
	if l.MaxTTL > 0 {
		d.MaxTTL = l.MaxTTL
	}
	if l.MaxNameBytes > 0 {
		d.MaxNameBytes = l.MaxNameBytes
	}
	if l.MaxScope > 0 {
		d.MaxScope = l.MaxScope
	}
	if l.Overlap > 0 {
		d.Overlap = l.Overlap
	}
	if l.Retention > 0 {
		d.Retention = l.Retention
	}
	return d
}

// Store is what the service keeps keys in (store.Store).
type Store interface {
	User(ctx context.Context, id int64) (store.User, error)
	Deployment(ctx context.Context, id int64) (store.Deployment, error)
	APIKey(ctx context.Context, id string) (store.APIKey, error)
	APIKeys(ctx context.Context, accountID int64, revokedSince time.Time) ([]store.APIKey, error)
	CountLiveAPIKeys(ctx context.Context, accountID int64, now time.Time) (int64, error)
	InsertAPIKey(ctx context.Context, k store.APIKey) error
	DeleteAPIKey(ctx context.Context, id string) error
	RevokeAPIKey(ctx context.Context, keyID string) error
	RotateAPIKey(ctx context.Context, keyID string, newHash []byte, overlapUntil time.Time) (store.APIKey, error)
}

// Service manages API keys.
type Service struct {
	st     Store
	rec    audit.Recorder
	limits Limits
	now    func() time.Time
}

// New returns the service; rec records every change (and every refused one).
func New(st Store, rec audit.Recorder, l Limits, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{st: st, rec: rec, limits: l.withDefaults(), now: now}
}

// Limits are the limits in force.
func (s *Service) Limits() Limits { return s.limits }

// Owner is who a key acts for.
type Owner struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
}

// Key is a key as the API shows it: never its secret.
type Key struct {
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	Kind       string      `json:"kind"`
	Scope      []int64     `json:"scope"`
	Owner      Owner       `json:"owner"`
	CreatedAt  httpx.Time  `json:"createdAt"`
	ExpiresAt  *httpx.Time `json:"expiresAt"`
	LastUsedAt *httpx.Time `json:"lastUsedAt"`
	RevokedAt  *httpx.Time `json:"revokedAt"`
	RotatedAt  *httpx.Time `json:"rotatedAt"`
}

// WithToken is a key with its secret, shown once: the answer of a create or rotate.
type WithToken struct {
	Key
	Token string `json:"token"`
	// PreviousTokenExpiresAt is, after a rotation, when the secret it replaced stops.
	PreviousTokenExpiresAt *httpx.Time `json:"previousTokenExpiresAt,omitempty"`
}

func view(k store.APIKey) Key {
	scope := k.Scope
	if scope == nil {
		scope = []int64{}
	}
	owner := Owner{Type: OwnerUser, ID: k.UserID}
	if k.OwnerType == store.OwnerServiceAccount {
		owner.Type = OwnerServiceAccount
	}
	return Key{ID: k.ID, Name: k.Name, Kind: k.Kind, Scope: scope, Owner: owner,
		CreatedAt: httpx.At(k.CreatedAt), ExpiresAt: httpx.AtPtr(k.ExpiresAt), LastUsedAt: httpx.AtPtr(k.LastUsedAt),
		RevokedAt: httpx.AtPtr(k.RevokedAt), RotatedAt: httpx.AtPtr(k.RotatedAt)}
}

// Caller is who asks for a change: a principal the gateway verified (Authorize), or,
// with Principal nil, the operator of platformctl (whose Recorder names them), acting
// in Account.
type Caller struct {
	Account   int64
	Principal *identity.Principal
}

// Operator is platformctl's caller in an account.
func Operator(accountID int64) Caller { return Caller{Account: accountID} }

// Authorize checks that p may manage the keys of its account: an admin's bearer token,
// or an account (not personal) key of an admin, unscoped. It returns the caller.
func Authorize(p *identity.Principal) (Caller, error) {
	switch {
	case p == nil || p.User == nil:
		return Caller{}, errs.Forbiddenf("managing API keys needs an admin's bearer token or an unscoped admin account key")
	case p.Credential == identity.CredentialAPIKey && p.KeyKind != identity.KeyAccount:
		return Caller{}, errs.Forbiddenf("a personal API key cannot manage API keys: use an account key").WithCode(errs.CodePersonalKey)
	case p.Credential == identity.CredentialAPIKey && len(p.KeyScope) > 0:
		return Caller{}, errs.Forbiddenf("an API key scoped to deployments cannot manage API keys, an account-wide change: use an unscoped key").WithCode(errs.CodeKeyOutOfScope)
	case len(p.KeyScope) > 0:
		return Caller{}, errs.Forbiddenf("a token scoped to deployments cannot manage API keys, an account-wide change: use an unscoped token").WithCode(errs.CodeKeyOutOfScope)
	case p.Credential != identity.CredentialAPIKey && p.Credential != identity.CredentialBearer:
		return Caller{}, errs.Forbiddenf("managing API keys needs an admin's bearer token or an unscoped admin account key")
	case p.Role() != identity.RoleAdmin:
		return Caller{}, errs.Forbiddenf("managing API keys needs the admin role, not %s", p.Role())
	}
	return Caller{Account: p.Account.ID, Principal: p}, nil
}

// CreateRequest is the body of a create.
type CreateRequest struct {
	Name      string     `json:"name"`
	Kind      string     `json:"kind"`
	Scope     []int64    `json:"scope"`
	ExpiresAt *time.Time `json:"expiresAt"`
	Owner     *Owner     `json:"owner"`
}

// Create makes a key in the caller's account. Without an owner, the key is the calling
// user's (platformctl must name one). Nothing is created when a rule is broken.
func (s *Service) Create(ctx context.Context, c Caller, req CreateRequest) (WithToken, error) {
	out, err := s.create(ctx, c, req)
	details := map[string]any{"name": req.Name, "kind": req.Kind, "scope": req.Scope}
	if out.ID != "" {
		details["ownerId"] = out.Owner.ID
		if out.ExpiresAt != nil {
			details["expiresAt"] = out.ExpiresAt.UTC().Format(eventTime)
		}
	}
	s.record(ctx, c, ActionCreate, out.ID, err, 201, details)
	return out, err
}

func (s *Service) create(ctx context.Context, c Caller, req CreateRequest) (WithToken, error) {
	now := s.now().UTC()
	l := s.limits
	switch {
	case req.Name == "":
		return WithToken{}, errs.Invalidf("name is required")
	case len(req.Name) > l.MaxNameBytes:
		return WithToken{}, errs.Invalidf("name is %d bytes, over the limit of %d", len(req.Name), l.MaxNameBytes)
	case !utf8.ValidString(req.Name) || hasControl(req.Name):
		return WithToken{}, errs.Invalidf("name must be UTF-8 text without control characters")
	case req.Kind != identity.KeyAccount && req.Kind != identity.KeyPersonal:
		return WithToken{}, errs.Invalidf("kind must be account or personal, not %q", cutString(req.Kind))
	case len(req.Scope) > l.MaxScope:
		return WithToken{}, errs.Invalidf("scope names %d deployments, over the limit of %d", len(req.Scope), l.MaxScope)
	}
	ownerID, ownerType, err := s.owner(ctx, c, req.Owner)
	if err != nil {
		return WithToken{}, err
	}
	scope, err := s.scope(ctx, c, req.Scope)
	if err != nil {
		return WithToken{}, err
	}
	exp := now.Add(l.MaxTTL).Truncate(time.Millisecond)
	if req.ExpiresAt != nil {
		e := req.ExpiresAt.UTC().Truncate(time.Millisecond)
		switch {
		case !e.After(now):
			return WithToken{}, errs.Invalidf("expiresAt %s is not in the future", e.Format(time.RFC3339))
		case e.After(now.Add(l.MaxTTL)):
			return WithToken{}, errs.Invalidf("expiresAt %s is beyond the limit of %s from now (%s)", e.Format(time.RFC3339), l.MaxTTL, now.Add(l.MaxTTL).Format(time.RFC3339))
		}
		exp = e
	}
	n, err := s.st.CountLiveAPIKeys(ctx, c.Account, now)
	if err != nil {
		return WithToken{}, err
	}
	if n >= l.MaxPerAccount {
		return WithToken{}, limitError(l.MaxPerAccount)
	}
	id, token, hash := credentials.NewAPIKey()
	rec := store.APIKey{ID: id, AccountID: c.Account, OwnerType: ownerType, UserID: ownerID, Kind: req.Kind, Name: req.Name,
		Scope: scope, SecretHash: hash, ExpiresAt: &exp}
	if err := s.st.InsertAPIKey(ctx, rec); err != nil {
		return WithToken{}, err
	}
	// Creates racing each other all passed the count: the ones over the bound take their
	// key back, so the bound holds (a racer may be refused that one at a time would not).
	if n, err := s.st.CountLiveAPIKeys(ctx, c.Account, now); err == nil && n > l.MaxPerAccount {
		if err := s.st.DeleteAPIKey(ctx, id); err == nil {
			return WithToken{}, limitError(l.MaxPerAccount)
		}
	}
	k, err := s.st.APIKey(ctx, id)
	if err != nil {
		return WithToken{}, err
	}
	return WithToken{Key: view(k), Token: token}, nil
}

func limitError(n int64) error {
	return errs.Invalidf("the account has %d live API keys, the limit: revoke one first", n).WithCode(errs.CodeAPIKeyLimit)
}

// owner resolves the owner of a new key: a person of the account (type user) or one of
// its service accounts (type serviceAccount), never a deleted one. Without an owner, the
// key is the caller's own.
func (s *Service) owner(ctx context.Context, c Caller, o *Owner) (int64, string, error) {
	if o == nil {
		if c.Principal == nil || c.Principal.User == nil {
			return 0, "", errs.Invalidf("owner is required")
		}
		u, err := s.st.User(ctx, c.Principal.User.ID)
		if err != nil {
			return 0, "", err
		}
		if u.IsService() {
			return u.ID, store.OwnerServiceAccount, nil
		}
		return u.ID, store.OwnerUser, nil
	}
	switch o.Type {
	case OwnerUser, OwnerServiceAccount:
	default:
		return 0, "", errs.Invalidf("owner.type must be user or serviceAccount, not %q", cutString(o.Type))
	}
	u, err := s.st.User(ctx, o.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (u.AccountID != c.Account || u.DeletedAt != nil)) {
		if o.Type == OwnerServiceAccount {
			return 0, "", errs.Invalidf("owner: service account %d is not a service account of this account", o.ID)
		}
		return 0, "", errs.Invalidf("owner: user %d is not a user of this account", o.ID)
	}
	if err != nil {
		return 0, "", err
	}
	switch {
	case o.Type == OwnerServiceAccount && !u.IsService():
		return 0, "", errs.Invalidf("owner: user %d is a person, not a service account: use owner type user", o.ID)
	case o.Type == OwnerUser && u.IsService():
		return 0, "", errs.Invalidf("owner: user %d is a service account: use owner type serviceAccount", o.ID)
	case o.Type == OwnerServiceAccount:
		return u.ID, store.OwnerServiceAccount, nil
	}
	return u.ID, store.OwnerUser, nil
}

// scope checks that every deployment is the account's and within what the caller may
// grant (a scoped caller grants at most its own scope), and returns them sorted, once
// each.
func (s *Service) scope(ctx context.Context, c Caller, ids []int64) ([]int64, error) {
	out := slices.Clone(ids)
	slices.Sort(out)
	out = slices.Compact(out)
	for _, id := range out {
		if c.Principal != nil && !c.Principal.InScope(id) {
			return nil, errs.Forbiddenf("scope: deployment %d is outside the caller's own scope", id).WithCode(errs.CodeKeyOutOfScope)
		}
		if id <= 0 {
			return nil, errs.Invalidf("scope: %d is not a deployment id", id)
		}
		d, err := s.st.Deployment(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && d.AccountID != c.Account) {
			return nil, errs.Invalidf("scope: deployment %d is not a deployment of this account", id)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.Principal != nil && len(c.Principal.KeyScope) > 0 && len(out) == 0 {
		return nil, errs.Forbiddenf("scope: a scoped caller cannot grant every deployment").WithCode(errs.CodeKeyOutOfScope)
	}
	if out == nil {
		out = []int64{}
	}
	return out, nil
}

// List returns the account's keys: live ones, expired ones, and those revoked within
// the retention.
func (s *Service) List(ctx context.Context, c Caller) ([]Key, error) {
	ks, err := s.st.APIKeys(ctx, c.Account, s.now().Add(-s.limits.Retention))
	if err != nil {
		return nil, err
	}
	out := make([]Key, len(ks))
	for i, k := range ks {
		out[i] = view(k)
	}
	return out, nil
}

// Get returns one key of the account: 404 for another account's, or a key revoked
// before the retention.
func (s *Service) Get(ctx context.Context, c Caller, id string) (Key, error) {
	k, err := s.find(ctx, c, id)
	return view(k), err
}

func (s *Service) find(ctx context.Context, c Caller, id string) (store.APIKey, error) {
	k, err := s.st.APIKey(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (k.AccountID != c.Account ||
		k.RevokedAt != nil && k.RevokedAt.Before(s.now().Add(-s.limits.Retention)))) {
		return store.APIKey{}, errs.NotFoundf("API key %s not found", cutString(id))
	}
	return k, err
}

// Revoke revokes a key: every gateway refuses it within the revocation poll. Revoking a
// revoked key answers it as it is.
func (s *Service) Revoke(ctx context.Context, c Caller, id string) (Key, error) {
	k, err := s.revoke(ctx, c, id)
	s.record(ctx, c, ActionRevoke, id, err, 200, map[string]any{"ownerId": k.Owner.ID, "kind": k.Kind})
	return k, err
}

func (s *Service) revoke(ctx context.Context, c Caller, id string) (Key, error) {
	if _, err := s.find(ctx, c, id); err != nil {
		return Key{}, err
	}
	if err := s.st.RevokeAPIKey(ctx, id); err != nil {
		return Key{}, err
	}
	k, err := s.st.APIKey(ctx, id)
	return view(k), err
}

// Rotate gives a key a new secret under the same id; the old one keeps working for the
// overlap, then stops. A revoked or expired key is 409: it has nothing to rotate.
func (s *Service) Rotate(ctx context.Context, c Caller, id string) (WithToken, error) {
	out, err := s.rotate(ctx, c, id)
	details := map[string]any{"overlap": s.limits.Overlap.String()}
	if out.PreviousTokenExpiresAt != nil {
		details["previousTokenExpiresAt"] = out.PreviousTokenExpiresAt.UTC().Format(eventTime)
	}
	s.record(ctx, c, ActionRotate, id, err, 200, details)
	return out, err
}

func (s *Service) rotate(ctx context.Context, c Caller, id string) (WithToken, error) {
	k, err := s.find(ctx, c, id)
	if err != nil {
		return WithToken{}, err
	}
	now := s.now()
	switch {
	case k.RevokedAt != nil:
		return WithToken{}, errs.Conflictf("API key %s is revoked: create a new key", id)
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return WithToken{}, errs.Conflictf("API key %s expired at %s: create a new key", id, k.ExpiresAt.UTC().Format(eventTime))
	}
	secret, hash, err := credentials.NewAPIKeySecret(id)
	if err != nil {
		return WithToken{}, err
	}
	until := now.Add(s.limits.Overlap).UTC().Truncate(time.Millisecond)
	k, err = s.st.RotateAPIKey(ctx, id, hash, until)
	if errors.Is(err, store.ErrConflict) {
		return WithToken{}, errs.Conflictf("API key %s is revoked: create a new key", id)
	}
	if err != nil {
		return WithToken{}, err
	}
	return WithToken{Key: view(k), Token: secret, PreviousTokenExpiresAt: httpx.AtPtr(&until)}, nil
}

func (s *Service) record(ctx context.Context, c Caller, action, keyID string, err error, ok int, details map[string]any) {
	if s.rec == nil {
		return
	}
	ev := audit.New(c.Principal, action, audit.Target{Type: "api_key", ID: keyID})
	ev.AccountID = c.Account
	ev.Outcome, ev.Details = audit.OutcomeOf(err, ok), details
	s.rec.Record(ctx, ev)
}

// eventTime is the API's timestamp form (milliseconds, UTC), for event details.
const eventTime = "2006-01-02T15:04:05.000Z07:00"

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// cutString bounds a client's value quoted back in a message.
func cutString(s string) string {
	if len(s) <= 64 {
		return s
	}
	for i := 64; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return strconv.Quote(s[:64])
}
