package embed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// ExchangeSession consumes a session id and signs its embed token.
func (s *service) ExchangeSession(ctx context.Context, sessionID string) (_ SessionToken, err error) {
	ev := exchangeEvent(ctx)
	audited := true
	defer func() {
		if audited {
			s.record(ctx, &ev, err, http.StatusOK)
		}
	}()
	if strings.TrimSpace(sessionID) == "" {
		return SessionToken{}, errs.Invalidf("sessionId is required")
	}
	sess, err := s.d.Sessions.ExchangeSession(ctx, sessionID, TokenLifetime)
	if errors.Is(err, ErrSessionUnusable) {
		audited = s.attributeUnusable(ctx, &ev, sessionID)
		return SessionToken{}, ErrSessionID
	}
	if err != nil {
		return SessionToken{}, storeErr(err)
	}
	target := sessionTarget(sess)
	forSession(&ev, sess.AccountID, sess.DeploymentID, target.ID, sess.Tenant,
		SessionRecordUser{Kind: sess.User.Kind, ID: sess.User.ID, ExternalID: sess.User.ExternalID})
	now := s.now().UTC().Truncate(time.Second)
	exp := s.sessionExpiry(sess)
	tok, err := s.d.Signer.Sign(ctx, s.claims(sess, now, exp))
	if err != nil {
		return SessionToken{}, storeErr(err)
	}
	return SessionToken{Token: tok, ExpiresAt: httpx.At(exp), RefreshAt: httpx.At(exp.Add(TokenRefresh - TokenLifetime))}, nil
}

// sessionExpiry is when a session's token expires: TokenLifetime after generate-session
// (the spec: "24 hours after minting"), whenever the id is exchanged. A session stored
// without its mint time (none since the field exists) counts from now.
func (s *service) sessionExpiry(sess Session) time.Time {
	gen := sess.GeneratedAt
	if gen.IsZero() {
		gen = s.now()
	}
	return gen.UTC().Truncate(time.Second).Add(TokenLifetime)
}

// RevokeSession ends a session of the caller's account; the answer never says whether
// there was one.
func (s *service) RevokeSession(ctx context.Context, p *identity.Principal, sessionID string) (err error) {
	ev := audit.New(p, ActionSessionRevoke, audit.Target{Type: TargetSession})
	defer func() { s.record(ctx, &ev, err, http.StatusNoContent) }()
	if err := requireRevoker(p); err != nil {
		return err
	}
	if strings.TrimSpace(sessionID) == "" {
		return errs.Invalidf("sessionId is required")
	}
	sess, revoked, err := s.d.Sessions.RevokeSession(ctx, p.Account.ID, sessionID, PublicSessionHandle(sessionID))
	if err != nil {
		return storeErr(err)
	}
	// The trail names the session by its public id when one of the account's was revoked
	// (the answer is the same 204 either way).
	ev.Details = map[string]any{"revoked": revoked}
	if revoked && sess.RecordID != "" {
		ev.Target.ID, ev.DeploymentID = sess.RecordID, sess.DeploymentID
	}
	return nil
}

func requireEmbed(p *identity.Principal) error {
	if p == nil || p.Credential != identity.CredentialEmbed || p.Embed == nil || p.Embed.SessionID == "" {
		return errs.Unauthorizedf("this endpoint requires an embed session token")
	}
	return nil
}

func (s *service) liveSession(ctx context.Context, p *identity.Principal) (Session, error) {
	sess, err := s.d.Sessions.LiveSession(ctx, p.Embed.SessionID)
	if errors.Is(err, ErrNotFound) || (err == nil && sess.AccountID != p.Account.ID) {
		return Session{}, errs.Unauthorizedf("the embed session has ended")
	}
	if err != nil {
		return Session{}, storeErr(err)
	}
	return sess, nil
}

