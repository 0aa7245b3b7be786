package embed

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/analyticsco/platform/embed-svc/client/contract"
)

// ExternalUser is a provisioned external user of an account, as a store read it: the
// memberships and values of the scopes the read asked for only.
type ExternalUser struct {
	ID          int64
	AccountID   int64
	ExternalID  string
	Email       *string
	DisplayName *string
	Picture     *string
	// Groups and Attributes by scope, then definition id.
	Groups     map[string]map[string]string
	Attributes map[string]map[string]StoredValue
	// Memberships are the user's memberships in every scope, whatever the read asked
	// for, each MembershipKey(scope, definition id), sorted: what lists a group's members.
	Memberships []string
	Tenants     []string // the embed tenants the user has had sessions in
	Deployments []int64  // the deployments the user has had sessions in
	// AttributeBytes is the size of all of the user's stored values, in every scope
	// (ValueBytes of each), which EMBED_MAX_USER_ATTRIBUTE_BYTES bounds.
	AttributeBytes int64
	// Rev counts the user's updates: an update names the revision it was computed from
	// and is refused (ErrStale) when another came first.
	Rev int64
	// Deleting: a delete of the user has begun (MarkExternalUserDeleting); no mint may
	// write it or start a session for it.
	Deleting  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// StoredValue is an attribute value kept on a user, with its definition's name.
type StoredValue struct {
	Name  string          `bson:"name"`
	Value json.RawMessage `bson:"-"`
}

// InternalUser is a user of the identity store, as the Directory answers it.
type InternalUser struct {
	ID        int64
	AccountID int64
	Username  string
	Email     string
	FirstName string
	Picture   string
	Role      string
}

// UserUpdate is what one mint writes onto an external user. Nil fields keep what is
// stored; Groups nil keeps memberships; SetAttributes/ClearAttributes touch only
// the supplied definitions.
type UserUpdate struct {
	Email           *string
	DisplayName     *string
	Picture         *string
	Scope           string
	Tenant          string            // the session's embed tenant, added to the user's tenants
	Deployment      int64             // the session's deployment, added to the user's deployments
	Groups          map[string]string // nil: keep; empty: clear the scope's memberships
	SetAttributes   map[string]StoredValue
	ClearAttributes []string
	// AttributeBytes is the user's ExternalUser.AttributeBytes once the update is applied
	// (attributeBytesAfter); the store keeps it with the values.
	AttributeBytes int64
	// Memberships, when Groups is not nil, are the user's ExternalUser.Memberships once
	// the update is applied (membershipsAfter); the store keeps them with the groups.
	Memberships []string
	// Within, when not nil, are the deployments of a scoped key's reach: the update is
	// made only on a user with at least one recorded deployment and none outside Within
	// (ErrOutOfReach otherwise), in the same conditional write as the revision's check.
	Within []int64
}

// DefinitionUpsert is one definition to create (Existing nil) or to update: the
// optional fields Input supplies that differ from Existing's are written, none cleared.
type DefinitionUpsert struct {
	Input    DefinitionInput
	Kind     string
	Existing *Definition // nil: create
}

// CatalogStore keeps definitions, tenants and account settings.
type CatalogStore interface {
	AccountSettings(ctx context.Context, accountID int64) (AccountSettings, error)
	// SetAccountSettings replaces the account-wide settings.
	SetAccountSettings(ctx context.Context, accountID int64, v AccountSettings) error
	// EnsureTenant records the tenant (idempotent) and reports whether this call created it.
	EnsureTenant(ctx context.Context, accountID int64, tenant string) (bool, error)
	// RemoveTenantRecord deletes the record of a tenant that has nothing else stored.
	RemoveTenantRecord(ctx context.Context, accountID int64, tenant string) error
	TenantExists(ctx context.Context, accountID int64, tenant string) (bool, error)
	// CountTenants counts the account's embed tenants, stopping at max.
	CountTenants(ctx context.Context, accountID int64, max int64) (int64, error)
	// CountDefinitions counts the definitions (both kinds) of scope, stopping at max.
	CountDefinitions(ctx context.Context, accountID int64, scope string, max int64) (int64, error)
	// FindDefinitions returns the definitions of scope whose names are in names (both kinds).
	FindDefinitions(ctx context.Context, accountID int64, scope string, names []string) ([]Definition, error)
	// UpsertDefinitions creates or updates the definitions in one batch and returns them as
	// stored, in order; ErrConflictType when a concurrent request created an attribute of
	// the name with another type.
	UpsertDefinitions(ctx context.Context, accountID int64, scope string, us []DefinitionUpsert, now time.Time) ([]Definition, error)
	CreateDefinition(ctx context.Context, d Definition) (Definition, error)
	ListDefinitions(ctx context.Context, accountID int64, q ListQuery) ([]Definition, bool, error)
	// DeleteDefinition removes a definition and every membership or value that uses it.
	DeleteDefinition(ctx context.Context, accountID int64, scope, kind, id string) error
	// Definition reads one definition of scope and kind by id (ErrNotFound when the
	// account has none: another scope's or kind's is none).
	Definition(ctx context.Context, accountID int64, scope, kind, id string) (Definition, error)
}

// UserStore keeps external users.
type UserStore interface {
	// UpdateExternalUser applies u to a known user at revision rev, moving it to the next
	// revision (the user is then what the caller read at rev with u applied:
	// applyUserUpdate); ErrUserDeleting when a delete of the user has begun, ErrOutOfReach
	// when u.Within is set and the user has a deployment outside it (or none), ErrStale
	// when the user is at another revision, ErrNotFound when the account has no user with
	// that external id.
	UpdateExternalUser(ctx context.Context, accountID int64, externalID string, u UserUpdate, rev int64, now time.Time) error
	// CreateExternalUser provisions the user within the account's limit (ErrLimitReached)
	// with u applied; ErrStale when the user exists (a concurrent mint created it: the
	// caller reads it and updates it).
	CreateExternalUser(ctx context.Context, accountID int64, externalID string, limit int64, u UserUpdate, now time.Time) (ExternalUser, error)
	// ExternalUser reads a user with the memberships and values of scopes only
	// (ErrNotFound when the account has none with that id).
	ExternalUser(ctx context.Context, accountID int64, externalID string, scopes ...string) (ExternalUser, error)
	// ExternalUserCount is the number of the account's external users, as the limit
	// counts them (the dry run's check of the limit).
	ExternalUserCount(ctx context.Context, accountID int64) (int64, error)
	// ListTenantUsers returns up to limit users with sessions in tenant, by id after
	// afterID: their profiles and deployments, without memberships or values (a read
	// of the index's order, whatever the listing then keeps).
	ListTenantUsers(ctx context.Context, accountID int64, tenant string, afterID int64, limit int) ([]ExternalUser, error)
	// MarkExternalUserDeleting records that a delete of the user has begun, at a new
	// revision: from then on UpdateExternalUser refuses it (ErrUserDeleting) and reads
	// show it Deleting. False when there is no such user.
	MarkExternalUserDeleting(ctx context.Context, accountID int64, externalID string) (bool, error)
	// DeleteExternalUser deletes the user and gives its place under the account's limit
	// back; false when there was no such user.
	DeleteExternalUser(ctx context.Context, accountID int64, externalID string) (bool, error)
	// FindExternalUsers reads the users with these external ids (at most a hundred), as
	// ListTenantUsers reads them (profiles, tenants, deployments; no memberships or values
	// of any scope); ids of no user are left out.
	FindExternalUsers(ctx context.Context, accountID int64, externalIDs []string) ([]ExternalUser, error)
	// AddGroupMembers makes the users with these external ids members of the group
	// (scope, definition id, name), each at its next revision, and returns how many were
	// not members before; a user a delete has begun on is not changed. Idempotent.
	AddGroupMembers(ctx context.Context, accountID int64, scope, groupID, groupName string, externalIDs []string, now time.Time) (int64, error)
	// RemoveGroupMember ends one user's membership of the group (at the user's next
	// revision) and reports whether the user was a member.
	RemoveGroupMember(ctx context.Context, accountID int64, scope, groupID, externalID string, now time.Time) (bool, error)
	// ListGroupMembers returns up to limit members of the group by id after afterID, as
	// ListTenantUsers reads them (a range of an index on the memberships).
	ListGroupMembers(ctx context.Context, accountID int64, scope, groupID string, afterID int64, limit int) ([]ExternalUser, error)
}

// MembershipKey names a membership across scopes: the scope ("_" or a tenant name,
// neither holding "/") and the group's definition id.
func MembershipKey(scope, groupID string) string { return scope + "/" + groupID }

// membershipsAfter is u's Memberships once upd is applied: upd.Groups replaces upd.Scope's.
func membershipsAfter(u ExternalUser, upd UserUpdate) []string {
	if upd.Groups == nil {
		return u.Memberships
	}
	prefix := upd.Scope + "/"
	out := make([]string, 0, len(u.Memberships)+len(upd.Groups))
	for _, m := range u.Memberships {
		if !strings.HasPrefix(m, prefix) {
			out = append(out, m)
		}
	}
	for id := range upd.Groups {
		out = append(out, MembershipKey(upd.Scope, id))
	}
	sort.Strings(out)
	return out
}

// SessionRecordStore keeps the durable records of minted sessions (MongoDB), for listing
// and bulk revocation. Records are written once, at the mint, and never updated: what
// happens to a session later (exchange, revocation) is in Redis, where the gateway
// checks it, and the listing reads it from there.
type SessionRecordStore interface {
	InsertSessionRecord(ctx context.Context, r SessionRecord) error
	// SessionRecordBySID reads the record of the session with sid, in any account
	// (ErrNotFound when there is none): who a session id presented to the exchange was for.
	SessionRecordBySID(ctx context.Context, sid string) (SessionRecord, error)
	// ListSessionRecords returns up to limit of the account's records not purged at now,
	// newest first, after after (only the one with public id id when id is set): a read
	// of the index's order, whatever the listing then keeps.
	ListSessionRecords(ctx context.Context, accountID int64, id string, after SessionCursor, now time.Time, limit int) ([]SessionRecord, error)
	// EachRevocable calls fn with batches of the account's records matching q whose token
	// has not expired at now.
	EachRevocable(ctx context.Context, accountID int64, q SessionQuery, now time.Time, batch int, fn func([]SessionRecord) error) error
}

// LiveState is what Redis knows of a session: revoked (and when), exchanged (the live
// record's remaining lifetime), or still pending.
type LiveState struct {
	Revoked   bool
	RevokedAt *time.Time
	LiveTTL   time.Duration // > 0: exchanged and live
	Pending   bool          // the id is still exchangeable
}

// SessionStore keeps session ids, live sessions and revocations.
type SessionStore interface {
	// ReserveSession claims a fresh id of accountID (not yet exchangeable) before anything
	// else is written, so an unavailable store fails the mint before it changes anything.
	// It counts the session among the account's live sessions until its token's expiry
	// (TokenLifetime), revoked or not: ErrLiveSessionLimit, and nothing reserved, when
	// the account already has maxLive.
	ReserveSession(ctx context.Context, accountID int64, sessionID string, maxLive int) error
	// SaveSession makes a reserved id exchangeable, for SessionIDTTL, only while its
	// reservation stands: a revocation that came between the reservation and the save
	// (its marker stands, the reservation is gone) stays, and the save stores nothing and
	// returns ErrSessionRevoked; an id whose reservation is gone otherwise (expired, or
	// lost by Redis) is not stored either: ErrSessionUnusable. The check and the write
	// are one atomic step, so no revocation falls between them.
	SaveSession(ctx context.Context, sessionID string, s Session) error
	// ExchangeSession consumes the id atomically (single use) and keeps the session
	// live under its sid for ttl; ErrSessionUnusable when the id cannot be used.
	ExchangeSession(ctx context.Context, sessionID string, ttl time.Duration) (Session, error)
	// LiveSession returns the exchanged session with sid.
	LiveSession(ctx context.Context, sid string) (Session, error)
	// RevokeSession makes an unexchanged id unusable, or marks an exchanged session's
	// sid revoked until its token expires; only for sessions of accountID.
	// It returns the revoked session as stored (its record id and deployment; empty for an
	// id revoked before it was saved) and whether anything was revoked.
	RevokeSession(ctx context.Context, accountID int64, sessionID, sid string) (Session, bool, error)
	// RevokeSIDs revokes the sessions with these sids (pending or exchanged) of accountID
	// and returns how many it revoked (already revoked or gone ones are not counted).
	RevokeSIDs(ctx context.Context, accountID int64, sids []string) (int, error)
	// LiveStates reads the state of each sid, in one round trip.
	LiveStates(ctx context.Context, sids []string) ([]LiveState, error)
	// CountExchangeFailure counts a refused exchange of the session with sid and returns
	// how many there were since the previous one it reported, this one included, when at
	// least window has passed since then (the first ever is reported at once); 0
	// otherwise. The unreported count is kept for two windows.
	CountExchangeFailure(ctx context.Context, sid string, window time.Duration) (int64, error)
}

// Deployment is a deployment as the identity store knows it: whose it is, and its
// production branch.
type Deployment struct {
	ID               int64
	AccountID        int64
	ProductionBranch string
}

// Directory asks the identity store, which the gateway owns and answers for (the
// identity lookup of libs/identity): embed-svc reads none of its collections.
type Directory interface {
	// Deployment returns a deployment (ErrNotFound when there is none).
	Deployment(ctx context.Context, id int64) (Deployment, error)
	// InternalUser returns the account's user with username (ErrNotFound when none).
	InternalUser(ctx context.Context, accountID int64, username string) (InternalUser, error)
}

// BranchStatus is the resolver's answer about a branch.
type BranchStatus struct {
	Exists     bool
	Served     bool
	Production bool
}

// BranchResolver asks dbtsync-svc about a deployment's branch.
type BranchResolver interface {
	ResolveBranch(ctx context.Context, deploymentID int64, branch, productionBranch string) (BranchStatus, error)
}

// ReachQuery describes a viewer to the dashboard reach (workspace-svc, which keeps the
// dashboards and their embed grants): client.ReachRequest in the domain's terms.
type ReachQuery struct {
	AccountID      int64
	DeploymentID   int64
	Tenant         string
	AccountGroups  []string
	TenantGroups   []string
	Resources      *[]string // nil: no narrowing
	InternalUserID int64     // > 0: an internal user, decided by its own role and grants
	InternalRole   string
}

// ReachSubject is the grant subject that decided a dashboard, and ReachDashboard one
// dashboard the viewer would open: the contract's messages (embed-svc/client/contract,
// which links no transport), as the dry run answers them.
type (
	ReachSubject   = contract.ReachSubjectRef
	ReachDashboard = contract.ReachDashboard
)

// ReachAnswer lists the dashboards, Truncated when the viewer would open more.
type ReachAnswer struct {
	Dashboards []ReachDashboard
	Truncated  bool
}

// DashboardReach asks which dashboards a viewer would open (the dry run's explanation);
// every failure to get an answer is an error wrapping ErrUnavailable.
type DashboardReach interface {
	Dashboards(ctx context.Context, q ReachQuery) (ReachAnswer, error)
}

// TokenSigner signs JWTs with the current embed key.
type TokenSigner interface {
	Sign(ctx context.Context, claims jwt.Claims) (string, error)
	JWKS(ctx context.Context) (JWKSet, error)
}
