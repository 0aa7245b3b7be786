// Package token is embed-svc's published contract for the tokens it signs: the embed
// session token (Claims: signed when a session id is exchanged, parsed by the gateway's
// verifier on every embed-token request; both import this package, so the two sides
// cannot drift apart), the data-API token (DataClaims) and the AI credential (AIClaims),
// which customers' data APIs and the AI service verify. Each is a JWT, alg EdDSA, with
// the signing key's id in the header (kid); the keys are published at JWKSPath.
package token

import (
	"encoding/json"
	"errors"

	"github.com/golang-jwt/jwt/v5"
)

// The aud of each kind of token.
const (
	Audience        = "platform-embed"    // the embed session token
	DataAPIAudience = "platform-data-api" // the data-API token
	AIAudience      = "platform-ai"       // the AI credential
)

// JWKSPath is where embed-svc publishes the keys that may have signed a live token.
const JWKSPath = "/api/v1/embed/.well-known/jwks.json"

// Registered are the registered claims of every token embed-svc signs. They are plain
// fields, not jwt.RegisteredClaims, so aud stays the single string it has always been on
// the wire (jwt's ClaimStrings would write an array).
type Registered struct {
	Issuer    string           `json:"iss"`
	Audience  string           `json:"aud"`
	Subject   string           `json:"sub"` // the external id, or the internal user's username
	IssuedAt  *jwt.NumericDate `json:"iat,omitempty"`
	ExpiresAt *jwt.NumericDate `json:"exp,omitempty"`
	ID        string           `json:"jti,omitempty"`
}

// Claims are the claims of an embed session token.
type Claims struct {
	Registered

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
	// Resources, when present, narrows the session to these dashboards among those its
	// grants let it open (generate-session's resources); absent: no narrowing.
	Resources *Resources `json:"res,omitempty"`
}

// Resources is what a session is narrowed to: dashboards by public id (at most
// MaxResourceDashboards).
type Resources struct {
	Dashboards []string `json:"dashboards"`
}

// MaxResourceDashboards bounds a session's resources.dashboards.
const MaxResourceDashboards = 50

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

// DataClaims are the claims of a data-API token: everything a data API needs to filter
// rows, as stored when the token is issued. It carries no session id, so revoking the
// session leaves it valid until its own expiry.
type DataClaims struct {
	Registered

	AccountID    int64  `json:"acc"`
	DeploymentID int64  `json:"dep"`
	Branch       string `json:"br"`
	Tenant       string `json:"ten"`
	Internal     bool   `json:"int"`
	CreatorMode  bool   `json:"cm"`
	UserID       int64  `json:"uid,omitempty"` // internal users only
	// SecurityContext is the session's securityContext as minted (a JSON object, {} when
	// none); Groups and UserAttributes (typed values by name) are the user's effective ones.
	SecurityContext json.RawMessage            `json:"securityContext"`
	Groups          []string                   `json:"groups"`
	UserAttributes  map[string]json.RawMessage `json:"userAttributes"`
}

// AIClaims are the claims of an AI credential, which names the session it was issued
// for (sid).
type AIClaims struct {
	Registered

	SessionID    string `json:"sid"`
	AccountID    int64  `json:"acc"`
	DeploymentID int64  `json:"dep"`
	Branch       string `json:"br"`
	Tenant       string `json:"ten"`
}

// The jwt.Claims methods, over the plain fields.

// GetExpirationTime returns exp.
func (c Registered) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt, nil }

// GetIssuedAt returns iat.
func (c Registered) GetIssuedAt() (*jwt.NumericDate, error) { return c.IssuedAt, nil }

// GetNotBefore returns nil: the tokens have no nbf.
func (c Registered) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }

// GetIssuer returns iss.
func (c Registered) GetIssuer() (string, error) { return c.Issuer, nil }

// GetSubject returns sub.
func (c Registered) GetSubject() (string, error) { return c.Subject, nil }

// GetAudience returns aud.
func (c Registered) GetAudience() (jwt.ClaimStrings, error) { return jwt.ClaimStrings{c.Audience}, nil }