// SessionInfo describes the session behind the caller's embed token.
func (s *service) SessionInfo(ctx context.Context, p *identity.Principal) (SessionInfo, error) {
	if err := requireEmbed(p); err != nil {
		return SessionInfo{}, err
	}
	sess, err := s.liveSession(ctx, p)
	if err != nil {
		return SessionInfo{}, err
	}
	c, err := s.content(ctx, sess)
	if err != nil {
		return SessionInfo{}, err
	}
	info := SessionInfo{
		SessionID: sess.SID, User: c.user, AccountID: sess.AccountID, DeploymentID: sess.DeploymentID,
		BranchName: sess.Branch, Production: sess.Production, EmbedTenant: sess.Tenant, CreatorMode: sess.CreatorMode,
		Groups: c.groups, UserAttributes: c.attrs, SecurityContext: securityContextOf(c.securityContext), Settings: sess.Settings,
		Resources: sess.Resources, IssuedAt: httpx.At(sess.GeneratedAt), ExpiresAt: httpx.At(s.sessionExpiry(sess)),
	}
	// The token's own times, as the gateway forwarded its claims.
	var tc token.Claims
	if json.Unmarshal(p.Embed.Claims, &tc) == nil && tc.IssuedAt != nil && tc.ExpiresAt != nil {
		info.IssuedAt, info.ExpiresAt = httpx.At(tc.IssuedAt.UTC()), httpx.At(tc.ExpiresAt.UTC())
	}
	return info, nil
}

// sessionContent is what a session shows and signs into its data tokens besides its
// identity: the profile and the securityContext as minted (its record), the memberships
// and values as its user has them now.
type sessionContent struct {
	user            SessionUser
	groups          []string
	attrs           []AttributeValue
	securityContext json.RawMessage
}

// content reads sess's content: its record, and its external user with the values of
// the session's scope. A user being deleted, deleted, or deleted and made again since
// the mint ends the session.
func (s *service) content(ctx context.Context, sess Session) (sessionContent, error) {
	c := sessionContent{user: sess.User, groups: []string{}, attrs: []AttributeValue{}, securityContext: sess.SecurityContext}
	rec, err := s.d.Records.SessionRecordBySID(ctx, sess.SID)
	switch {
	case err == nil:
		if rec.Profile != nil {
			c.user.Email, c.user.DisplayName, c.user.Picture = rec.Profile.Email, rec.Profile.DisplayName, rec.Profile.Picture
		}
		if rec.SecurityContext != nil {
			c.securityContext = rec.SecurityContext
		}
	case !errors.Is(err, ErrNotFound):
		return sessionContent{}, storeErr(err)
	}
	if sess.User.Kind != "external" || sess.User.ExternalID == nil {
		return c, nil
	}
	u, err := s.d.Users.ExternalUser(ctx, sess.AccountID, *sess.User.ExternalID, sess.scope())
	if errors.Is(err, ErrNotFound) || (err == nil && (u.ID != sess.User.ID || u.Deleting)) {
		return sessionContent{}, errs.Unauthorizedf("the embed session has ended")
	}
	if err != nil {
		return sessionContent{}, storeErr(err)
	}
	c.groups, c.attrs = userScopeView(u, sess.scope())
	return c, nil
}

// AICredentials enforces allowAi server-side from the signed switches.
func (s *service) AICredentials(ctx context.Context, p *identity.Principal) (_ AICredentials, err error) {
	ev := audit.New(p, ActionAICredentialsIssue, embedTarget(p))
	defer func() { s.record(ctx, &ev, err, http.StatusOK) }()
	if err := requireEmbed(p); err != nil {
		return AICredentials{}, err
	}
	// The switches signed into the token decide; a token without them is looked up.
	var c token.Claims
	var set ResolvedSettings
	if json.Unmarshal(p.Embed.Claims, &c) != nil || len(c.Settings) == 0 || json.Unmarshal(c.Settings, &set) != nil {
		sess, err := s.liveSession(ctx, p)
		if err != nil {
			return AICredentials{}, err
		}
		set = sess.Settings
	}
	if !set.AllowAI {
		return AICredentials{}, errs.Forbiddenf("AI is disabled for this embed session (allowAi: false)")
	}
	now := s.now().UTC().Truncate(time.Second)
	exp := now.Add(AICredentialTTL)
	tok, err := s.d.Signer.Sign(ctx, token.AIClaims{
		Registered: s.registered(AIAudience, p.Embed.Subject, now, exp, randomID()),
		SessionID:  p.Embed.SessionID, AccountID: p.Account.ID, DeploymentID: p.Embed.DeploymentID,
		Branch: p.Embed.Branch, Tenant: p.Embed.Tenant,
	})
	if err != nil {
		return AICredentials{}, storeErr(err)
	}
	return AICredentials{Token: tok, ExpiresAt: httpx.At(exp)}, nil
}

