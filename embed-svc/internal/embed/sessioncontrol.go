package embed

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Session states, as GET /api/v1/embed/sessions shows them.
const (
	StatePending = "pending" // minted, not exchanged, its id still usable
	StateActive  = "active"  // exchanged, its token not expired
	StateRevoked = "revoked"
	StateExpired = "expired" // its token expired, or its id was never exchanged in time
)

// DefaultSessionRetention is how long a session's record stays listed after its token
// expires (EMBED_SESSION_RETENTION).
const DefaultSessionRetention = 7 * 24 * time.Hour

// SessionRecord is the durable record of a minted session: never its id or a token.
type SessionRecord struct {
	ID           string // public id
	AccountID    int64
	SID          string // the token's sid (SHA-256 of the secret id): revocations are keyed by it
	Tenant       string
	User         SessionRecordUser
	DeploymentID int64
	Branch       string
	CreatedAt    time.Time
	PendingUntil time.Time // the id can be exchanged until then
	ExpiresAt    time.Time
	// What the session shows besides its identity, as minted; read by SessionRecordBySID
	// only (listings leave them out).
	Profile         *SessionProfile
	SecurityContext json.RawMessage
}

// SessionProfile is the user's profile as a session shows it: the external user's as the
// mint left it, or the internal user's from the identity store.
type SessionProfile struct {
	Email       *string
	DisplayName *string
	Picture     *string
}

// SessionRecordUser is who a session is for.
type SessionRecordUser struct {
	Kind       string  `json:"kind"`
	ID         int64   `json:"id"`
	ExternalID *string `json:"externalId"`
	Username   *string `json:"username"`
}

// state is a session's state at now, from its record and what Redis knows; it also
// returns when it was exchanged and revoked, where known.
func (r SessionRecord) state(l LiveState, now time.Time) (state string, exchangedAt, revokedAt *time.Time) {
	switch {
	case !now.Before(r.ExpiresAt):
		return StateExpired, nil, nil
	case l.Revoked:
		return StateRevoked, nil, l.RevokedAt
	case l.LiveTTL > 0:
		// The live record was kept for TokenLifetime from the exchange.
		at := now.Add(l.LiveTTL - TokenLifetime).UTC().Truncate(time.Second)
		return StateActive, &at, nil
	case l.Pending && now.Before(r.PendingUntil):
		return StatePending, nil, nil
	}
	return StateExpired, nil, nil // never exchanged in time
}

// SessionQuery selects an account's sessions: every set field must match.
type SessionQuery struct {
	ID           string
	DeploymentID int64
	Deployments  []int64 // nil: every deployment; else only these (the caller's reach)
	Tenant       string
	ExternalID   string
	InternalID   string // the internal user's username
	State        string
	First        int
	After        SessionCursor // zero: the first page
}

// SessionCursor is the position after the last item of a page (newest first), the key
// of the list's cursor.
type SessionCursor struct {
	CreatedAt time.Time `json:"t"`
	ID        string    `json:"i"`
}

// IsZero reports whether the cursor is the start.
func (c SessionCursor) IsZero() bool { return c.ID == "" }

