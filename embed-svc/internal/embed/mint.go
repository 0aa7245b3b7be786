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
	"sort"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Deps are the ports the service is built on.
type Deps struct {
	Catalog   CatalogStore
	Users     UserStore
	Directory Directory // the identity store's deployments and internal users
	Sessions  SessionStore
	Records   SessionRecordStore
	Branches  BranchResolver
	Signer    TokenSigner
	Issuer    string           // iss of every token
	Now       func() time.Time // nil: time.Now
	Limits    Limits           // zero fields: DefaultLimits
	Audit     audit.Recorder   // nil: nothing is recorded
}

// Limits bound what one request or one account can make embed-svc store.
type Limits struct {
	SecurityContextBytes int // size of a session's securityContext JSON
	SecurityContextDepth int // nesting of objects and arrays in it (Redis's cjson stops at 1000)
	ArrayEntries         int // entries of groups, userAttributes and each definitions array
	DefinitionsPerScope  int // group and attribute definitions of one scope (account-wide or a tenant)
	TenantsPerAccount    int // embed tenants of one account
}

// DefaultLimits apply where Limits leaves a field zero.
var DefaultLimits = Limits{SecurityContextBytes: 16 << 10, SecurityContextDepth: 32, ArrayEntries: 1000, DefinitionsPerScope: 10_000, TenantsPerAccount: 10_000}

func (l Limits) withDefaults() Limits {
	if l.SecurityContextBytes <= 0 {
		l.SecurityContextBytes = DefaultLimits.SecurityContextBytes
	}
	if l.SecurityContextDepth <= 0 {
		l.SecurityContextDepth = DefaultLimits.SecurityContextDepth
	}
	if l.ArrayEntries <= 0 {
		l.ArrayEntries = DefaultLimits.ArrayEntries
	}
	if l.DefinitionsPerScope <= 0 {
		l.DefinitionsPerScope = DefaultLimits.DefinitionsPerScope
	}
	if l.TenantsPerAccount <= 0 {
		l.TenantsPerAccount = DefaultLimits.TenantsPerAccount
	}
	return l
}

type service struct {
	d       Deps
	now     func() time.Time
	limits  Limits
	tenants *knownTenants
}

// NewService builds the embed service.
func NewService(d Deps) Service {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return &service{d: d, now: now, limits: d.Limits.withDefaults(), tenants: &knownTenants{}}
}

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

// requireMinter is the rule of who may mint (the spec's Authentication 3): an admin's
// account API key (a personal key is 403), on an account with embedding on a premium or
// enterprise plan. The gateway only authenticates the key; this is the one place the rule
// is decided, so every refusal is answered, and audited, here.
func requireMinter(p *identity.Principal) error {
	if err := requireAdminAccountKey(p, "mint embed sessions"); err != nil {
		return err
	}
	if p.Account.Plan != "premium" && p.Account.Plan != "enterprise" {
		return forbidden("embed sessions need the premium or enterprise plan; this account is on %s", p.Account.Plan).WithCode(httpx.CodePlanNotEligible)
	}
	if !p.Account.EmbeddingEnabled {
		return forbidden("embedding is not enabled for this account")
	}
	return nil
}

// requireAdminAccountKey refuses anything but an admin's account API key: a personal key
// is refused by name (personal_key).
func requireAdminAccountKey(p *identity.Principal, what string) error {
	switch {
	case p == nil || p.Credential != identity.CredentialAPIKey:
		return forbidden("only an admin's account API key can %s", what)
	case p.KeyKind != identity.KeyAccount:
		return forbidden("a personal API key cannot %s; use an account API key", what).WithCode(httpx.CodePersonalKey)
	case !p.HasRole(identity.RoleAdmin):
		return forbidden("only an admin's account API key can %s", what)
	}
	return nil
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
		return nil, notFound("deployment %d not found", *req.DeploymentID)
	}
	if !p.InScope(dep.ID) {
		return nil, forbidden("this API key is scoped to other deployments than %d", dep.ID).WithCode(httpx.CodeKeyOutOfScope)
	}
	m := &mintPlan{deployment: *dep, externalID: externalID, creator: req.CreatorMode != nil && *req.CreatorMode}
	if m.creator && !p.Account.UseCreatorMode {
		return nil, forbidden("creatorMode requires the account's useCreatorMode flag").WithCode(httpx.CodeCreatorModeDisabled)
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
			return nil, notFound("internal user %q not found in this account", strings.TrimSpace(*req.InternalID))
		}
		if err != nil {
			return nil, storeErr(err)
		}
	}
	return m, nil
}

