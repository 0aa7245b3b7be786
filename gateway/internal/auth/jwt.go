package auth

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/gateway/internal/credentials"
)

// KeySet holds the public keys that may sign bearer tokens: static keys from a PEM file
// and, optionally, keys fetched from a JWKS URL (refreshed periodically and when a token
// names an unknown kid, at most once per minRefresh).
type KeySet struct {
	mu         sync.RWMutex
	static     map[string]crypto.PublicKey
	fetched    map[string]crypto.PublicKey
	jwksURL    string
	client     *http.Client
	lastFetch  time.Time
	minRefresh time.Duration
	// Unknown-kid refetches: one at a time (others wait for it), at most once per
	// minRefresh after the last attempt (successful or not), backing off exponentially
	// while the JWKS endpoint fails.
	lastAttempt time.Time
	failures    int
	inflight    chan struct{}
	// decorate, when set, adds headers to the JWKS request (the gateway's own signed
	// identity when the keys are served by one of our services).
	decorate func(*http.Request) error
}

// NewKeySet builds a key set from static keys and an optional JWKS URL.
func NewKeySet(static []crypto.PublicKey, jwksURL string) *KeySet {
	ks := &KeySet{static: map[string]crypto.PublicKey{}, fetched: map[string]crypto.PublicKey{}, jwksURL: jwksURL,
		client: &http.Client{Timeout: 5 * time.Second}, minRefresh: 10 * time.Second}
	for _, k := range static {
		ks.static[credentials.KeyID(k)] = k
	}
	return ks
}

// WithRequestDecorator sets a function that prepares each JWKS request.
func (ks *KeySet) WithRequestDecorator(f func(*http.Request) error) *KeySet {
	ks.decorate = f
	return ks
}

// WithMinRefresh sets how often at most an unknown kid may trigger a JWKS fetch
// (default 10s: a flood of tokens with made-up kids must not become a flood of fetches).
func (ks *KeySet) WithMinRefresh(d time.Duration) *KeySet {
	ks.minRefresh = d
	return ks
}

// Refresh fetches the JWKS now (no-op without a URL).
func (ks *KeySet) Refresh(ctx context.Context) error {
	if ks.jwksURL == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.jwksURL, nil)
	if err != nil {
		return err
	}
	if ks.decorate != nil {
		if err := ks.decorate(req); err != nil {
			return err
		}
	}
	resp, err := ks.client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch JWKS: status %d", resp.StatusCode)
	}
	keys, err := ParseJWKS(http.MaxBytesReader(nil, resp.Body, 1<<20))
	if err != nil {
		return err
	}
	ks.mu.Lock()
	ks.fetched = keys
	ks.lastFetch = time.Now()
	ks.mu.Unlock()
	return nil
}

// maxRefreshBackoff caps the wait between unknown-kid refetches while the JWKS fails.
const maxRefreshBackoff = 5 * time.Minute

// refreshForUnknownKid fetches the JWKS for a token naming an unknown kid, unless a fetch
// was attempted too recently; concurrent callers share one fetch. It reports whether the
// keys may have changed (a fetch ran or was waited for).
func (ks *KeySet) refreshForUnknownKid() bool {
	ks.mu.Lock()
	if ch := ks.inflight; ch != nil {
		ks.mu.Unlock()
		select {
		case <-ch:
			return true
		case <-time.After(3 * time.Second):
			return false
		}
	}
	wait := min(ks.minRefresh<<min(ks.failures, 10), maxRefreshBackoff)
	if !ks.lastAttempt.IsZero() && time.Since(ks.lastAttempt) < wait {
		ks.mu.Unlock()
		return false
	}
	ks.lastAttempt = time.Now() // before the fetch: a failing endpoint is not asked again at once
	ch := make(chan struct{})
	ks.inflight = ch
	ks.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := ks.Refresh(ctx)
	cancel()
	ks.mu.Lock()
	if err != nil {
		ks.failures++
	} else {
		ks.failures = 0
	}
	ks.inflight = nil
	ks.mu.Unlock()
	close(ch)
	return true
}