// DataToken issues a data-API token with its own id: the credential a data API trusts,
// as Cube's own data API trusts its JWT. Its claims carry everything needed to filter
// rows: the session's securityContext, the user's groups and typed user attributes as
// stored when the token is issued (content), tenant,
// user (external id, or internal user id), deployment, branch and creator mode. It
// carries no sid, so revoking the session leaves it valid until its own expiry, at most
// DataTokenTTL and never past the session's.
func (s *service) DataToken(ctx context.Context, p *identity.Principal, deploymentID int64) (_ DataToken, err error) {
	ev := audit.New(p, ActionDataTokenIssue, embedTarget(p))
	defer func() { s.record(ctx, &ev, err, http.StatusOK) }()
	if err := requireEmbed(p); err != nil {
		return DataToken{}, err
	}
	if p.Embed.DeploymentID != deploymentID {
		return DataToken{}, errs.NotFoundf("deployment %d not found", deploymentID)
	}
	sess, err := s.liveSession(ctx, p)
	if err != nil {
		return DataToken{}, err
	}
	c, err := s.content(ctx, sess)
	if err != nil {
		return DataToken{}, err
	}
	now := s.now().UTC().Truncate(time.Second)
	exp := now.Add(DataTokenTTL)
	if se := s.sessionExpiry(sess); se.Before(exp) {
		exp = se
	}
	id := randomID()
	claims := token.DataClaims{
		Registered: s.registered(DataAPIAudience, sess.Subject(), now, exp, id),
		AccountID:  sess.AccountID, DeploymentID: sess.DeploymentID, Branch: sess.Branch, Tenant: sess.Tenant,
		Internal: sess.User.Kind == "internal", CreatorMode: sess.CreatorMode,
		SecurityContext: securityContextOf(c.securityContext), Groups: c.groups, UserAttributes: attributeMap(c.attrs),
	}
	if claims.Internal {
		claims.UserID = sess.User.ID
	}
	tok, err := s.d.Signer.Sign(ctx, claims)
	if err != nil {
		return DataToken{}, storeErr(err)
	}
	ev.Details = map[string]any{"tokenId": id, "expiresAt": exp.UTC().Format(httpx.TimeLayout)}
	return DataToken{Token: tok, TokenID: id, ExpiresAt: httpx.At(exp)}, nil
}

// JWKS publishes every key that may have signed a live token.
func (s *service) JWKS(ctx context.Context) (JWKSet, error) {
	set, err := s.d.Signer.JWKS(ctx)
	if err != nil {
		return JWKSet{}, storeErr(err)
	}
	return set, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// securityContextOf is a session's securityContext as a JSON object ({} when none).
func securityContextOf(sc json.RawMessage) json.RawMessage {
	if len(sc) == 0 || string(sc) == "null" {
		return json.RawMessage(`{}`)
	}
	return sc
}

// attributeMap is the effective user attributes by name, with their typed values.
func attributeMap(attrs []AttributeValue) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(attrs))
	for _, a := range attrs {
		out[a.Name] = a.Value
	}
	return out
}

// claims builds the embed token's claims (the contract with the gateway's verifier) for
// a session exchanged at now.
func (s *service) claims(sess Session, now, exp time.Time) token.Claims {
	set, _ := json.Marshal(sess.Settings)
	c := token.Claims{
		Registered: s.registered(token.Audience, sess.Subject(), now, exp, NewSessionID()),
		SessionID:  sess.SID, RecordID: sess.RecordID,
		AccountID: sess.AccountID, DeploymentID: sess.DeploymentID, Branch: sess.Branch, Tenant: sess.Tenant,
		CreatorMode: sess.CreatorMode, Internal: sess.User.Kind == "internal", Settings: set,
	}
	if sess.Resources != nil {
		c.Resources = &token.Resources{Dashboards: slices.Clone(sess.Resources.Dashboards)}
	}
	if c.Internal {
		c.UserID = sess.User.ID
	}
	return c
}

// registered are the registered claims of a token for aud, issued at now.
func (s *service) registered(aud, subject string, now, exp time.Time, id string) token.Registered {
	return token.Registered{Issuer: s.issuer, Audience: aud, Subject: subject,
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp), ID: id}
}