// newSession is the session a plan makes, without its user's memberships and values.
func (m *mintPlan) newSession(p *identity.Principal, req *GenerateSessionRequest, now time.Time) Session {
	sess := Session{
		AccountID: p.Account.ID, DeploymentID: m.deployment.ID, Branch: m.branch, Production: m.production,
		Tenant: m.tenant, CreatorMode: m.creator, Settings: ResolveSettings(req.Settings, m.acct),
		SecurityContext: req.SecurityContext, GeneratedAt: now, Groups: []string{}, Attributes: []AttributeValue{},
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
		return "", invalid("dryRun requests are answered by DryRunSession")
	}
	// Validation is over: from here on the request writes. The session id is claimed in
	// Redis first, so that a Redis outage fails the mint before MongoDB is touched.
	id := NewSessionID()
	if err := s.d.Sessions.ReserveSession(ctx, id); err != nil {
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
		if userCreated, err = s.provisionExternalUser(ctx, p, m, userUpdate(&req, m.scope, m.tenant, m.definitions, ids), now, &sess); err != nil {
			return "", err
		}
	}
	rec, err := s.storeSession(ctx, id, &sess, now)
	if err != nil {
		return "", err
	}
	minted(&ev, m, rec, userCreated)
	return id, nil
}

// provisionExternalUser writes a mint's changes onto its external user, creating the
// user within the account's limit, and puts the user with its memberships and values on
// sess. It reports whether it created the user.
func (s *service) provisionExternalUser(ctx context.Context, p *identity.Principal, m *mintPlan, upd UserUpdate, now time.Time, sess *Session) (bool, error) {
	created := false
	u, err := s.d.Users.UpdateExternalUser(ctx, p.Account.ID, m.externalID, upd, now)
	if errors.Is(err, ErrNotFound) {
		limit := externalUserLimit(p)
		u, err = s.d.Users.CreateExternalUser(ctx, p.Account.ID, m.externalID, limit, upd, now)
		created = err == nil
		if errors.Is(err, ErrLimitReached) {
			// A concurrent mint may have created this very user meanwhile.
			u, err = s.d.Users.UpdateExternalUser(ctx, p.Account.ID, m.externalID, upd, now)
		}
		if errors.Is(err, ErrNotFound) {
			return false, limitReached(limit)
		}
	}
	if err != nil {
		return false, storeErr(err)
	}
	sess.setExternalUser(u, m.scope)
	return created, nil
}

// setExternalUser makes u the session's user, with its memberships and values in scope.
func (sess *Session) setExternalUser(u ExternalUser, scope string) {
	ext := u.ExternalID
	sess.User = SessionUser{Kind: "external", ID: u.ID, ExternalID: &ext, Email: u.Email, DisplayName: u.DisplayName, Picture: u.Picture}
	sess.Groups, sess.Attributes = userScopeView(u, scope)
}