// Run refreshes the JWKS every interval until ctx ends.
func (ks *KeySet) Run(ctx context.Context, interval time.Duration) {
	if ks.jwksURL == "" {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_ = ks.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Keyfunc is a jwt.Keyfunc over the set: the key named by kid (fetching the JWKS again
// when the kid is unknown), or every key when the token names none.
var _ jwt.Keyfunc = (*KeySet)(nil).Keyfunc

func (ks *KeySet) lookup(kid string) (crypto.PublicKey, []crypto.PublicKey) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	if kid != "" {
		if k, ok := ks.static[kid]; ok {
			return k, nil
		}
		if k, ok := ks.fetched[kid]; ok {
			return k, nil
		}
		return nil, nil
	}
	all := make([]crypto.PublicKey, 0, len(ks.static)+len(ks.fetched))
	for _, k := range ks.static {
		all = append(all, k)
	}
	for _, k := range ks.fetched {
		all = append(all, k)
	}
	return nil, all
}

func (ks *KeySet) Keyfunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k, all := ks.lookup(kid)
	if k == nil && kid != "" && ks.jwksURL != "" {
		if ks.refreshForUnknownKid() {
			k, all = ks.lookup(kid)
		}
	}
	if k != nil {
		return k, nil
	}
	if len(all) == 0 {
		return nil, errors.New("unknown signing key")
	}
	set := jwt.VerificationKeySet{}
	for _, k := range all {
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// ParseJWKS parses the Ed25519 (OKP) and RSA keys of a JWK set, by kid.
func ParseJWKS(r interface{ Read([]byte) (int, error) }) (map[string]crypto.PublicKey, error) {
	var doc struct {
		Keys []struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			X   string `json:"x"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	out := map[string]crypto.PublicKey{}
	for _, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		switch {
		case k.Kty == "OKP" && k.Crv == "Ed25519":
			x, err := base64.RawURLEncoding.DecodeString(k.X)
			if err != nil || len(x) != ed25519.PublicKeySize {
				continue
			}
			pub = ed25519.PublicKey(x)
		case k.Kty == "RSA":
			n, err1 := base64.RawURLEncoding.DecodeString(k.N)
			e, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) > 4 {
				continue
			}
			pub = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		default:
			continue
		}
		kid := k.Kid
		if kid == "" {
			kid = credentials.KeyID(pub)
		}
		out[kid] = pub
	}
	return out, nil
}

// Verifier verifies bearer JWTs: EdDSA or RS256 only, exp required, issuer and audience
// checked.
type Verifier struct {
	keys   *KeySet
	parser *jwt.Parser
}

// NewVerifier returns a verifier for tokens of issuer and audience.
func NewVerifier(keys *KeySet, issuer, audience string, now func() time.Time) *Verifier {
	return &Verifier{keys: keys, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{"EdDSA", "RS256"}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(issuer),
		jwt.WithAudience(audience),
		jwt.WithTimeFunc(now),
	)}
}

// Verify checks a token and returns its claims.
func (v *Verifier) Verify(token string) (*credentials.Claims, error) {
	c, _, err := v.VerifyKid(token)
	return c, err
}

// VerifyKid checks a token and returns its claims and the kid of its header.
func (v *Verifier) VerifyKid(token string) (*credentials.Claims, string, error) {
	var c credentials.Claims
	t, err := v.parser.ParseWithClaims(token, &c, v.keys.Keyfunc)
	if err != nil {
		return nil, "", err
	}
	kid, _ := t.Header["kid"].(string)
	return &c, kid, nil
}

// AddStatic trusts one more static key (the gateway's own token-signing key).
func (ks *KeySet) AddStatic(k crypto.PublicKey) {
	ks.mu.Lock()
	ks.static[credentials.KeyID(k)] = k
	ks.mu.Unlock()
}
