// Package serviceaccounts creates, lists and deletes service accounts (non-person users
// of an account, with a role) and their OAuth 2.0 client secrets, and issues their
// bearer tokens by the client-credentials grant (RFC 6749 §4.4): the one code path of the
// gateway's /api/v1/service-accounts and /api/v1/oauth/token routes. Every change is an
// audit event; a secret is stored only as its SHA-256 hash.
package serviceaccounts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The audit actions of service-account changes.
const (
	ActionCreate       = "platform.service_account.create"
	ActionDelete       = "platform.service_account.delete"
	ActionSecretCreate = "platform.service_account_secret.create"
	ActionSecretRevoke = "platform.service_account_secret.revoke"
	ActionSecretRotate = "platform.service_account_secret.rotate"
)

// Limits bound service accounts, their secrets and tokens. Zero values take the defaults
// (DefaultLimits).
type Limits struct {
	MaxPerAccount int64         // service accounts (not deleted) per account
	MaxSecrets    int64         // unrevoked client secrets per service account
	MaxNameBytes  int           // longest name
	TokenTTL      time.Duration // lifetime of an issued access token
	MaxScope      int           // deployment ids in a token request's scope
	Overlap       time.Duration // how long a rotated-out secret keeps working
	Retention     time.Duration // how long a revoked secret stays listed
}

// DefaultLimits are the limits when none are configured.
var DefaultLimits = Limits{MaxPerAccount: 100, MaxSecrets: 5, MaxNameBytes: 128, TokenTTL: time.Hour, MaxScope: 100,
	Overlap: 24 * time.Hour, Retention: 30 * 24 * time.Hour}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxPerAccount > 0 {
		d.MaxPerAccount = l.MaxPerAccount
	}
	if l.MaxSecrets > 0 {
		d.MaxSecrets = l.MaxSecrets
	}
	if l.MaxNameBytes > 0 {
		d.MaxNameBytes = l.MaxNameBytes
	}
	if l.TokenTTL > 0 {
		d.TokenTTL = l.TokenTTL
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

// Store is what the service keeps service accounts in (store.Store).
type Store interface {
	User(ctx context.Context, id int64) (store.User, error)
	Deployment(ctx context.Context, id int64) (store.Deployment, error)
	InsertServiceAccount(ctx context.Context, spec store.ServiceAccountSpec) (store.User, error)
	ServiceAccounts(ctx context.Context, accountID int64) ([]store.User, error)
	CountServiceAccounts(ctx context.Context, accountID int64) (int64, error)
	DeleteServiceAccount(ctx context.Context, accountID, id int64) error
	InsertClientSecret(ctx context.Context, c store.ClientSecret) error
	DeleteClientSecret(ctx context.Context, id string) error
	ClientSecret(ctx context.Context, id string) (store.ClientSecret, error)
	ClientSecrets(ctx context.Context, userID int64, revokedSince time.Time) ([]store.ClientSecret, error)
	CountLiveClientSecrets(ctx context.Context, userID int64) (int64, error)
	RevokeClientSecret(ctx context.Context, id string) error
	RotateClientSecret(ctx context.Context, id string, newHash []byte, overlapUntil time.Time) (store.ClientSecret, error)
	MarkClientSecretUsed(ctx context.Context, id string, at time.Time) error
}

// Signing is how access tokens are signed: the gateway's own Ed25519 key, with the iss
// and aud every bearer token must have.
type Signing struct {
	Key      ed25519.PrivateKey
	Issuer   string
	Audience string
}

// KeyID is the kid of the tokens the key signs.
func (s Signing) KeyID() string { return credentials.KeyID(s.Key.Public()) }

// Service manages service accounts and issues their tokens.
type Service struct {
	st      Store
	rec     audit.Recorder
	limits  Limits
	signing *Signing // nil: the token endpoint issues nothing
	now     func() time.Time
}

// New returns the service; rec records every change (and every refused one). signing
// nil disables the token endpoint.
func New(st Store, rec audit.Recorder, l Limits, signing *Signing, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{st: st, rec: rec, limits: l.withDefaults(), signing: signing, now: now}
}

// Limits are the limits in force.
func (s *Service) Limits() Limits { return s.limits }

// Issues reports whether the token endpoint is configured.
func (s *Service) Issues() bool { return s.signing != nil }

// ServiceAccount is a service account as the API shows it.
type ServiceAccount struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	CreatedBy *int64     `json:"createdBy"`
	CreatedAt httpx.Time `json:"createdAt"`
}

