package embed

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// NewSessionID returns an opaque session id of 256 random bits.
func NewSessionID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// PublicSessionHandle is the sid of a session id: the SHA-256 of the secret id, so the
// token never carries the credential that was exchanged, yet revoke can find it.
func PublicSessionHandle(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return hex.EncodeToString(sum[:])
}

// mintPlan is a generate-session request validated and resolved against the stores,
// before anything is written.
type mintPlan struct {
	deployment  Deployment
	externalID  string
	creator     bool
	tenant      string
	scope       string
	branch      string
	production  bool
	acct        AccountSettings
	definitions *definitionPlan
	internal    InternalUser
	user        ExternalUser // the external user as read, with the scope's values
	userExists  bool
	reach       reach // the caller's: an external user outside it is not minted for
}

// prepare runs every validation and resolution of a mint and writes nothing: the real
// mint and the dry run share it, so a dry run answers every error the mint would.
// dep is the request's deployment when it is the caller's account's (ownDeployment).
func (s *service) prepare(ctx context.Context, p *identity.Principal, dep *Deployment, req *GenerateSessionRequest) (*mintPlan, error) {
	if err := requireMinter(p); err != nil {
		return nil, err
	}
	if err := s.limits.check(req); err != nil {
		return nil, err
	}
	externalID, err := validateStatic(req)
	if err != nil {
		return nil, err
	}
	// Another account's deployment is answered as one that does not exist.
	if dep == nil {
		return nil, errs.NotFoundf("deployment %d not found", *req.DeploymentID)
	}
	if err := keyReach(p).deployment(dep.ID); err != nil {
		return nil, err
	}
	m := &mintPlan{deployment: *dep, externalID: externalID, creator: req.CreatorMode != nil && *req.CreatorMode, reach: keyReach(p)}
	if m.creator && !p.Account.UseCreatorMode {
		return nil, errs.Forbiddenf("creatorMode requires the account's useCreatorMode flag").WithCode(errs.CodeCreatorModeDisabled)
	}
	m.tenant = p.Account.DefaultEmbedTenant
	if req.EmbedTenantName != nil {
		m.tenant = *req.EmbedTenantName
	}
	if m.tenant == "" {
		m.tenant = "default"
	}
	m.scope = AccountScope
	if m.creator {
		m.scope = m.tenant
	}
	if m.branch, m.production, err = s.resolveBranch(ctx, m.deployment, req.BranchName); err != nil {
		return nil, err
	}
	if m.acct, err = s.d.Catalog.AccountSettings(ctx, p.Account.ID); err != nil {
		return nil, storeErr(err)
	}
	if m.definitions, err = s.planDefinitions(ctx, p.Account.ID, m.scope, req); err != nil {
		return nil, err
	}
	if err := s.checkRoom(ctx, p.Account.ID, m.scope, m.definitions); err != nil {
		return nil, err
	}
	if req.InternalID != nil {
		m.internal, err = s.d.Directory.InternalUser(ctx, p.Account.ID, strings.TrimSpace(*req.InternalID))
		if errors.Is(err, ErrNotFound) {
			return nil, errs.NotFoundf("internal user %q not found in this account", strings.TrimSpace(*req.InternalID))
		}
		if err != nil {
			return nil, storeErr(err)
		}
		return m, nil
	}
	// A user with a session outside the caller's reach is refused here (readUser), before
	// anything is written. The user's stored values are bounded in total: a mint that
	// would pass the bound is refused here too.
	if err := s.readUser(ctx, p.Account.ID, m); err != nil {
		return nil, err
	}
	after := attributeBytesAfter(m.user, m.userUpdate(req, m.standInIDs()))
	if err := s.limits.checkUserAttributes(m.externalID, m.user.AttributeBytes, after); err != nil {
		return nil, err
	}
	return m, nil
}

