// Package audit is the platform's audit-trail contract: the event every service records
// for each state-changing operation, and the Recorder a service records it with. The
// publishing side (the JetStream stream, the Publisher, the outbox) is package
// audit/publish, so that a domain that records events links no driver.
//
// It lives in libs, like the forwarded identity, because every service speaks it; the
// owner of the trail (embed-svc's audit module) consumes the stream, stores the events
// and serves GET /api/v1/audit.
package audit

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
)

// Event is one audited action: who did what to which thing, when, from where, and how
// it ended. It is the message on the stream (JSON) and the item of GET /api/v1/audit.
type Event struct {
	// ID is a ULID: unique, and ordered by Time to the millisecond (the list's order).
	ID           string    `json:"id"`
	Time         time.Time `json:"time"` // the recording service's clock, UTC, milliseconds
	Service      string    `json:"service"`
	AccountID    int64     `json:"accountId"`
	DeploymentID int64     `json:"deploymentId,omitempty"`
	Actor        Actor     `json:"actor"`
	Action       string    `json:"action"`
	Target       Target    `json:"target"`
	Outcome      Outcome   `json:"outcome"`
	// RequestID is the platform's id of the request (the gateway assigns it); a client's
	// own X-Request-Id, when short and safe, is ClientRequestID: a client chooses it, so it
	// never stands for the platform's.
	RequestID       string `json:"requestId,omitempty"`
	ClientRequestID string `json:"clientRequestId,omitempty"`
	TraceID         string `json:"traceId,omitempty"`
	ClientAddr      string `json:"clientAddress,omitempty"`
	// Details are a few facts of the action (from and to folder, revoked count): set by
	// the recording service, bounded by Bound.
	Details map[string]any `json:"details,omitempty"`
}

// Actor types.
const (
	ActorUser         = "user"          // a user's bearer token
	ActorAPIKey       = "api_key"       // an API key (UserID is its owner)
	ActorEmbedSession = "embed_session" // an embed session token
	ActorEmbedUser    = "embed_user"    // the holder of an embed session id (the exchange)
	ActorAnonymous    = "anonymous"     // nobody we know
	ActorSystem       = "system"        // the platform itself (a background job)
	ActorOperator     = "operator"      // an operator's command line (platformctl)
)

// Actor is who acted: never a secret (an API key by its id, a session by its public id).
type Actor struct {
	Type string `json:"type"`
	// ID is the actor's identifier of its type: the user id, the API key id, the embed
	// session's public id, or the operator's name.
	ID          string `json:"id,omitempty"`
	UserID      int64  `json:"userId,omitempty"`
	APIKeyID    string `json:"apiKeyId,omitempty"`
	EmbedTenant string `json:"embedTenant,omitempty"`
	ExternalID  string `json:"externalId,omitempty"`
}

// Target is what the action was done to.
type Target struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
}

// Outcome results.
const (
	Success = "success"
	Failure = "failure"
)

// Outcome is how the action ended: Status is the HTTP status the caller was answered
// (absent for a background action), Code the error code of a failure.
type Outcome struct {
	Result string `json:"result"`
	Status int    `json:"status,omitempty"`
	Code   string `json:"code,omitempty"`
}

// Succeeded is the outcome of an action answered with status.
func Succeeded(status int) Outcome { return Outcome{Result: Success, Status: status} }

// Failed is the outcome of an action refused or failed with status and code.
func Failed(status int, code string) Outcome {
	return Outcome{Result: Failure, Status: status, Code: code}
}

// ActorOf is the actor behind a verified principal.
func ActorOf(p *identity.Principal) Actor {
	if p == nil {
		return Actor{Type: ActorAnonymous}
	}
	var userID int64
	if p.User != nil {
		userID = p.User.ID
	}
	switch p.Credential {
	case identity.CredentialBearer:
		return Actor{Type: ActorUser, ID: strconv.FormatInt(userID, 10), UserID: userID}
	case identity.CredentialAPIKey:
		return Actor{Type: ActorAPIKey, ID: p.KeyID, APIKeyID: p.KeyID, UserID: userID}
	case identity.CredentialEmbed:
		a := Actor{Type: ActorEmbedSession, UserID: userID}
		if p.Embed != nil {
			a.ID, a.EmbedTenant = p.Embed.SessionID, p.Embed.Tenant
			if !p.Embed.Internal {
				a.ExternalID = p.Embed.Subject
			}
		}
		return a
	}
	return Actor{Type: ActorAnonymous}
}

// New starts an event of action by the principal of a request: account, deployment
// (when the request has one), actor and client address. The Publisher fills in the id,
// time, request id and trace id.
func New(p *identity.Principal, action string, target Target) Event {
	ev := Event{Action: action, Target: target, Actor: ActorOf(p)}
	if p != nil {
		ev.AccountID, ev.ClientAddr = p.Account.ID, p.ClientAddr
		if p.Deployment != nil {
			ev.DeploymentID = p.Deployment.ID
		}
	}
	return ev
}

