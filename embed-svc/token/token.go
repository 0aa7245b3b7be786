// Package token is embed-svc's published contract for the embed session token: the
// claims embed-svc signs when a session id is exchanged, and that the gateway's verifier
// parses on every embed-token request. Both import this package, so the two sides cannot
// drift apart. The token is a JWT, alg EdDSA, with the signing key's id in the header
// (kid); the keys are published at JWKSPath.
package token

import (
	"encoding/json"
	"errors"

	"github.com/golang-jwt/jwt/v5"
)

// Audience is the aud of every embed session token.
const Audience = "platform-embed"

// JWKSPath is where embed-svc publishes the keys that may have signed a live token.
const JWKSPath = "/api/v1/embed/.well-known/jwks.json"

// Claims are the claims of an embed session token. The registered claims are plain
// fields, not jwt.RegisteredClaims, so aud stays the single string it has always been on
// the wire (jwt's ClaimStrings would write an array).
type Claims struct {
	Issuer    string           `json:"iss"`
	Audience  string           `json:"aud"`
	Subject   string           `json:"sub"` // the external id, or the internal user's username
	IssuedAt  *jwt.NumericDate `json:"iat,omitempty"`
	ExpiresAt *jwt.NumericDate `json:"exp,omitempty"`
	ID        string           `json:"jti,omitempty"`

	SessionID    string `json:"sid"`           // hex SHA-256 of the session id: revocations are keyed by it
	RecordID     string `json:"rid,omitempty"` // the session's public id (GET /api/v1/embed/sessions)
	AccountID    int64  `json:"acc"`
	DeploymentID int64  `json:"dep"`
	Branch       string `json:"br"`
	Tenant       string `json:"ten"`
	CreatorMode  bool   `json:"cm"`
	Internal     bool   `json:"int"`
	UserID       int64  `json:"uid,omitempty"` // internal users only
	// Settings are the session's resolved switches, locale and timezone (an object).
	Settings json.RawMessage `json:"set,omitempty"`
}

// ErrIncomplete means a token without sid, acc or dep is no embed session token, whoever
// signed it.
var ErrIncomplete = errors.New("embed token lacks sid, acc or dep")

// Complete returns ErrIncomplete unless the token names its session, account and
// deployment. (Not named Validate: jwt's parser would call that itself, and fold the
// error into its own message.)
func (c Claims) Complete() error {
	if c.SessionID == "" || c.AccountID <= 0 || c.DeploymentID <= 0 {
		return ErrIncomplete
	}
	return nil
}

// The jwt.Claims methods, over the plain fields.

// GetExpirationTime returns exp.
func (c Claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt, nil }

// GetIssuedAt returns iat.
func (c Claims) GetIssuedAt() (*jwt.NumericDate, error) { return c.IssuedAt, nil }

// GetNotBefore returns nil: embed tokens have no nbf.
func (c Claims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }

// GetIssuer returns iss.
func (c Claims) GetIssuer() (string, error) { return c.Issuer, nil }

// GetSubject returns sub.
func (c Claims) GetSubject() (string, error) { return c.Subject, nil }

// GetAudience returns aud.
func (c Claims) GetAudience() (jwt.ClaimStrings, error) { return jwt.ClaimStrings{c.Audience}, nil }
