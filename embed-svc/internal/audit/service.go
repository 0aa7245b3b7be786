// Package audit is the platform's audit trail: it stores the events every service
// publishes on the AUDIT stream (Ingester) and serves them to the admins of each account
// (GET /api/v1/audit). It runs inside embed-svc, beside the account's other admin APIs
// (settings, catalogs), with its own database, consumer and routes: nothing in it
// depends on the embed domain, so it can move to a process of its own by wiring alone.
package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Query is what GET /api/v1/audit asks for: events of the caller's account, newest
// first, narrowed by the filters that are set.
type Query struct {
	From, To     time.Time // from inclusive, to exclusive; zero: open
	Action       string    // exact, or a prefix ending in ".*" ("workspace.folder.*")
	Actor        string    // a user id, an API key id or an embed external id
	DeploymentID int64
	TargetType   string
	TargetID     string
	First        int
	After        string // the id of the last event of the previous page
}

// Filter is a Query as the store runs it, for one account.
type Filter struct {
	From, To     time.Time
	Action       string
	ActionPrefix string // set instead of Action for "x.y.*": "x.y."
	Actor        string
	// Deployments: nil, any event of the account; otherwise only events of these
	// deployments (a scoped API key's view: events of no deployment are not in it).
	Deployments []int64
	TargetType  string
	TargetID    string
	BeforeID    string // events with smaller ids only (the cursor)
}

// Store keeps the events.
type Store interface {
	// Insert stores events; an event already stored (same id) is not an error and is not
	// changed: the stream may deliver an event twice.
	Insert(ctx context.Context, events []audit.Event) error
	// Stored reports which of ids are stored (a redelivered event the ingester must not
	// count against its account's budget again).
	Stored(ctx context.Context, ids []string) (map[string]bool, error)
	// List returns up to limit events of accountID matching f, newest (largest id) first.
	List(ctx context.Context, accountID int64, f Filter, limit int) ([]audit.Event, error)
	// Admit adds n to the count of accountID's events in the window that starts at window
	// and returns the count before: the per-account budget, shared by every replica of
	// the ingester.
	Admit(ctx context.Context, accountID int64, window time.Time, n int) (int64, error)
	// Merge records events past their account's budget: each Merged adds its count to the
	// summary event of its account and window (m.Event), created by the first.
	Merge(ctx context.Context, merged []Merged) error
}

// ActionMerged is the summary event of an account's events merged in one window: its
// details.merged says how many.
const ActionMerged = "audit.events.merge"

// Merged is a count of an account's events in one window that were past its budget
// (AUDIT_ACCOUNT_MAX_EVENTS per AUDIT_ACCOUNT_WINDOW) and so were not stored one by one.
type Merged struct {
	AccountID int64
	Window    time.Time     // its start
	Length    time.Duration // the window's length
	Limit     int           // the budget it was past
	Count     int
}

// Event is the summary event that stands for the window's merged events: recorded by the
// trail itself (embed-svc, the system), at the window's start, with an id derived from
// the account and the window so every replica adds to the same one. Its details carry
// the window and the budget; the store adds details.merged, the count.
func (m Merged) Event() audit.Event {
	at := m.Window.UTC().Truncate(time.Millisecond)
	return audit.Event{
		ID: audit.DerivedID(at, fmt.Sprintf("audit merged %d %d", m.AccountID, at.UnixMilli())), Time: at, Service: "embed-svc",
		AccountID: m.AccountID, Actor: audit.Actor{Type: audit.ActorSystem}, Action: ActionMerged,
		Target: audit.Target{Type: "account", ID: strconv.FormatInt(m.AccountID, 10)}, Outcome: audit.Succeeded(0),
		Details: map[string]any{"windowSeconds": int64(m.Length / time.Second), "limit": m.Limit},
	}
}

// Service is the audit trail's API.
type Service interface {
	List(ctx context.Context, p *identity.Principal, q Query) (httpx.Page[audit.Event], error)
}

// The service's answers to a refused or failed read (libs/errs: the transport's encoder
// turns each into its status).
var (
	ErrForbidden  = errs.New(errs.Forbidden, "reading the audit trail requires an admin's bearer token or API key")
	ErrOutOfScope = errs.New(errs.Forbidden, "this API key is scoped to other deployments than the one asked for").WithCode(errs.CodeKeyOutOfScope)
	// ErrUnavailable marks a store's failure to answer (stores wrap their driver's error
	// with it); List answers it with errUnavailable.
	ErrUnavailable = errors.New("the audit store is unavailable")
	errUnavailable = errs.New(errs.Unavailable, "the audit trail is temporarily unavailable; retry shortly")
)

type service struct{ store Store }

// NewService serves the events of store.
func NewService(store Store) Service { return &service{store: store} }

// List returns a page of the caller's account's events. Only admins read the trail
// (a user's bearer token or an API key of an admin); an API key scoped to deployments
// reads the events of those deployments only.
func (s *service) List(ctx context.Context, p *identity.Principal, q Query) (httpx.Page[audit.Event], error) {
	if p == nil || !p.HasRole(identity.RoleAdmin) ||
		(p.Credential != identity.CredentialBearer && p.Credential != identity.CredentialAPIKey) {
		return httpx.Page[audit.Event]{}, ErrForbidden
	}
	f := Filter{From: q.From, To: q.To, Actor: q.Actor, TargetType: q.TargetType, TargetID: q.TargetID, BeforeID: q.After}
	if prefix, ok := cutWildcard(q.Action); ok {
		f.ActionPrefix = prefix
	} else {
		f.Action = q.Action
	}
	switch {
	case q.DeploymentID > 0 && !p.InScope(q.DeploymentID):
		return httpx.Page[audit.Event]{}, ErrOutOfScope
	case q.DeploymentID > 0:
		f.Deployments = []int64{q.DeploymentID}
	case len(p.KeyScope) > 0:
		f.Deployments = slices.Clone(p.KeyScope)
	}
	items, err := s.store.List(ctx, p.Account.ID, f, q.First+1)
	if errors.Is(err, ErrUnavailable) {
		return httpx.Page[audit.Event]{}, errUnavailable
	}
	if err != nil {
		return httpx.Page[audit.Event]{}, err
	}
	// The cursor is the last event's id.
	more := len(items) > q.First
	return httpx.PageOf(items[:min(len(items), q.First)], more, func(ev audit.Event) string { return ev.ID }), nil
}

// cutWildcard splits "x.y.*" into its prefix "x.y.".
func cutWildcard(action string) (string, bool) {
	if len(action) > 2 && action[len(action)-2:] == ".*" {
		return action[:len(action)-1], true
	}
	return "", false
}
