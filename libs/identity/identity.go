// Package identity carries a verified caller from the gateway to the services.
//
// The gateway authenticates the client's credential, strips every identity header the
// client sent, and forwards the resulting Principal in the X-Platform-Identity header as
// a short-lived token: base64url(JSON) "." base64url(HMAC-SHA256(key, JSON part)).
// Services verify it on every request and answer 401 without a valid one, so a request
// that bypasses the gateway, or that forges or replays an old identity, gets nowhere.
// HMAC is used rather than a signature because it is signed once per request on the
// gateway's hot path: about a microsecond, where Ed25519 signing costs tens.
//
// Each service has a key of its own, derived from the gateway's key (IDENTITY_SIGNING_KEY)
// for its name (the principal's Audience): HMAC-SHA256(gateway key, label || service). The
// gateway holds the one key and signs each forwarded identity with the key of the
// service it goes to; a service can be given only its own key (ServiceKey, "svc:NAME:..."),
// with which it verifies what is sent to it and can forge nothing for another service.
package identity

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"
)

// Header is the request header that carries the signed principal.
const Header = "X-Platform-Identity"

// HeaderPrefix is the prefix of every internal header; the gateway drops client-sent
// headers with it.
const HeaderPrefix = "X-Platform-"

// Credential kinds.
const (
	CredentialBearer = "bearer"  // a user's bearer JWT
	CredentialAPIKey = "api_key" // an API key
	CredentialEmbed  = "embed"   // an embed session token
	CredentialNone   = "none"    // a public route: the gateway vouches only for the request's origin
)

// API key kinds.
const (
	KeyAccount  = "account"
	KeyPersonal = "personal"
)

// Roles, lowest first.
const (
	RoleViewer    = "viewer"
	RoleAIBIUser  = "ai_bi_user"
	RoleDeveloper = "developer"
	RoleAdmin     = "admin"
)

// RoleRank orders roles: viewer 1 < ai_bi_user 2 < developer 3 < admin 4; unknown 0.
func RoleRank(role string) int {
	switch role {
	case RoleViewer:
		return 1
	case RoleAIBIUser:
		return 2
	case RoleDeveloper:
		return 3
	case RoleAdmin:
		return 4
	}
	return 0
}

// ValidRole reports whether role is one of the four roles.
func ValidRole(role string) bool { return RoleRank(role) > 0 }

// Account is what services may need to know of the caller's account.
type Account struct {
	ID                 int64  `json:"id"`
	Plan               string `json:"plan"`
	EmbeddingEnabled   bool   `json:"embeddingEnabled"`
	UseCreatorMode     bool   `json:"useCreatorMode"`
	DefaultEmbedTenant string `json:"defaultEmbedTenant,omitempty"`
	ExternalUserLimit  int64  `json:"externalUserLimit,omitempty"`
}

// User is the authenticated internal user, when there is one.
type User struct {
	ID        int64  `json:"id"`
	Username  string `json:"username"`
	Email     string `json:"email"`
	FirstName string `json:"firstName,omitempty"`
	Picture   string `json:"picture,omitempty"`
	Role      string `json:"role"`
}

// Deployment is the deployment the request targets, checked by the gateway to belong
// to the caller's account (and to the key's scope where that applies).
type Deployment struct {
	ID               int64  `json:"id"`
	ProductionBranch string `json:"productionBranch"`
}

// Embed carries the claims of an embed session token.
type Embed struct {
	SessionID    string `json:"sid"`
	Subject      string `json:"sub"`
	DeploymentID int64  `json:"deploymentId"`
	Branch       string `json:"branch,omitempty"`
	Tenant       string `json:"tenant,omitempty"`
	CreatorMode  bool   `json:"creatorMode,omitempty"`
	Internal     bool   `json:"internal,omitempty"`
	// Resources, when not nil, narrows the session to the dashboards it names among
	// those its grants let it open (generate-session's resources): never wider, and an
	// empty list opens nothing.
	Resources *EmbedResources `json:"resources,omitempty"`
	Claims    json.RawMessage `json:"claims,omitempty"`
}

// EmbedResources is what an embed session is narrowed to: dashboards by public id.
type EmbedResources struct {
	Dashboards []string `json:"dashboards"`
}

