package serviceaccounts

// The client-credentials grant of RFC 6749 §4.4: a service account's secret buys a
// short-lived bearer token the gateway signs.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/gateway/internal/store"
)

// TokenRequest is a client-credentials token request (RFC 6749 §4.4.2).
type TokenRequest struct {
	GrantType    string
	ClientID     string
	ClientSecret string
	Scope        string
	Basic        bool // the client authenticated with HTTP Basic
}

// Token is the answer of a token request (RFC 6749 §5.1).
type Token struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope,omitempty"`
}

// OAuthError is a token request's failure (RFC 6749 §5.2).
type OAuthError struct {
	Status      int
	Code        string // invalid_request, invalid_client, unsupported_grant_type, invalid_scope
	Description string
	Basic       bool // the client used HTTP Basic: a 401 then challenges it
}

func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

func oauthError(status int, code, desc string) *OAuthError {
	return &OAuthError{Status: status, Code: code, Description: desc}
}

// IsClientFailure reports whether err is a failed client authentication (a 401), which
// counts against the client address's failure limit.
func IsClientFailure(err error) bool {
	var oe *OAuthError
	return errors.As(err, &oe) && oe.Status == 401
}

// TokenClaims are the claims of an access token the service issues.
type TokenClaims struct {
	jwt.RegisteredClaims
	Scope    string `json:"scope,omitempty"`
	ClientID string `json:"client_id"`
}

// IssueToken answers a client-credentials request. Nothing is written on a failure.
func (s *Service) IssueToken(ctx context.Context, req TokenRequest) (Token, error) {
	tok, err := s.issueToken(ctx, req)
	var oe *OAuthError
	if errors.As(err, &oe) {
		oe.Basic = req.Basic
	}
	return tok, err
}

func (s *Service) issueToken(ctx context.Context, req TokenRequest) (Token, error) {
	switch {
	case req.GrantType == "":
		return Token{}, oauthError(400, "invalid_request", "grant_type is required")
	case req.GrantType != "client_credentials":
		return Token{}, oauthError(400, "unsupported_grant_type", "grant_type must be client_credentials, not "+strconv.Quote(cut(req.GrantType)))
	case req.ClientID == "" || req.ClientSecret == "":
		return Token{}, oauthError(401, "invalid_client", "the client id and secret are required, in the body or by HTTP Basic")
	}
	invalid := oauthError(401, "invalid_client", "unknown client or wrong secret")
	if !ValidClientID(req.ClientID) {
		return Token{}, invalid
	}
	x, err := s.st.ClientSecret(ctx, req.ClientID)
	if errors.Is(err, store.ErrNotFound) {
		return Token{}, invalid
	}
	if err != nil {
		return Token{}, err
	}
	h := sha256.Sum256([]byte(req.ClientSecret))
	now := s.now()
	if !x.Authenticates(h[:], now) {
		return Token{}, invalid
	}
	u, err := s.st.User(ctx, x.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (!u.IsService() || u.DeletedAt != nil || u.AccountID != x.AccountID)) {
		return Token{}, invalid
	}
	if err != nil {
		return Token{}, err
	}
	scope, err := s.tokenScope(ctx, u.AccountID, req.Scope)
	if err != nil {
		return Token{}, err
	}
	if s.signing == nil {
		return Token{}, oauthError(400, "unsupported_grant_type", "this gateway issues no tokens: it has no token signing key")
	}
	ttl := s.limits.TokenTTL
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	claims := TokenClaims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer: s.signing.Issuer, Subject: strconv.FormatInt(u.ID, 10), Audience: jwt.ClaimStrings{s.signing.Audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		ID: hex.EncodeToString(jti[:]),
	}, Scope: scope, ClientID: x.ID}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"] = s.signing.KeyID()
	signed, err := t.SignedString(s.signing.Key)
	if err != nil {
		return Token{}, err
	}
	_ = s.st.MarkClientSecretUsed(ctx, x.ID, now) // lastUsedAt is informative: a failed write refuses nothing
	return Token{AccessToken: signed, TokenType: "Bearer", ExpiresIn: int64(ttl / time.Second), Scope: scope}, nil
}

// tokenScope checks a requested scope (deployment ids, space-separated) against the
// service account's account and returns it normalised: sorted, once each.
func (s *Service) tokenScope(ctx context.Context, accountID int64, raw string) (string, error) {
	fields := strings.Fields(raw)
	if len(fields) > s.limits.MaxScope {
		return "", oauthError(400, "invalid_scope", "scope names "+strconv.Itoa(len(fields))+" deployments, over the limit of "+strconv.Itoa(s.limits.MaxScope))
	}
	ids := make([]int64, 0, len(fields))
	for _, f := range fields {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil || id <= 0 {
			return "", oauthError(400, "invalid_scope", "scope: "+strconv.Quote(cut(f))+" is not a deployment id")
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		d, err := s.st.Deployment(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && d.AccountID != accountID) {
			return "", oauthError(400, "invalid_scope", "scope: deployment "+strconv.FormatInt(id, 10)+" is not a deployment this service account may reach")
		}
		if err != nil {
			return "", err
		}
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, " "), nil
}