// newSession is the session a plan makes, with an internal user; an external user is
// set once it is written (setExternalUser).
func (m *mintPlan) newSession(p *identity.Principal, req *GenerateSessionRequest, now time.Time) Session {
	sess := Session{
		AccountID: p.Account.ID, DeploymentID: m.deployment.ID, Branch: m.branch, Production: m.production,
		Tenant: m.tenant, CreatorMode: m.creator, Settings: ResolveSettings(req.Settings, m.acct), GeneratedAt: now,
		Resources: req.Resources,
	}
	if req.InternalID != nil {
		username := m.internal.Username
		sess.User = SessionUser{Kind: "internal", ID: m.internal.ID, Username: &username, Email: nonEmpty(m.internal.Email),
			DisplayName: nonEmpty(m.internal.FirstName), Picture: nonEmpty(m.internal.Picture)}
		sess.Role = m.internal.Role
	}
	return sess
}

// GenerateSession validates everything first, then writes definitions, then the user's
// profile, values and memberships, then stores the session id. A request that fails
// validation writes nothing.
func (s *service) GenerateSession(ctx context.Context, p *identity.Principal, req GenerateSessionRequest) (_ string, err error) {
	dep, err := s.ownDeployment(ctx, p, &req)
	ev := mintEvent(p, dep, &req)
	defer func() { s.record(ctx, &ev, err, http.StatusOK) }()
	if err != nil {
		return "", err
	}
	m, err := s.prepare(ctx, p, dep, &req)
	if err != nil {
		return "", err
	}
	if req.DryRun {
		return "", errs.Invalidf("dryRun requests are answered by DryRunSession")
	}
	// Validation is over: from here on the request writes. The session id is claimed in
	// Redis first, so that a Redis outage fails the mint before MongoDB is touched.
	id := NewSessionID()
	if err := s.d.Sessions.ReserveSession(ctx, p.Account.ID, id, s.limits.LiveSessionsPerAccount); err != nil {
		if errors.Is(err, ErrLiveSessionLimit) {
			return "", liveSessionLimit(s.limits.LiveSessionsPerAccount)
		}
		return "", storeErr(err)
	}
	now := s.now().UTC()
	if err := s.ensureTenant(ctx, p.Account.ID, m.tenant); err != nil {
		return "", err
	}
	ids, err := s.applyDefinitions(ctx, p.Account.ID, m.scope, m.definitions, now)
	if err != nil {
		return "", err
	}
	sess := m.newSession(p, &req, now)
	userCreated := false
	if req.InternalID == nil {
		u, created, err := s.provisionExternalUser(ctx, p, m, m.userUpdate(&req, ids), now)
		if err != nil {
			return "", err
		}
		sess.setExternalUser(u)
		userCreated = created
	}
	rec, err := s.storeSession(ctx, id, &sess, req.SecurityContext, now)
	if err != nil {
		return "", err
	}
	if req.InternalID == nil {
		if err := s.confirmUser(ctx, p.Account.ID, sess); err != nil {
			return "", err
		}
	}
	minted(&ev, m, rec, userCreated)
	return id, nil
}