// Principal is the verified caller of one request.
type Principal struct {
	Credential string      `json:"cred"`
	Account    Account     `json:"acct"`
	User       *User       `json:"user,omitempty"`
	KeyID      string      `json:"keyId,omitempty"`
	KeyKind    string      `json:"keyKind,omitempty"`
	KeyScope   []int64     `json:"keyScope,omitempty"`
	Deployment *Deployment `json:"dep,omitempty"`
	Embed      *Embed      `json:"embed,omitempty"`
	// ClientAddr is the client's IP address as the gateway saw it (the nearest untrusted
	// hop of X-Forwarded-For behind a trusted proxy): what the audit trail records.
	ClientAddr string `json:"ip,omitempty"`
	// Audience is the one service the gateway signed this principal for: a header
	// captured on its way to one service is refused by every other.
	Audience string `json:"aud,omitempty"`
	Expiry   int64  `json:"exp"`
}

// Role is the user's role, or "" when no user is behind the credential.
func (p *Principal) Role() string {
	if p.User == nil {
		return ""
	}
	return p.User.Role
}

// HasRole reports whether the caller is a user with at least role min.
func (p *Principal) HasRole(min string) bool { return RoleRank(p.Role()) >= RoleRank(min) }

// InScope reports whether the API key's deployment scope allows deploymentID (an
// unscoped key allows every deployment of its account).
func (p *Principal) InScope(deploymentID int64) bool {
	if len(p.KeyScope) == 0 {
		return true
	}
	for _, id := range p.KeyScope {
		if id == deploymentID {
			return true
		}
	}
	return false
}

// ErrInvalid is returned for a missing, malformed, forged or expired identity.
var ErrInvalid = errors.New("identity: missing or invalid")

// Signer signs and verifies principals: with the gateway's key it signs for every
// service (each with its derived key); with a service's own key, only for that service.
type Signer struct {
	key     []byte // the gateway's key, or the service's own key when service is set
	service string // set: key is this service's own key (ServiceKey), and it knows no other
	ttl     time.Duration
	now     func() time.Time
	pools   *sync.Map // audience -> *sync.Pool of hash.Hash keyed for it (hmac.New costs two SHA-256 states)
	aud     string    // when set, Verify accepts only principals signed for this service
}

// DefaultTTL is how long a forwarded identity is valid: long enough for one hop, short
// enough that a captured header is useless.
const DefaultTTL = 30 * time.Second

// serviceKeyPrefix starts a service's own key: "svc:<service>:<base64 key>".
const serviceKeyPrefix = "svc:"

// NewSigner builds a Signer from the gateway's base64-encoded key (at least 32 bytes) or
// from a service's own key as ServiceKey prints it.
func NewSigner(base64Key string) (*Signer, error) {
	raw := strings.TrimSpace(base64Key)
	service := ""
	if rest, ok := strings.CutPrefix(raw, serviceKeyPrefix); ok {
		name, k, ok := strings.Cut(rest, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("identity: a service key is svc:<service>:<base64 key>")
		}
		service, raw = name, k
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		key, err = base64.RawURLEncoding.DecodeString(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: signing key is not base64")
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("identity: signing key must be at least 32 bytes, got %d", len(key))
	}
	return &Signer{key: key, service: service, ttl: DefaultTTL, now: time.Now, pools: &sync.Map{}}, nil
}

// deriveLabel separates derived keys from any other use of the gateway's key.
const deriveLabel = "analytics-platform forwarded identity v1\x00"

// deriveKey is service's own key under the gateway's key.
func deriveKey(gatewayKey []byte, service string) []byte {
	m := hmac.New(sha256.New, gatewayKey)
	m.Write([]byte(deriveLabel + service))
	return m.Sum(nil)
}

// ServiceKey is service's own key under the gateway's key base64Key, in the form
// NewSigner reads ("svc:<service>:<base64>"): give it to the service instead of the
// gateway's key, and the service can verify what is sent to it and sign for nothing else.
func ServiceKey(base64Key, service string) (string, error) {
	s, err := NewSigner(base64Key)
	if err != nil {
		return "", err
	}
	if s.service != "" {
		return "", fmt.Errorf("identity: %q is already a service's key", s.service)
	}
	if service == "" || strings.Contains(service, ":") {
		return "", fmt.Errorf("identity: invalid service name %q", service)
	}
	return serviceKeyPrefix + service + ":" + base64.StdEncoding.EncodeToString(deriveKey(s.key, service)), nil
}

// sealLabel separates the keys SealKey derives from every other use of the key.
const sealLabel = "analytics-platform sealed at rest v1\x00"

// SealKey is a 32-byte key for what the holder keeps at rest under label (its
// Idempotency-Key answers, say), derived from its own key: a service's key derives a
// key no other service's does, and the forwarded identity's MAC keys are not it.
func (s *Signer) SealKey(label string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(sealLabel + s.service + "\x00" + label))
	return m.Sum(nil)
}

