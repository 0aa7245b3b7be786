// Package embedauth verifies embed session tokens for the gateway: the EdDSA signature
// against embed-svc's published JWKS (refetched when a token names an unknown key, so
// key rotation needs no restart), issuer, audience and expiry, and — on every request,
// uncached — that neither the session nor its signing key has been revoked (the Redis
// markers embed-svc writes). A revoke is therefore seen on the very next request by every
// replica. The claims and the markers are embed-svc's published contracts (packages
// embed-svc/token and embed-svc/revocation).
package embedauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/revocation"
	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/libs/identity"
)

// SignedRequest returns a request decorator that gives the gateway's own JWKS fetches
// a signed anonymous identity, as every request that reaches a service must carry one.
func SignedRequest(signer *identity.Signer) func(*http.Request) error {
	return func(r *http.Request) error {
		v, err := signer.Sign(&identity.Principal{Credential: identity.CredentialNone, Audience: "embed-svc"})
		if err != nil {
			return err
		}
		r.Header.Set(identity.Header, v)
		return nil
	}
}

// Verifier implements the gateway's EmbedAuthenticator.
type Verifier struct {
	keys   *auth.KeySet
	parser *jwt.Parser
	marks  *revocation.Checker
	authn  *auth.Authenticator
	cache  *auth.Cache[string, verified]
	now    func() time.Time
	checks *prometheus.CounterVec // nil: not counted (see Instrument)
}

// New returns a verifier of tokens from issuer, signed by keys, with revocations in rdb.
func New(keys *auth.KeySet, issuer string, rdb redis.UniversalClient, authn *auth.Authenticator, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{keys: keys, marks: revocation.NewChecker(rdb, now), authn: authn, now: now, cache: auth.NewCache[string, verified](100_000, now),
		parser: jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithExpirationRequired(),
			jwt.WithIssuer(issuer), jwt.WithAudience(token.Audience), jwt.WithTimeFunc(now))}
}

// Embed verifies token and returns the principal of its session.
func (v *Verifier) Embed(ctx context.Context, raw string) (*identity.Principal, error) {
	hit, ok := v.cache.Get(raw)
	c, payload, kid := hit.claims, hit.raw, hit.kid
	if !ok {
		var claims token.Claims
		tok, err := v.parser.ParseWithClaims(raw, &claims, v.keys.Keyfunc)
		if err != nil {
			return nil, fmt.Errorf("%w: embed token: %v", auth.ErrUnauthenticated, err)
		}
		kid, _ = tok.Header["kid"].(string)
		if err := claims.Complete(); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrUnauthenticated, err)
		}
		if payload, err = payloadOf(raw); err != nil {
			return nil, fmt.Errorf("%w: embed token: %v", auth.ErrUnauthenticated, err)
		}
		c = &claims
		// Signature checks are cached until the token's own expiry; revocation is not.
		v.cache.Put(raw, verified{c, payload, kid}, claims.ExpiresAt.Time)
	}
	// One round trip checks both the session and its signing key (in Redis Cluster two
	// lookups, sent at once).
	revoked, err := v.marks.Revoked(ctx, c.SessionID, kid)
	if err != nil {
		v.countCheck(checkError)
		return nil, fmt.Errorf("%w: revocation check: %v", auth.ErrUnavailable, err)
	}
	if revoked {
		v.countCheck(checkRevoked)
		return nil, fmt.Errorf("%w: embed session revoked", auth.ErrUnauthenticated)
	}
	v.countCheck(checkOK)
	acct, err := v.authn.Account(ctx, c.AccountID)
	if err != nil {
		return nil, err
	}
	// Embed tokens end with the account's right to embed: turning embedding off or leaving
	// the premium and enterprise plans is seen here within the change poller's interval.
	if !acct.EmbeddingEnabled || !token.PlanAllowsEmbedding(acct.Plan) {
		return nil, fmt.Errorf("%w: embedding is no longer enabled for this account", auth.ErrUnauthenticated)
	}
	p := &identity.Principal{
		Credential: identity.CredentialEmbed,
		Account:    acct.Identity(),
		Embed: &identity.Embed{SessionID: c.SessionID, Subject: c.Subject, DeploymentID: c.DeploymentID, Branch: c.Branch,
			Tenant: c.Tenant, CreatorMode: c.CreatorMode, Internal: c.Internal, Claims: payload},
	}
	if c.Resources != nil {
		p.Embed.Resources = &identity.EmbedResources{Dashboards: append([]string{}, c.Resources.Dashboards...)}
	}
	if c.Internal && c.UserID > 0 {
		u, err := v.authn.User(ctx, c.UserID)
		if err != nil {
			return nil, err
		}
		if u.AccountID != c.AccountID {
			return nil, fmt.Errorf("%w: embed token user is not in its account", auth.ErrUnauthenticated)
		}
		p.User = u.Identity()
	}
	return p, nil
}

type verified struct {
	claims *token.Claims
	raw    json.RawMessage
	kid    string // the key that signed it; a verified token names a key of the JWKS
}

func payloadOf(token string) (json.RawMessage, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWS compact token")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	return raw, nil
}