// storeSession writes the session's durable record, then makes its id exchangeable: a
// session never becomes exchangeable without a record, so it can always be listed and
// revoked in bulk.
func (s *service) storeSession(ctx context.Context, id string, sess *Session, now time.Time) (SessionRecord, error) {
	sess.SID = PublicSessionHandle(id)
	rec := SessionRecord{ID: NewPublicSessionID(), AccountID: sess.AccountID, SID: sess.SID, Tenant: sess.Tenant,
		User:         SessionRecordUser{Kind: sess.User.Kind, ID: sess.User.ID, ExternalID: sess.User.ExternalID, Username: sess.User.Username},
		DeploymentID: sess.DeploymentID, Branch: sess.Branch, CreatedAt: now, PendingUntil: now.Add(SessionIDTTL), ExpiresAt: s.sessionExpiry(*sess)}
	if err := s.d.Records.InsertSessionRecord(ctx, rec); err != nil {
		return SessionRecord{}, storeErr(err)
	}
	sess.RecordID = rec.ID
	if err := s.d.Sessions.SaveSession(ctx, id, *sess); err != nil {
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

func limitReached(limit int64) error {
	return forbidden("the account has reached its limit of %d external users; contact support to raise it", limit).WithCode(httpx.CodeExternalUserLimit)
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
		return "", false, notFound("branch %q is not a branch of deployment %d", *name, d.ID).WithCode(httpx.CodeBranchNotFound)
	case st.Production:
		return *name, true, nil
	case !st.Served:
		return "", false, invalid("branch %q is not served: open it, or enable its staging environment", *name).WithCode(httpx.CodeBranchNotServed)
	}
	return *name, false, nil
}

// definitionPlan is the outcome of validating a request against the stored catalog.
type definitionPlan struct {
	upserts []DefinitionUpsert
	byKey   map[string]*Definition // kind+"/"+name -> stored definition (existing ones)
	types   map[string]string      // attribute name -> type in effect after the upserts
}

func key(kind, name string) string { return kind + "/" + name }

func (s *service) planDefinitions(ctx context.Context, accountID int64, scope string, req *GenerateSessionRequest) (*definitionPlan, error) {
	plan := &definitionPlan{byKey: map[string]*Definition{}, types: map[string]string{}}
	names := map[string]bool{}
	for _, g := range req.Groups {
		names[g] = true
	}
	for _, a := range req.UserAttributes {
		names[a.Name] = true
	}
	for _, d := range req.GroupDefinitions {
		names[d.Name] = true
	}
	for _, d := range req.UserAttributeDefinitions {
		names[d.Name] = true
	}
	if len(names) == 0 {
		return plan, nil
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	defs, err := s.d.Catalog.FindDefinitions(ctx, accountID, scope, list)
	if err != nil {
		return nil, storeErr(err)
	}
	for i := range defs {
		plan.byKey[key(defs[i].Kind, defs[i].Name)] = &defs[i]
		if defs[i].Kind == KindAttribute {
			plan.types[defs[i].Name] = defs[i].Type
		}
	}
	for _, in := range req.UserAttributeDefinitions {
		ex := plan.byKey[key(KindAttribute, in.Name)]
		if ex != nil && ex.Type != in.Type {
			return nil, conflict("cannot change type").WithCode(httpx.CodeDefinitionType)
		}
		plan.types[in.Name] = in.Type
		if ex == nil || definitionChanged(ex, in) {
			plan.upserts = append(plan.upserts, DefinitionUpsert{Input: in, Kind: KindAttribute, Existing: ex})
		}
	}
	groupDefs := map[string]bool{}
	for _, in := range req.GroupDefinitions {
		groupDefs[in.Name] = true
		ex := plan.byKey[key(KindGroup, in.Name)]
		if ex == nil || definitionChanged(ex, in) {
			plan.upserts = append(plan.upserts, DefinitionUpsert{Input: in, Kind: KindGroup, Existing: ex})
		}
	}
	var missingAttrs bool
	for _, a := range req.UserAttributes {
		if _, ok := plan.types[a.Name]; !ok {
			missingAttrs = true
		}
	}
	if missingAttrs {
		return nil, invalid("User attributes not found")
	}
	var missing []string
	for _, g := range req.Groups {
		if plan.byKey[key(KindGroup, g)] == nil && !groupDefs[g] {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		return nil, invalid("Groups with names %s not found", strings.Join(missing, ", "))
	}
	for _, a := range req.UserAttributes {
		got, _ := valueType(a.Value)
		if got != "" && !valueFits(got, plan.types[a.Name]) {
			return nil, invalid("userAttributes %q: value does not match the attribute's type %s", a.Name, plan.types[a.Name])
		}
	}
	return plan, nil
}

// definitionChanged: optional fields are updated when supplied and different, never cleared.
func definitionChanged(ex *Definition, in DefinitionInput) bool {
	diff := func(supplied, stored *string) bool {
		return supplied != nil && (stored == nil || *stored != *supplied)
	}
	return diff(in.Description, ex.Description) || diff(in.DisplayName, ex.DisplayName) || diff(in.DefaultValue, ex.DefaultValue)
}

// applyDefinitions writes the planned upserts and returns the id of every definition
// the request names, by kind and name.
func (s *service) applyDefinitions(ctx context.Context, accountID int64, scope string, plan *definitionPlan, now time.Time) (map[string]string, error) {
	ids := make(map[string]string, len(plan.byKey)+len(plan.upserts))
	for k, d := range plan.byKey {
		ids[k] = d.ID
	}
	for _, u := range plan.upserts {
		d, err := s.d.Catalog.UpsertDefinition(ctx, accountID, scope, u, now)
		if errors.Is(err, ErrConflictType) {
			return nil, conflict("cannot change type").WithCode(httpx.CodeDefinitionType)
		}
		if err != nil {
			return nil, storeErr(err)
		}
		ids[key(d.Kind, d.Name)] = d.ID
	}
	return ids, nil
}

// ErrConflictType: a concurrent request created the attribute with another type.
var ErrConflictType = errors.New("attribute type differs")

func userUpdate(req *GenerateSessionRequest, scope, tenant string, plan *definitionPlan, ids map[string]string) UserUpdate {
	u := UserUpdate{Email: req.Email, Scope: scope, Tenant: tenant}
	if req.UserProfile != nil {
		u.DisplayName, u.Picture = req.UserProfile.DisplayName, req.UserProfile.Picture
	}
	if req.Groups != nil {
		u.Groups = make(map[string]string, len(req.Groups))
		for _, g := range req.Groups {
			u.Groups[ids[key(KindGroup, g)]] = g
		}
	}
	for _, a := range req.UserAttributes {
		id := ids[key(KindAttribute, a.Name)]
		if t, _ := valueType(a.Value); t == "" {
			u.ClearAttributes = append(u.ClearAttributes, id)
			continue
		}
		if u.SetAttributes == nil {
			u.SetAttributes = map[string]StoredValue{}
		}
		u.SetAttributes[id] = StoredValue{Name: a.Name, Value: a.Value}
	}
	return u
}

// userScopeView lists the user's memberships and values in scope, sorted by name.
func userScopeView(u ExternalUser, scope string) ([]string, []AttributeValue) {
	groups := []string{}
	for _, name := range u.Groups[scope] {
		groups = append(groups, name)
	}
	sort.Strings(groups)
	attrs := []AttributeValue{}
	for _, v := range u.Attributes[scope] {
		attrs = append(attrs, AttributeValue{Name: v.Name, Value: v.Value})
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].Name < attrs[j].Name })
	return groups, attrs
}

// claims builds the embed token's claims (the contract with the gateway's verifier) for
// a session exchanged at now.
func (s *service) claims(sess Session, now, exp time.Time) token.Claims {
	set, _ := json.Marshal(sess.Settings)
	c := token.Claims{
		Issuer: s.d.Issuer, Audience: token.Audience, Subject: sess.Subject(), SessionID: sess.SID, RecordID: sess.RecordID,
		AccountID: sess.AccountID, DeploymentID: sess.DeploymentID, Branch: sess.Branch, Tenant: sess.Tenant,
		CreatorMode: sess.CreatorMode, Internal: sess.User.Kind == "internal", Settings: set,
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp), ID: NewSessionID(),
	}
	if c.Internal {
		c.UserID = sess.User.ID
	}
	return c
}