func view(u store.User) ServiceAccount {
	sa := ServiceAccount{ID: u.ID, Name: u.Name, Role: u.Role, CreatedAt: httpx.At(u.CreatedAt)}
	if u.CreatedBy > 0 {
		by := u.CreatedBy
		sa.CreatedBy = &by
	}
	return sa
}

// Secret is a client secret as the API shows it: never the secret.
type Secret struct {
	ClientID         string      `json:"clientId"`
	ServiceAccountID int64       `json:"serviceAccountId"`
	CreatedAt        httpx.Time  `json:"createdAt"`
	LastUsedAt       *httpx.Time `json:"lastUsedAt"`
	RevokedAt        *httpx.Time `json:"revokedAt"`
	RotatedAt        *httpx.Time `json:"rotatedAt"`
}

// SecretWithValue is a secret with its value, shown once: the answer of a create or
// rotate.
type SecretWithValue struct {
	Secret
	ClientSecret string `json:"clientSecret"`
	// PreviousSecretExpiresAt is, after a rotation, when the secret it replaced stops.
	PreviousSecretExpiresAt *httpx.Time `json:"previousSecretExpiresAt,omitempty"`
}

func secretView(c store.ClientSecret) Secret {
	return Secret{ClientID: c.ID, ServiceAccountID: c.UserID, CreatedAt: httpx.At(c.CreatedAt), LastUsedAt: httpx.AtPtr(c.LastUsedAt),
		RevokedAt: httpx.AtPtr(c.RevokedAt), RotatedAt: httpx.AtPtr(c.RotatedAt)}
}

// Caller is who asks for a change: a principal the gateway verified (Authorize), or,
// with Principal nil, an operator acting in Account.
type Caller struct {
	Account   int64
	Principal *identity.Principal
}

// Authorize checks that p may manage the service accounts of its account: an admin's
// bearer token or an admin's account key, neither scoped to deployments.
func Authorize(p *identity.Principal) (Caller, error) {
	const need = "managing service accounts needs an admin's bearer token or an unscoped admin account key"
	switch {
	case p == nil || p.User == nil:
		return Caller{}, errs.Forbiddenf(need)
	case p.Credential == identity.CredentialAPIKey && p.KeyKind != identity.KeyAccount:
		return Caller{}, errs.Forbiddenf("a personal API key cannot manage service accounts: use an account key").WithCode(errs.CodePersonalKey)
	case len(p.KeyScope) > 0:
		return Caller{}, errs.Forbiddenf("a credential scoped to deployments cannot manage service accounts, an account-wide change: use an unscoped one").WithCode(errs.CodeKeyOutOfScope)
	case p.Credential != identity.CredentialAPIKey && p.Credential != identity.CredentialBearer:
		return Caller{}, errs.Forbiddenf(need)
	case p.Role() != identity.RoleAdmin:
		return Caller{}, errs.Forbiddenf("managing service accounts needs the admin role, not %s", p.Role())
	}
	return Caller{Account: p.Account.ID, Principal: p}, nil
}

// CreateRequest is the body of a create.
type CreateRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Create makes a service account in the caller's account. Nothing is created when a
// rule is broken.
func (s *Service) Create(ctx context.Context, c Caller, req CreateRequest) (ServiceAccount, error) {
	out, err := s.create(ctx, c, req)
	id := ""
	if out.ID > 0 {
		id = strconv.FormatInt(out.ID, 10)
	}
	s.record(ctx, c, ActionCreate, "service_account", id, err, 201, map[string]any{"name": req.Name, "role": req.Role})
	return out, err
}

func (s *Service) create(ctx context.Context, c Caller, req CreateRequest) (ServiceAccount, error) {
	l := s.limits
	switch {
	case req.Name == "":
		return ServiceAccount{}, errs.Invalidf("name is required")
	case len(req.Name) > l.MaxNameBytes:
		return ServiceAccount{}, errs.Invalidf("name is %d bytes, over the limit of %d", len(req.Name), l.MaxNameBytes)
	case !utf8.ValidString(req.Name) || hasControl(req.Name):
		return ServiceAccount{}, errs.Invalidf("name must be UTF-8 text without control characters")
	case !identity.ValidRole(req.Role):
		return ServiceAccount{}, errs.Invalidf("role must be viewer, ai_bi_user, developer or admin, not %q", cut(req.Role))
	}
	n, err := s.st.CountServiceAccounts(ctx, c.Account)
	if err != nil {
		return ServiceAccount{}, err
	}
	if n >= l.MaxPerAccount {
		return ServiceAccount{}, accountLimit(l.MaxPerAccount)
	}
	var by int64
	if c.Principal != nil && c.Principal.User != nil {
		by = c.Principal.User.ID
	}
	u, err := s.st.InsertServiceAccount(ctx, store.ServiceAccountSpec{AccountID: c.Account, Name: req.Name, Role: req.Role, CreatedBy: by})
	if err != nil {
		return ServiceAccount{}, err
	}
	// Creates racing each other all passed the count: the ones over the bound are
	// deleted again (nobody holds a secret of theirs yet), so the bound holds.
	if n, err := s.st.CountServiceAccounts(ctx, c.Account); err == nil && n > l.MaxPerAccount {
		if err := s.st.DeleteServiceAccount(ctx, c.Account, u.ID); err == nil {
			return ServiceAccount{}, accountLimit(l.MaxPerAccount)
		}
	}
	return view(u), nil
}