// DecodeSessionCursor reads a page's endCursor: httpx's codec, and a session id.
func DecodeSessionCursor(s string) (SessionCursor, error) {
	c, err := httpx.DecodeCursor[SessionCursor](s)
	if err != nil || !validPublicID(c.ID) {
		return SessionCursor{}, httpx.ErrBadCursor
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// SessionView is one session as the API lists it.
type SessionView struct {
	ID           string            `json:"id"`
	EmbedTenant  string            `json:"embedTenantName"`
	User         SessionRecordUser `json:"user"`
	DeploymentID int64             `json:"deploymentId"`
	BranchName   string            `json:"branchName"`
	CreatedAt    httpx.Time        `json:"createdAt"`
	ExchangedAt  *httpx.Time       `json:"exchangedAt"`
	ExpiresAt    httpx.Time        `json:"expiresAt"`
	RevokedAt    *httpx.Time       `json:"revokedAt"`
	State        string            `json:"state"`
}

// RevokeSessionsRequest selects the sessions to revoke: exactly one of {"id"},
// {"externalId","tenant"}, {"internalId"}, {"tenant"}, {"deploymentId"}.
type RevokeSessionsRequest struct {
	ID           *string `json:"id"`
	ExternalID   *string `json:"externalId"`
	Tenant       *string `json:"tenant"`
	InternalID   *string `json:"internalId"`
	DeploymentID *int64  `json:"deploymentId"`
}

// RevokedSessions is the answer of a bulk revoke.
type RevokedSessions struct {
	Revoked int `json:"revoked"`
}

// revokeBatch is how many sessions a bulk revoke handles per round trip.
const revokeBatch = 500

// NewPublicSessionID is a session record's id: 16 random bytes, hex.
func NewPublicSessionID() string { return randomID() }

func validPublicID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func sessionView(r SessionRecord, l LiveState, now time.Time) SessionView {
	state, exchangedAt, revokedAt := r.state(l, now)
	return SessionView{ID: r.ID, EmbedTenant: r.Tenant, User: r.User, DeploymentID: r.DeploymentID, BranchName: r.Branch,
		CreatedAt: httpx.At(r.CreatedAt.UTC()), ExchangedAt: httpx.AtPtr(exchangedAt), ExpiresAt: httpx.At(r.ExpiresAt.UTC()), RevokedAt: httpx.AtPtr(revokedAt), State: state}
}

// ListSessions lists the caller's account's sessions, newest first; a filtered page
// examines at most EMBED_MAX_LIST_SCAN records (listSessions).
func (s *service) ListSessions(ctx context.Context, p *identity.Principal, q SessionQuery) (httpx.Page[SessionView], error) {
	if err := requireSessionControl(p); err != nil {
		return httpx.Page[SessionView]{}, err
	}
	// A scoped key lists its deployments' sessions; naming another deployment is 403.
	if err := keyReach(p).narrow(&q); err != nil {
		return httpx.Page[SessionView]{}, err
	}
	if q.First < 1 || q.First > MaxPageSize {
		return httpx.Page[SessionView]{}, httpx.BadFirst(strconv.Itoa(q.First))
	}
	switch q.State {
	case "", StatePending, StateActive, StateRevoked, StateExpired:
	default:
		return httpx.Page[SessionView]{}, errs.Invalidf("state must be pending, active, revoked or expired, not %q", q.State)
	}
	if q.Tenant != "" && !ValidTenantName(q.Tenant) {
		return httpx.Page[SessionView]{}, errs.Invalidf("tenant %q is not a valid embed tenant name", q.Tenant)
	}
	if q.ID != "" && !validPublicID(q.ID) {
		return httpx.Page[SessionView]{}, errs.Invalidf("id %q is not a session id of this list", q.ID)
	}
	if len(q.ExternalID) > 256 || len(q.InternalID) > 256 {
		return httpx.Page[SessionView]{}, errs.Invalidf("externalId and internalId are at most 256 characters")
	}
	q.ExternalID = strings.ToLower(strings.TrimSpace(q.ExternalID))
	return s.listSessions(ctx, p.Account.ID, q)
}

// RevokeSessions revokes every matching session of the caller's account that is pending
// or active: a pending id can no longer be exchanged, an active token is refused on its
// next request through any gateway (the revocation marker is checked on every request).
func (s *service) RevokeSessions(ctx context.Context, p *identity.Principal, req RevokeSessionsRequest) (_ RevokedSessions, err error) {
	ev := audit.New(p, ActionSessionsRevoke, audit.Target{Type: TargetSession})
	var q SessionQuery
	defer func() {
		ev.Target = revokeTarget(q)
		if q.ExternalID != "" {
			ev.Details["embedTenant"] = q.Tenant
		}
		s.record(ctx, &ev, err, http.StatusOK)
	}()
	ev.Details = map[string]any{}
	if err := requireSessionControl(p); err != nil {
		return RevokedSessions{}, err
	}
	switch {
	case req.ID != nil && req.ExternalID == nil && req.Tenant == nil && req.InternalID == nil && req.DeploymentID == nil:
		if !validPublicID(*req.ID) {
			return RevokedSessions{}, errs.Invalidf("id %q is not a session id returned by GET /api/v1/embed/sessions", *req.ID)
		}
		q.ID = *req.ID
	case req.ExternalID != nil && req.Tenant != nil && req.ID == nil && req.InternalID == nil && req.DeploymentID == nil:
		q.ExternalID, q.Tenant = strings.ToLower(strings.TrimSpace(*req.ExternalID)), *req.Tenant
		if q.ExternalID == "" || len(q.ExternalID) > 256 {
			return RevokedSessions{}, errs.Invalidf("externalId must be 1 to 256 characters")
		}
	case req.InternalID != nil && req.ID == nil && req.ExternalID == nil && req.Tenant == nil && req.DeploymentID == nil:
		q.InternalID = strings.TrimSpace(*req.InternalID)
		if q.InternalID == "" || len(q.InternalID) > 256 {
			return RevokedSessions{}, errs.Invalidf("internalId must be 1 to 256 characters")
		}
	case req.Tenant != nil && req.ID == nil && req.ExternalID == nil && req.InternalID == nil && req.DeploymentID == nil:
		q.Tenant = *req.Tenant
	case req.DeploymentID != nil && req.ID == nil && req.ExternalID == nil && req.Tenant == nil && req.InternalID == nil:
		if *req.DeploymentID <= 0 {
			return RevokedSessions{}, errs.Invalidf("deploymentId must be a positive integer")
		}
		q.DeploymentID = *req.DeploymentID
	default:
		return RevokedSessions{}, errs.Invalidf(`send exactly one of {"id"}, {"externalId", "tenant"}, {"internalId"}, {"tenant"} or {"deploymentId"}`)
	}
	if q.Tenant != "" && !ValidTenantName(q.Tenant) {
		return RevokedSessions{}, errs.Invalidf("tenant %q is not a valid embed tenant name", q.Tenant)
	}
	// Every selector resolves inside the caller's reach: a scoped key revokes its
	// deployments' sessions only, and naming another deployment is 403.
	if err := keyReach(p).narrow(&q); err != nil {
		return RevokedSessions{}, err
	}
	n, err := s.revokeMatching(ctx, p.Account.ID, q)
	ev.Details["revoked"] = n
	return RevokedSessions{Revoked: n}, err
}

// revokeMatching revokes the account's pending and active sessions matching q, in
// batches, and returns how many it revoked.
func (s *service) revokeMatching(ctx context.Context, accountID int64, q SessionQuery) (int, error) {
	now := s.now().UTC()
	n := 0
	err := s.d.Records.EachRevocable(ctx, accountID, q, now, revokeBatch, func(batch []SessionRecord) error {
		sids := make([]string, len(batch))
		for i, r := range batch {
			sids[i] = r.SID
		}
		// The revocations live in Redis, where the gateway checks them on every request;
		// the records stay as minted.
		revoked, err := s.d.Sessions.RevokeSIDs(ctx, accountID, sids)
		n += revoked
		return err
	})
	if err != nil {
		return n, storeErr(err)
	}
	return n, nil
}
