package embed

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// The actions embed-svc records in the audit trail, one event per call, refused ones
// included (a mint refused for the external-user limit, an exchange of a used id).
const (
	ActionSessionGenerate    = "embed.session.generate"
	ActionSessionExchange    = "embed.session.exchange"
	ActionSessionRevoke      = "embed.session.revoke"  // the spec's revoke, by session id
	ActionSessionsRevoke     = "embed.sessions.revoke" // session control: by id, user, tenant or deployment
	ActionDataTokenIssue     = "embed.data_token.issue"
	ActionAICredentialsIssue = "embed.ai_credentials.issue"
	ActionDefinitionCreate   = "embed.definition.create"
	ActionDefinitionDelete   = "embed.definition.delete"
	ActionExternalUserDelete = "embed.external_user.delete"
	ActionSettingsUpdate     = "embed.settings.update"
	// A batch of users made members of a group (details: externalIds, added,
	// alreadyMembers), one user's membership ended (details: externalId, removed).
	ActionGroupMembershipAdd    = "embed.group_membership.add"
	ActionGroupMembershipRemove = "embed.group_membership.remove"
)

// Audit target types of embed-svc. A session is named by its public id (the id of
// GET /api/v1/embed/sessions), never by its secret session id.
const (
	TargetSession         = "embed_session"
	TargetExternalUser    = "external_user"
	TargetInternalUser    = "internal_user"
	TargetEmbedTenant     = "embed_tenant"
	TargetDeployment      = "deployment"
	TargetGroup           = "group"
	TargetUserAttribute   = "user_attribute"
	TargetAccountSettings = "account_settings"
)

func definitionTarget(kind string) string {
	if kind == KindAttribute {
		return TargetUserAttribute
	}
	return TargetGroup
}

// record sends ev, ended by err (answered ok on success), to the audit trail.
func (s *service) record(ctx context.Context, ev *audit.Event, err error, ok int) {
	if s.d.Audit == nil {
		return
	}
	ev.Outcome = audit.OutcomeOf(err, ok)
	s.d.Audit.Record(ctx, *ev)
}

// mintEvent starts the event of a generate-session request: what was asked, before
// anything else is resolved (a refused request records what it asked for). The event is
// the deployment's when it is the caller's account's (dep); any other is only named.
func mintEvent(p *identity.Principal, dep *Deployment, req *GenerateSessionRequest) audit.Event {
	ev := audit.New(p, ActionSessionGenerate, audit.Target{Type: TargetSession})
	d := map[string]any{}
	ev.DeploymentID = 0
	switch {
	case dep != nil:
		ev.DeploymentID = dep.ID
	case req.DeploymentID != nil && *req.DeploymentID > 0:
		d["requestedDeploymentId"] = *req.DeploymentID
	}
	if req.ExternalID != nil {
		d["externalId"] = *req.ExternalID
	}
	if req.InternalID != nil {
		d["internalId"] = *req.InternalID
	}
	if req.EmbedTenantName != nil {
		d["embedTenant"] = *req.EmbedTenantName
	}
	if req.CreatorMode != nil {
		d["creatorMode"] = *req.CreatorMode
	}
	if req.BranchName != nil {
		d["branchName"] = *req.BranchName
	}
	ev.Details = d
	return ev
}

// minted completes a mint's event with what the mint did.
func minted(ev *audit.Event, m *mintPlan, rec SessionRecord, userCreated bool) {
	ev.Target.ID = rec.ID
	ev.Details["embedTenant"] = m.tenant
	ev.Details["branchName"] = m.branch
	ev.Details["production"] = m.production
	if rec.User.ExternalID != nil {
		ev.Details["externalId"] = *rec.User.ExternalID
		ev.Details["externalUserCreated"] = userCreated
	}
	if n := len(m.definitions.upserts); n > 0 {
		ev.Details["definitionsUpserted"] = n
	}
}