func accountLimit(n int64) error {
	return errs.Invalidf("the account has %d service accounts, the limit: delete one first", n).WithCode(errs.CodeServiceAccountLimit)
}

// List returns the account's service accounts.
func (s *Service) List(ctx context.Context, c Caller) ([]ServiceAccount, error) {
	us, err := s.st.ServiceAccounts(ctx, c.Account)
	if err != nil {
		return nil, err
	}
	out := make([]ServiceAccount, len(us))
	for i, u := range us {
		out[i] = view(u)
	}
	return out, nil
}

// Get returns one service account of the account: 404 for another account's, a deleted
// one, or a person.
func (s *Service) Get(ctx context.Context, c Caller, id int64) (ServiceAccount, error) {
	u, err := s.find(ctx, c, id)
	return view(u), err
}

func (s *Service) find(ctx context.Context, c Caller, id int64) (store.User, error) {
	u, err := s.st.User(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (u.AccountID != c.Account || !u.IsService() || u.DeletedAt != nil)) {
		return store.User{}, errs.NotFoundf("service account %d not found", id)
	}
	return u, err
}

// Delete deletes a service account: its secrets and API keys are revoked, and every
// gateway refuses its tokens within the revocation poll.
func (s *Service) Delete(ctx context.Context, c Caller, id int64) error {
	u, err := s.find(ctx, c, id)
	if err == nil {
		err = s.st.DeleteServiceAccount(ctx, c.Account, id)
	}
	s.record(ctx, c, ActionDelete, "service_account", strconv.FormatInt(id, 10), err, 204, map[string]any{"name": u.Name, "role": u.Role})
	return err
}

// CreateSecret makes a client secret for a service account.
func (s *Service) CreateSecret(ctx context.Context, c Caller, saID int64) (SecretWithValue, error) {
	out, err := s.createSecret(ctx, c, saID)
	s.record(ctx, c, ActionSecretCreate, "service_account_secret", out.ClientID, err, 201, map[string]any{"serviceAccountId": saID})
	return out, err
}

func (s *Service) createSecret(ctx context.Context, c Caller, saID int64) (SecretWithValue, error) {
	if _, err := s.find(ctx, c, saID); err != nil {
		return SecretWithValue{}, err
	}
	l := s.limits
	n, err := s.st.CountLiveClientSecrets(ctx, saID)
	if err != nil {
		return SecretWithValue{}, err
	}
	if n >= l.MaxSecrets {
		return SecretWithValue{}, secretLimit(l.MaxSecrets)
	}
	id, secret, hash := newClientSecret()
	if err := s.st.InsertClientSecret(ctx, store.ClientSecret{ID: id, AccountID: c.Account, UserID: saID, SecretHash: hash}); err != nil {
		return SecretWithValue{}, err
	}
	if n, err := s.st.CountLiveClientSecrets(ctx, saID); err == nil && n > l.MaxSecrets {
		if err := s.st.DeleteClientSecret(ctx, id); err == nil {
			return SecretWithValue{}, secretLimit(l.MaxSecrets)
		}
	}
	rec, err := s.st.ClientSecret(ctx, id)
	if err != nil {
		return SecretWithValue{}, err
	}
	return SecretWithValue{Secret: secretView(rec), ClientSecret: secret}, nil
}

func secretLimit(n int64) error {
	return errs.Invalidf("the service account has %d live client secrets, the limit: revoke one first", n).WithCode(errs.CodeClientSecretLimit)
}

// Secrets lists a service account's secrets: live ones and those revoked within the
// retention.
func (s *Service) Secrets(ctx context.Context, c Caller, saID int64) ([]Secret, error) {
	if _, err := s.find(ctx, c, saID); err != nil {
		return nil, err
	}
	cs, err := s.st.ClientSecrets(ctx, saID, s.now().Add(-s.limits.Retention))
	if err != nil {
		return nil, err
	}
	out := make([]Secret, len(cs))
	for i, x := range cs {
		out[i] = secretView(x)
	}
	return out, nil
}