// ForService returns a copy of s whose Verify accepts only principals whose Audience is
// service, checked with service's own key: what every service verifies with, so a
// forwarded identity is good for the one service the gateway sent it to. A signer made
// from another service's key verifies nothing.
func (s *Signer) ForService(service string) *Signer {
	c := *s
	c.aud = service
	return &c
}

// WithClock returns a copy of s using now as its clock (tests).
func (s *Signer) WithClock(now func() time.Time) *Signer {
	c := *s
	c.now = now
	return &c
}

// Sign returns the header value for p, setting its expiry.
func (s *Signer) Sign(p *Principal) (string, error) {
	p.Expiry = s.now().Add(s.ttl).Unix()
	body, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	n := base64.RawURLEncoding.EncodedLen(len(body))
	var out strings.Builder
	out.Grow(n + 1 + base64.RawURLEncoding.EncodedLen(sha256.Size))
	enc := make([]byte, n, n+1+base64.RawURLEncoding.EncodedLen(sha256.Size))
	base64.RawURLEncoding.Encode(enc, body)
	var sum [sha256.Size]byte
	// Audiences signed for are the gateway's route targets, a handful: pooled.
	if _, err := s.macFor(p.Audience, enc, sum[:0], true); err != nil {
		return "", err
	}
	enc = append(enc, '.')
	enc = base64.RawURLEncoding.AppendEncode(enc, sum[:])
	out.Write(enc)
	return out.String(), nil
}

// Verify checks a header value and returns its principal.
func (s *Signer) Verify(value string) (*Principal, error) {
	payload, sig, ok := strings.Cut(value, ".")
	if !ok || payload == "" || sig == "" {
		return nil, ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, ErrInvalid
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, ErrInvalid
	}
	var p Principal
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, ErrInvalid
	}
	// The key is the one of the service verifying (ForService), else of the audience the
	// principal names; the MAC over the payload decides before anything in it is trusted.
	aud, cache := s.aud, true
	if aud == "" {
		// Not pooled: the audience comes from the (not yet verified) payload, and no
		// key cache is ever sized by what a client sends.
		aud, cache = p.Audience, false
	}
	var sum [sha256.Size]byte
	mac, err := s.macFor(aud, []byte(payload), sum[:0], cache)
	if err != nil || !hmac.Equal(got, mac) {
		return nil, ErrInvalid
	}
	if p.Expiry < s.now().Unix() {
		return nil, ErrInvalid
	}
	if s.aud != "" && p.Audience != s.aud {
		return nil, ErrInvalid
	}
	return &p, nil
}

// errOtherService: a service's own key cannot sign or verify for another service.
var errOtherService = errors.New("identity: this key belongs to another service")

// macFor appends HMAC-SHA256(the key for audience, data) to dst, with a pooled hash when
// cache is set. The key for an audience is its derived key ("" is the gateway's key
// itself, which only the gateway's signer has).
func (s *Signer) macFor(audience string, data, dst []byte, cache bool) ([]byte, error) {
	if s.service != "" && audience != s.service {
		return nil, errOtherService
	}
	if !cache {
		key := s.key
		if s.service == "" && audience != "" {
			key = deriveKey(s.key, audience)
		}
		h := hmac.New(sha256.New, key)
		h.Write(data)
		return h.Sum(dst), nil
	}
	pool, ok := s.pools.Load(audience)
	if !ok {
		key := s.key
		if s.service == "" && audience != "" {
			key = deriveKey(s.key, audience)
		}
		pool, _ = s.pools.LoadOrStore(audience, &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }})
	}
	p := pool.(*sync.Pool)
	h := p.Get().(hash.Hash)
	h.Reset()
	h.Write(data)
	out := h.Sum(dst)
	p.Put(h)
	return out, nil
}

type ctxKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal in ctx, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}