// NewID is a fresh event id at t: a ULID, so ids sort as their times do.
func NewID(t time.Time) string {
	return ulid.MustNew(ulid.Timestamp(t), rand.Reader).String()
}

// DerivedID is an event id at t whose random part derives from seed: the same t and
// seed give the same id, so an event that many writers update (the audit trail's summary
// of one account's merged events in one window) has one id without coordination.
func DerivedID(t time.Time, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return ulid.MustNew(ulid.Timestamp(t), bytes.NewReader(sum[:])).String()
}

// IDAt is the smallest id an event at t can have: the bound of a time range over ids.
func IDAt(t time.Time) string {
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(t)); err != nil {
		return ulid.ULID{}.String()
	}
	return id.String()
}

// ValidID reports whether s is an event id (a ULID in its canonical form).
func ValidID(s string) bool {
	id, err := ulid.ParseStrict(s)
	return err == nil && id.String() == s
}

// Recorder records audit events. Record never fails the action it records: it returns
// once each event is durable somewhere (publish.Publisher) and handles the rest itself.
type Recorder interface {
	Record(ctx context.Context, events ...Event)
}

// Complete fills in what the recording context knows and the event does not say yet
// (what a Recorder does with each event before it keeps it).
func Complete(ctx context.Context, ev *Event, service string, now time.Time) {
	if ev.Time.IsZero() {
		ev.Time = now
	}
	ev.Time = ev.Time.UTC().Truncate(time.Millisecond)
	if ev.ID == "" {
		ev.ID = NewID(ev.Time)
	}
	if ev.Service == "" {
		ev.Service = service
	}
	if ev.RequestID == "" {
		ev.RequestID = logging.RequestID(ctx)
	}
	if ev.ClientRequestID == "" {
		ev.ClientRequestID = logging.ClientRequestID(ctx)
	}
	if sc := trace.SpanContextFromContext(ctx); ev.TraceID == "" && sc.HasTraceID() {
		ev.TraceID = sc.TraceID().String()
	}
	if ev.Outcome.Result == "" {
		ev.Outcome.Result = Success
	}
	Bound(ev)
}

// Limits of what an event carries: the services set them, but some values come from
// clients (a folder's name, an external id), so none can make an event large.
const (
	MaxStringBytes  = 256  // a string field or detail value; longer is cut at a rune boundary
	MaxDetailsBytes = 4096 // the details object as JSON; larger is replaced by a note
	MaxDetailKeys   = 32
)

// Bound cuts every string of ev to MaxStringBytes and drops details over their limits.
func Bound(ev *Event) {
	for _, s := range []*string{&ev.Action, &ev.Service, &ev.Target.Type, &ev.Target.ID, &ev.RequestID, &ev.ClientRequestID, &ev.TraceID,
		&ev.ClientAddr, &ev.Actor.Type, &ev.Actor.ID, &ev.Actor.APIKeyID, &ev.Actor.EmbedTenant, &ev.Actor.ExternalID, &ev.Outcome.Code} {
		*s = cut(*s)
	}
	if len(ev.Details) == 0 {
		ev.Details = nil
		return
	}
	if len(ev.Details) > MaxDetailKeys {
		ev.Details = map[string]any{"truncated": true}
		return
	}
	for k, v := range ev.Details {
		switch s := v.(type) {
		case string:
			ev.Details[k] = cut(s)
		case []string:
			out := make([]string, len(s))
			for i := range s {
				out[i] = cut(s[i])
			}
			ev.Details[k] = out
		}
	}
	if raw, err := json.Marshal(ev.Details); err != nil || len(raw) > MaxDetailsBytes {
		ev.Details = map[string]any{"truncated": true}
	}
}

func cut(s string) string { return logging.Cut(s, MaxStringBytes) }

// OutcomeOf is the outcome the caller was answered: ok on success, else the status and
// code the one error encoder gives err (errs.Answer).
func OutcomeOf(err error, ok int) Outcome {
	if err == nil {
		return Succeeded(ok)
	}
	status, code, _, _ := errs.Answer(err)
	return Failed(status, code)
}

// Record records on rec the event of p's action on target, ended by err (answered ok on
// success), with details: what an auditing decorator does after each call it wraps.
func Record(ctx context.Context, rec Recorder, p *identity.Principal, action string, target Target, err error, ok int, details map[string]any) {
	ev := New(p, action, target)
	ev.Outcome, ev.Details = OutcomeOf(err, ok), details
	rec.Record(ctx, ev)
}