// GetSecret returns one secret of a service account.
func (s *Service) GetSecret(ctx context.Context, c Caller, saID int64, clientID string) (Secret, error) {
	x, err := s.findSecret(ctx, c, saID, clientID)
	return secretView(x), err
}

func (s *Service) findSecret(ctx context.Context, c Caller, saID int64, clientID string) (store.ClientSecret, error) {
	if _, err := s.find(ctx, c, saID); err != nil {
		return store.ClientSecret{}, err
	}
	x, err := s.st.ClientSecret(ctx, clientID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (x.UserID != saID || x.AccountID != c.Account ||
		x.RevokedAt != nil && x.RevokedAt.Before(s.now().Add(-s.limits.Retention)))) {
		return store.ClientSecret{}, errs.NotFoundf("client secret %s not found", cut(clientID))
	}
	return x, err
}

// RevokeSecret revokes a secret: the token endpoint refuses it at once. Revoking a
// revoked secret answers it as it is.
func (s *Service) RevokeSecret(ctx context.Context, c Caller, saID int64, clientID string) (Secret, error) {
	out, err := s.revokeSecret(ctx, c, saID, clientID)
	s.record(ctx, c, ActionSecretRevoke, "service_account_secret", clientID, err, 200, map[string]any{"serviceAccountId": saID})
	return out, err
}

func (s *Service) revokeSecret(ctx context.Context, c Caller, saID int64, clientID string) (Secret, error) {
	if _, err := s.findSecret(ctx, c, saID, clientID); err != nil {
		return Secret{}, err
	}
	if err := s.st.RevokeClientSecret(ctx, clientID); err != nil {
		return Secret{}, err
	}
	x, err := s.st.ClientSecret(ctx, clientID)
	return secretView(x), err
}

// RotateSecret gives a secret a new value under the same client id; the old value keeps
// working for the overlap. A revoked secret is 409.
func (s *Service) RotateSecret(ctx context.Context, c Caller, saID int64, clientID string) (SecretWithValue, error) {
	out, err := s.rotateSecret(ctx, c, saID, clientID)
	details := map[string]any{"serviceAccountId": saID, "overlap": s.limits.Overlap.String()}
	s.record(ctx, c, ActionSecretRotate, "service_account_secret", clientID, err, 200, details)
	return out, err
}

func (s *Service) rotateSecret(ctx context.Context, c Caller, saID int64, clientID string) (SecretWithValue, error) {
	x, err := s.findSecret(ctx, c, saID, clientID)
	if err != nil {
		return SecretWithValue{}, err
	}
	if x.RevokedAt != nil {
		return SecretWithValue{}, errs.Conflictf("client secret %s is revoked: create a new one", clientID)
	}
	secret, hash := newSecretValue()
	until := s.now().Add(s.limits.Overlap).UTC().Truncate(time.Millisecond)
	x, err = s.st.RotateClientSecret(ctx, clientID, hash, until)
	if errors.Is(err, store.ErrConflict) {
		return SecretWithValue{}, errs.Conflictf("client secret %s is revoked: create a new one", clientID)
	}
	if err != nil {
		return SecretWithValue{}, err
	}
	return SecretWithValue{Secret: secretView(x), ClientSecret: secret, PreviousSecretExpiresAt: httpx.AtPtr(&until)}, nil
}

// Client ids look like "sa_<24 hex>" and secrets like "sas_<43 base64url>" (256 bits),
// so a leaked one is recognisable; only the secret's SHA-256 is stored.
const (
	clientIDPrefix = "sa_"
	secretPrefix   = "sas_"
)

func newClientSecret() (id, secret string, hash []byte) {
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	id = clientIDPrefix + hex.EncodeToString(raw[:])
	secret, hash = newSecretValue()
	return id, secret, hash
}

func newSecretValue() (string, []byte) {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	s := secretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	h := sha256.Sum256([]byte(s))
	return s, h[:]
}

// ValidClientID reports whether s has the shape of a client id.
func ValidClientID(s string) bool {
	rest, ok := strings.CutPrefix(s, clientIDPrefix)
	if !ok || len(rest) != 24 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (s *Service) record(ctx context.Context, c Caller, action, targetType, id string, err error, ok int, details map[string]any) {
	if s.rec == nil {
		return
	}
	ev := audit.New(c.Principal, action, audit.Target{Type: targetType, ID: id})
	ev.AccountID = c.Account
	ev.Outcome, ev.Details = audit.OutcomeOf(err, ok), details
	s.rec.Record(ctx, ev)
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// cut bounds a client's value quoted back in a message.
func cut(s string) string {
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