// storeSession writes the session's durable record, then makes its id exchangeable: a
// session never becomes exchangeable without a record, so it can always be listed and
// revoked in bulk, and a revoke that reads the record before the id is saved stays
// (SessionStore.SaveSession). The record keeps what the session shows (the profile, the
// securityContext); Redis keeps the rest (Session).
func (s *service) storeSession(ctx context.Context, id string, sess *Session, securityContext json.RawMessage, now time.Time) (SessionRecord, error) {
	sess.SID = PublicSessionHandle(id)
	rec := SessionRecord{ID: NewPublicSessionID(), AccountID: sess.AccountID, SID: sess.SID, Tenant: sess.Tenant,
		User:         SessionRecordUser{Kind: sess.User.Kind, ID: sess.User.ID, ExternalID: sess.User.ExternalID, Username: sess.User.Username},
		DeploymentID: sess.DeploymentID, Branch: sess.Branch, CreatedAt: now, PendingUntil: now.Add(SessionIDTTL), ExpiresAt: s.sessionExpiry(*sess),
		Profile:         &SessionProfile{Email: sess.User.Email, DisplayName: sess.User.DisplayName, Picture: sess.User.Picture},
		SecurityContext: securityContext}
	if err := s.d.Records.InsertSessionRecord(ctx, rec); err != nil {
		return SessionRecord{}, storeErr(err)
	}
	sess.RecordID = rec.ID
	switch err := s.d.Sessions.SaveSession(ctx, id, sess.stored()); {
	case errors.Is(err, ErrSessionRevoked):
		// A revoke that read the record (in bulk, or a delete of the user) ended the
		// reserved id before it was saved: the session was minted, then revoked. The mint
		// answers its id, as for a revoke that came just after it; the revoke counted it,
		// the list shows it revoked, and its exchange is refused like any revoked id's.
	case errors.Is(err, ErrSessionUnusable):
		// The reservation is gone without a revocation (it expired, or Redis lost it): the
		// id was never exchangeable, and a new mint makes another.
		return SessionRecord{}, errors.Join(errs.Unavailablef("the session id's reservation was lost before the session was stored; retry the request"), err)
	case err != nil:
		return SessionRecord{}, storeErr(err)
	}
	return rec, nil
}

func externalUserLimit(p *identity.Principal) int64 {
	if p.Account.ExternalUserLimit > 0 {
		return p.Account.ExternalUserLimit
	}
	return DefaultUserLimit
}

// liveSessionLimit is the answer to a mint past the account's live sessions: each of
// them may hold a session or a revocation marker in Redis, which every tenant shares.
func liveSessionLimit(limit int) error {
	return errs.Forbiddenf("the account has %d live embed sessions (minted in the last 24 hours, revoked ones included), its limit; sessions leave the count when their tokens expire", limit).
		WithCode(errs.CodeLiveSessionLimit)
}

func limitReached(limit int64) error {
	return errs.Forbiddenf("the account has reached its limit of %d external users; contact support to raise it", limit).WithCode(errs.CodeExternalUserLimit)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ownDeployment is the request's deployment when the identity store says it is one of
// the caller's account's; nil when it is another's, none or not named at all (prepare
// then answers 404, after the rules the request breaks first). Only a failure to ask is
// an error.
func (s *service) ownDeployment(ctx context.Context, p *identity.Principal, req *GenerateSessionRequest) (*Deployment, error) {
	if p == nil || req.DeploymentID == nil || *req.DeploymentID <= 0 {
		return nil, nil
	}
	d, err := s.d.Directory.Deployment(ctx, *req.DeploymentID)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, storeErr(err)
	case d.AccountID != p.Account.ID:
		return nil, nil
	}
	return &d, nil
}

// resolveBranch is the branch a session of deployment d serves: production without
// asking when name is omitted, "production" or the production branch; otherwise what
// dbtsync-svc's resolver says of it.
func (s *service) resolveBranch(ctx context.Context, d Deployment, name *string) (string, bool, error) {
	prod := d.ProductionBranch
	if prod == "" {
		prod = "main"
	}
	if name == nil || *name == prod || *name == "production" {
		return prod, true, nil
	}
	st, err := s.d.Branches.ResolveBranch(ctx, d.ID, *name, prod)
	if err != nil {
		return "", false, err
	}
	switch {
	case !st.Exists:
		return "", false, errs.NotFoundf("branch %q is not a branch of deployment %d", *name, d.ID).WithCode(errs.CodeBranchNotFound)
	case st.Production:
		return *name, true, nil
	case !st.Served:
		return "", false, errs.Invalidf("branch %q is not served: open it, or enable its staging environment", *name).WithCode(errs.CodeBranchNotServed)
	}
	return *name, false, nil
}