// exchangeEvent is the event of an exchange: the actor is whoever holds the session id,
// known by the session's user once the id is known.
func exchangeEvent(ctx context.Context) audit.Event {
	ev := audit.Event{Action: ActionSessionExchange, Target: audit.Target{Type: TargetSession}, Actor: audit.Actor{Type: audit.ActorAnonymous}}
	if p := identity.FromContext(ctx); p != nil {
		ev.ClientAddr = p.ClientAddr
	}
	return ev
}

// forSession attributes an exchange's event to the session it named.
func forSession(ev *audit.Event, acc, deploymentID int64, recordID, tenant string, user SessionRecordUser) {
	ev.AccountID, ev.DeploymentID, ev.Target.ID = acc, deploymentID, recordID
	ev.Actor = audit.Actor{Type: audit.ActorEmbedUser, EmbedTenant: tenant}
	switch {
	case user.ExternalID != nil:
		ev.Actor.ExternalID, ev.Actor.ID = *user.ExternalID, *user.ExternalID
	case user.Kind == "internal":
		ev.Actor.UserID, ev.Actor.ID = user.ID, strconv.FormatInt(user.ID, 10)
	}
}

// attributeUnusable finds the account of a session id the exchange refused (used,
// revoked or expired), so its admins see the attempt; an id that never existed stays
// unattributed (the event is only logged). Anyone holding a used id can send it again
// and again, so the account's trail records refusals of one id at most once per
// ExchangeFailureAudit, counting in details.failedAttempts the refusals since the
// previous event of that id (this one included); until then the count is in Redis
// (SessionStore.CountExchangeFailure, kept for two intervals). It reports whether ev is
// to be recorded.
func (s *service) attributeUnusable(ctx context.Context, ev *audit.Event, sessionID string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	sid := PublicSessionHandle(sessionID)
	rec, err := s.d.Records.SessionRecordBySID(ctx, sid)
	if err != nil {
		return true
	}
	forSession(ev, rec.AccountID, rec.DeploymentID, rec.ID, rec.Tenant, rec.User)
	n, err := s.d.Sessions.CountExchangeFailure(ctx, sid, s.limits.ExchangeFailureAudit)
	switch {
	case err != nil:
		return true // not counted: recorded, as every refusal was before
	case n == 0:
		return false
	}
	ev.Details = map[string]any{"failedAttempts": n}
	return true
}

// sessionTarget is the target of an action on the caller's own session (an embed
// token): the record id when the session knows it, else its sid.
func sessionTarget(sess Session) audit.Target {
	if sess.RecordID != "" {
		return audit.Target{Type: TargetSession, ID: sess.RecordID}
	}
	return audit.Target{Type: TargetSession, ID: sess.SID}
}

// embedTarget is the target of an action on the caller's own session, read from its
// token (rid: the session's public id; tokens from before it existed name the sid).
func embedTarget(p *identity.Principal) audit.Target {
	if p == nil || p.Embed == nil {
		return audit.Target{Type: TargetSession}
	}
	var c token.Claims
	if json.Unmarshal(p.Embed.Claims, &c) == nil && c.RecordID != "" {
		return audit.Target{Type: TargetSession, ID: c.RecordID}
	}
	return audit.Target{Type: TargetSession, ID: p.Embed.SessionID}
}

// settingsDetails are the keys an account-settings change set (absent: inherited).
func settingsDetails(in AccountSettings) map[string]any {
	d := map[string]any{}
	raw, _ := json.Marshal(in)
	_ = json.Unmarshal(raw, &d)
	return d
}

// revokeTarget is the target of a bulk revoke: what its selector names.
func revokeTarget(q SessionQuery) audit.Target {
	switch {
	case q.ID != "":
		return audit.Target{Type: TargetSession, ID: q.ID}
	case q.ExternalID != "":
		return audit.Target{Type: TargetExternalUser, ID: q.ExternalID}
	case q.InternalID != "":
		return audit.Target{Type: TargetInternalUser, ID: q.InternalID}
	case q.Tenant != "":
		return audit.Target{Type: TargetEmbedTenant, ID: q.Tenant}
	case q.DeploymentID != 0:
		return audit.Target{Type: TargetDeployment, ID: strconv.FormatInt(q.DeploymentID, 10)}
	}
	return audit.Target{Type: TargetSession}
}
