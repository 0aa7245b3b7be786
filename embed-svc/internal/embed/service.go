// Package embed mints, exchanges and revokes embed sessions and manages the group and
// user-attribute catalogs they resolve against. The Service interface is the domain;
// endpoints and the HTTP transport adapt it, stores implement its ports.
package embed

import (
	"context"
	"encoding/json"
	"time"

	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Service is the embed domain.
type Service interface {
	GenerateSession(ctx context.Context, p *identity.Principal, req GenerateSessionRequest) (string, error)
	// DryRunSession validates and resolves a generate-session request like the mint and
	// returns what the session would carry, writing nothing.
	DryRunSession(ctx context.Context, p *identity.Principal, req GenerateSessionRequest) (DryRun, error)
	// ListSessions and RevokeSessions are the operator's session control (admins, as
	// the spec's revoke): the account's sessions by public id, and revocation in bulk.
	ListSessions(ctx context.Context, p *identity.Principal, q SessionQuery) (httpx.Page[SessionView], error)
	// ListTenantUsers, GetTenantUser and DeleteTenantUser manage an embed tenant's
	// external users (an admin's account API key, as the tenant catalogs).
	ListTenantUsers(ctx context.Context, p *identity.Principal, tenant string, q UserQuery) (httpx.Page[UserSummary], error)
	GetTenantUser(ctx context.Context, p *identity.Principal, tenant, externalID string) (UserView, error)
	DeleteTenantUser(ctx context.Context, p *identity.Principal, tenant, externalID string) (DeletedUser, error)
	RevokeSessions(ctx context.Context, p *identity.Principal, req RevokeSessionsRequest) (RevokedSessions, error)
	// ListGroupMembers, AddGroupMembers and RemoveGroupMember manage a group's members
	// outside a mint (scope AccountScope or a tenant's; an unscoped admin key).
	ListGroupMembers(ctx context.Context, p *identity.Principal, scope, groupID string, q UserQuery) (httpx.Page[UserSummary], error)
	AddGroupMembers(ctx context.Context, p *identity.Principal, scope, groupID string, in GroupMembersInput) (GroupMembersAdded, error)
	RemoveGroupMember(ctx context.Context, p *identity.Principal, scope, groupID, externalID string) error
	// ViewerGroups answers the viewer lookup (client.ViewerSubject): the names of an
	// external user's current groups in the account's catalog and in tenant's.
	ViewerGroups(ctx context.Context, accountID int64, tenant, externalID string) (ViewerGroups, error)
	ExchangeSession(ctx context.Context, sessionID string) (SessionToken, error)
	RevokeSession(ctx context.Context, p *identity.Principal, sessionID string) error
	SessionInfo(ctx context.Context, p *identity.Principal) (SessionInfo, error)
	AICredentials(ctx context.Context, p *identity.Principal) (AICredentials, error)
	DataToken(ctx context.Context, p *identity.Principal, deploymentID int64) (DataToken, error)
	JWKS(ctx context.Context) (JWKSet, error)
	ListDefinitions(ctx context.Context, p *identity.Principal, q ListQuery) (httpx.Page[Definition], error)
	CreateDefinition(ctx context.Context, p *identity.Principal, kind string, in DefinitionInput) (Definition, error)
	DeleteDefinition(ctx context.Context, p *identity.Principal, scope, kind, id string) error
	// GetAccountSettings and PutAccountSettings read and replace the account-wide layer
	// of the embed settings (admins of the account).
	GetAccountSettings(ctx context.Context, p *identity.Principal) (AccountSettingsView, error)
	PutAccountSettings(ctx context.Context, p *identity.Principal, in AccountSettings) (AccountSettingsView, error)
}

// Lifetimes fixed by the spec.
const (
	SessionIDTTL     = 5 * time.Minute
	TokenLifetime    = 24 * time.Hour
	TokenRefresh     = 23 * time.Hour
	DataTokenTTL     = time.Hour
	AICredentialTTL  = 15 * time.Minute
	TokenAudience    = token.Audience
	DataAPIAudience  = token.DataAPIAudience
	AIAudience       = token.AIAudience
	DefaultUserLimit = 10000
)

// Definition kinds.
const (
	KindGroup     = "group"
	KindAttribute = "attribute"
)

// AccountScope is the scope of the account-wide (tenant-wide) catalog; embed-tenant
// scopes are named by the tenant, which can never be "_" (tenant names start with a letter).
const AccountScope = "_"

// Attribute types.
const (
	TypeString      = "string"
	TypeNumber      = "number"
	TypeStringArray = "string_array"
	TypeNumberArray = "number_array"
)

// GenerateSessionRequest is the body of POST /api/v1/embed/generate-session. Pointer
// and raw fields keep "omitted" apart from "empty", which several rules depend on.
type GenerateSessionRequest struct {
	DeploymentID             *int64            `json:"deploymentId"`
	ExternalID               *string           `json:"externalId"`
	InternalID               *string           `json:"internalId"`
	Email                    *string           `json:"email"`
	UserProfile              *UserProfile      `json:"userProfile"`
	EmbedTenantName          *string           `json:"embedTenantName"`
	CreatorMode              *bool             `json:"creatorMode"`
	UserAttributes           []AttributeValue  `json:"userAttributes"`
	Groups                   []string          `json:"groups"`
	UserAttributeDefinitions []DefinitionInput `json:"userAttributeDefinitions"`
	GroupDefinitions         []DefinitionInput `json:"groupDefinitions"`
	SecurityContext          json.RawMessage   `json:"securityContext"`
	Settings                 *SessionSettings  `json:"settings"`
	BranchName               *string           `json:"branchName"`
	// Resources, when sent, narrows the session to these dashboards among those its
	// grants let it open (never widens); nil: no narrowing.
	Resources *SessionResources `json:"resources"`
	// DryRun: validate and resolve only (DryRunSession); nothing is written.
	DryRun bool `json:"dryRun"`
}

// SessionResources is generate-session's resources: {"dashboards": [publicId, ...]}, at
// most token.MaxResourceDashboards, each a dashboard public id, none twice; empty opens
// nothing.
type SessionResources struct {
	Dashboards []string `json:"dashboards"`
}

// DryRun is the answer of a generate-session dry run.
type DryRun struct {
	DryRun    bool            `json:"dryRun"`
	Effective DryRunEffective `json:"effective"`
}

// DryRunEffective is what the session would carry.
type DryRunEffective struct {
	User               SessionUser        `json:"user"`
	UserCreated        bool               `json:"userCreated"`
	AccountID          int64              `json:"accountId"`
	DeploymentID       int64              `json:"deploymentId"`
	BranchName         string             `json:"branchName"`
	Production         bool               `json:"production"`
	EmbedTenant        string             `json:"embedTenantName"`
	CreatorMode        bool               `json:"creatorMode"`
	Groups             []string           `json:"groups"`
	UserAttributes     []AttributeValue   `json:"userAttributes"`
	SecurityContext    json.RawMessage    `json:"securityContext"`
	Settings           ResolvedSettings   `json:"settings"`
	ExpiresAt          httpx.Time         `json:"expiresAt"`
	DefinitionsCreated []DryRunDefinition `json:"definitionsCreated"`
	// Resources are the request's, as sent (absent: no narrowing).
	Resources *SessionResources `json:"resources,omitempty"`
	// GroupMemberships are the memberships grants would match: the user's current ones
	// once the mint's groups are applied, in the account's catalog and the tenant's.
	GroupMemberships DryRunMemberships `json:"groupMemberships"`
	// Dashboards are the dashboards the session would open and through which grant (at
	// most client.MaxReachDashboards; DashboardsTruncated when there are more).
	Dashboards          []ReachDashboard `json:"dashboards"`
	DashboardsTruncated bool             `json:"dashboardsTruncated"`
}

// DryRunMemberships are group names by catalog.
type DryRunMemberships struct {
	Account []string `json:"account"`
	Tenant  []string `json:"tenant"`
}

// DryRunDefinition names a definition the mint would create.
type DryRunDefinition struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// UserProfile is stored on the external user.
type UserProfile struct {
	DisplayName *string `json:"displayName"`
	Picture     *string `json:"picture"`
}

// AttributeValue is one row-level-security value; Value null clears it.
type AttributeValue struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// DefinitionInput is a group or attribute definition sent by a client.
type DefinitionInput struct {
	Name         string  `json:"name"`
	Type         string  `json:"type,omitempty"`
	DisplayName  *string `json:"displayName,omitempty"`
	DefaultValue *string `json:"defaultValue,omitempty"`
	Description  *string `json:"description,omitempty"`
}

// SessionSettings are the per-session overrides; nil means inherit.
type SessionSettings struct {
	AllowAI                     *bool   `json:"allowAi,omitempty"`
	ShowDashboardChat           *bool   `json:"showDashboardChat,omitempty"`
	ShowWorkbookChat            *bool   `json:"showWorkbookChat,omitempty"`
	ShowAIWidgets               *bool   `json:"showAiWidgets,omitempty"`
	AllowChatWorkspaceAuthoring *bool   `json:"allowChatWorkspaceAuthoring,omitempty"`
	ShowWorkbookShare           *bool   `json:"showWorkbookShare,omitempty"`
	ShowDashboardSettings       *bool   `json:"showDashboardSettings,omitempty"`
	ShowMemberNames             *bool   `json:"showMemberNames,omitempty"`
	ShowGroupByCube             *bool   `json:"showGroupByCube,omitempty"`
	Locale                      *string `json:"locale,omitempty"`
	Timezone                    *string `json:"timezone,omitempty"`
}

// AccountSettings are the account-wide embed settings: the layer under the session's
// overrides for the AI keys (except allowChatWorkspaceAuthoring), locale and timezone.
type AccountSettings struct {
	AllowAI           *bool   `json:"allowAi,omitempty" bson:"allowAi,omitempty"`
	ShowDashboardChat *bool   `json:"showDashboardChat,omitempty" bson:"showDashboardChat,omitempty"`
	ShowWorkbookChat  *bool   `json:"showWorkbookChat,omitempty" bson:"showWorkbookChat,omitempty"`
	ShowAIWidgets     *bool   `json:"showAiWidgets,omitempty" bson:"showAiWidgets,omitempty"`
	Locale            *string `json:"locale,omitempty" bson:"locale,omitempty"`
	Timezone          *string `json:"timezone,omitempty" bson:"timezone,omitempty"`
}

// AccountSettingsView is the account-wide layer as the API shows it: every key present,
// null where the account sets nothing (the built-in default applies).
type AccountSettingsView struct {
	AllowAI           *bool   `json:"allowAi"`
	ShowDashboardChat *bool   `json:"showDashboardChat"`
	ShowWorkbookChat  *bool   `json:"showWorkbookChat"`
	ShowAIWidgets     *bool   `json:"showAiWidgets"`
	Locale            *string `json:"locale"`
	Timezone          *string `json:"timezone"`
}

// ResolvedSettings are the settings in effect after layering; the booleans are signed
// into the token.
type ResolvedSettings struct {
	AllowAI                     bool    `json:"allowAi"`
	ShowDashboardChat           bool    `json:"showDashboardChat"`
	ShowWorkbookChat            bool    `json:"showWorkbookChat"`
	ShowAIWidgets               bool    `json:"showAiWidgets"`
	AllowChatWorkspaceAuthoring bool    `json:"allowChatWorkspaceAuthoring"`
	ShowWorkbookShare           bool    `json:"showWorkbookShare"`
	ShowDashboardSettings       bool    `json:"showDashboardSettings"`
	ShowMemberNames             bool    `json:"showMemberNames"`
	ShowGroupByCube             bool    `json:"showGroupByCube"`
	Locale                      *string `json:"locale"`
	Timezone                    *string `json:"timezone"`
}

// SessionUser is who a session acts as.
type SessionUser struct {
	Kind        string  `json:"kind"` // "external" or "internal"
	ID          int64   `json:"id"`
	ExternalID  *string `json:"externalId"`
	Username    *string `json:"username"`
	Email       *string `json:"email"`
	DisplayName *string `json:"displayName"`
	Picture     *string `json:"picture"`
	Role        string  `json:"-"`
}

// Session is what a session id stands for: resolved once at generation and kept, in
// Redis, for the exchange and then for the token's lifetime. It holds only what the
// exchange, the tokens and the checks of every embed request need, each field bounded
// (MaxSessionBytes): the user's memberships and values are read from the user when a
// token or the session's description needs them, and the securityContext and the
// profile from the session's record (MongoDB), so no client input of unbounded total
// size reaches Redis.
type Session struct {
	SID          string           `json:"sid"`
	RecordID     string           `json:"rid,omitempty"` // the public id of its record (the session list's id)
	AccountID    int64            `json:"acc"`
	DeploymentID int64            `json:"dep"`
	Branch       string           `json:"br"`
	Production   bool             `json:"prod"`
	Tenant       string           `json:"ten"`
	CreatorMode  bool             `json:"cm"`
	User         SessionUser      `json:"user"` // without its profile (in the record)
	Role         string           `json:"role,omitempty"`
	Settings     ResolvedSettings `json:"set"`
	// SecurityContext is read from sessions stored before the record kept it; new
	// sessions leave it empty.
	SecurityContext json.RawMessage `json:"sc,omitempty"`
	GeneratedAt     time.Time       `json:"gen"`
	// Resources narrows the session (signed into its token); nil: no narrowing.
	Resources *SessionResources `json:"res,omitempty"`
}

// scope is the catalog the session resolves memberships and values in: its tenant's in
// creator mode, else the account-wide one.
func (s Session) scope() string {
	if s.CreatorMode {
		return s.Tenant
	}
	return AccountScope
}

// Subject is the token's sub: the external id, or the internal user's username.
func (s Session) Subject() string {
	if s.User.ExternalID != nil {
		return *s.User.ExternalID
	}
	if s.User.Username != nil {
		return *s.User.Username
	}
	return ""
}

// SessionToken is the answer of an exchange.
type SessionToken struct {
	Token     string     `json:"token"`
	ExpiresAt httpx.Time `json:"expiresAt"`
	RefreshAt httpx.Time `json:"refreshAt"`
}

// SessionInfo is GET /api/v1/embed/session.
type SessionInfo struct {
	SessionID      string           `json:"sessionId"`
	User           SessionUser      `json:"user"`
	AccountID      int64            `json:"accountId"`
	DeploymentID   int64            `json:"deploymentId"`
	BranchName     string           `json:"branchName"`
	Production     bool             `json:"production"`
	EmbedTenant    string           `json:"embedTenantName"`
	CreatorMode    bool             `json:"creatorMode"`
	Groups         []string         `json:"groups"`
	UserAttributes []AttributeValue `json:"userAttributes"`
	// SecurityContext is the session's securityContext, as the data-API token carries it.
	SecurityContext json.RawMessage  `json:"securityContext"`
	Settings        ResolvedSettings `json:"settings"`
	// Resources are the session's narrowing, as minted (absent: none).
	Resources *SessionResources `json:"resources,omitempty"`
	IssuedAt  httpx.Time        `json:"issuedAt"`
	ExpiresAt httpx.Time        `json:"expiresAt"`
}

// AICredentials are short-lived credentials for the AI chat service.
type AICredentials struct {
	Token     string     `json:"token"`
	ExpiresAt httpx.Time `json:"expiresAt"`
}

// DataToken is a data-API token for the embed's deployment.
type DataToken struct {
	Token     string     `json:"token"`
	TokenID   string     `json:"tokenId"`
	ExpiresAt httpx.Time `json:"expiresAt"`
}

// JWK is one public key of the JWK Set.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// JWKSet is the published key set.
type JWKSet struct {
	Keys []JWK `json:"keys"`
}

// Definition is a stored group or attribute definition.
type Definition struct {
	ID           string     `json:"id"`
	AccountID    int64      `json:"-"`
	Scope        string     `json:"-"`
	Kind         string     `json:"-"`
	Name         string     `json:"name"`
	Type         string     `json:"type,omitempty"`
	DisplayName  *string    `json:"displayName"`
	DefaultValue *string    `json:"defaultValue"`
	Description  *string    `json:"description"`
	CreatedAt    httpx.Time `json:"createdAt"`
	UpdatedAt    httpx.Time `json:"updatedAt"`
}

// ListQuery selects one page of a catalog.
type ListQuery struct {
	Scope string // AccountScope or a tenant name
	Kind  string
	First int
	After string // opaque cursor, "" for the first page
}
