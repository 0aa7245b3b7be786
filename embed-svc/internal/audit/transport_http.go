package audit

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Path is the route of the audit trail.
const Path = "/api/v1/audit"

type listRequest struct {
	P *identity.Principal
	Q Query
}

// MakeListEndpoint adapts s.List.
func MakeListEndpoint(s Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(listRequest)
		return s.List(ctx, r.P, r.Q)
	}
}

// RegisterRoutes adds GET /api/v1/audit to r (the caller wraps the router in
// identity.Require): the trail shares embed-svc's router, and could have a process of
// its own by wiring alone.
func RegisterRoutes(r *httpx.Router, s Service, logger *slog.Logger) {
	httpx.Handle(r, http.MethodGet, Path, MakeListEndpoint(s), decodeListRequest, httpx.HandleOptions{Logger: logger, Encode: encodePage})
}

// Bounds of the filters: each is matched exactly against values the services set, so
// anything longer or of other characters can match nothing and is a mistake.
var (
	actionPattern     = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?$`)
	targetTypePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

const (
	maxActionLen = 64
	maxActorLen  = 128
	maxTargetLen = audit.MaxStringBytes
)

// decodeListRequest reads the filters and page of GET /api/v1/audit.
func decodeListRequest(_ context.Context, r *http.Request) (any, error) {
	v := r.URL.Query()
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	q := Query{First: pg.First, Actor: v.Get("actor"), TargetType: v.Get("targetType"), TargetID: v.Get("targetId"), Action: v.Get("action")}
	if q.From, err = parseTime("from", v.Get("from")); err != nil {
		return nil, err
	}
	if q.To, err = parseTime("to", v.Get("to")); err != nil {
		return nil, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return nil, errs.Invalidf("from must be before to")
	}
	if q.Action != "" && (len(q.Action) > maxActionLen || !actionPattern.MatchString(q.Action)) {
		return nil, errs.Invalidf("action must be an action name such as workspace.folder.create, or a group of them such as workspace.folder.* (at most %d characters)", maxActionLen)
	}
	if len(q.Actor) > maxActorLen {
		return nil, errs.Invalidf("actor must be at most %d characters", maxActorLen)
	}
	if q.TargetType != "" && !targetTypePattern.MatchString(q.TargetType) {
		return nil, errs.Invalidf("targetType must be a target type such as folder or embed_session")
	}
	if len(q.TargetID) > maxTargetLen {
		return nil, errs.Invalidf("targetId must be at most %d characters", maxTargetLen)
	}
	if raw := v.Get("deploymentId"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n <= 0 {
			return nil, errs.Invalidf("deploymentId must be a positive integer, not %q", raw)
		}
		q.DeploymentID = n
	}
	if pg.After != "" {
		id, err := httpx.DecodeCursor[string](pg.After)
		if err != nil || !audit.ValidID(id) {
			return nil, httpx.ErrBadCursor
		}
		q.After = id
	}
	return listRequest{P: identity.FromContext(r.Context()), Q: q}, nil
}

func parseTime(name, raw string) (time.Time, error) {
	if raw == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return time.Time{}, errs.Invalidf("%s must be an RFC 3339 date-time such as 2026-11-25T08:00:00Z, not %q", name, raw)
	}
	return t, nil
}

// EventView is an event as the API shows it (timestamps in the one API format).
type EventView struct {
	ID           string          `json:"id"`
	Time         httpx.Time      `json:"time"`
	Service      string          `json:"service"`
	AccountID    int64           `json:"accountId"`
	DeploymentID *int64          `json:"deploymentId"`
	Actor        audit.Actor     `json:"actor"`
	Action       string          `json:"action"`
	Target       audit.Target    `json:"target"`
	Outcome      audit.Outcome   `json:"outcome"`
	RequestID    *string         `json:"requestId"`
	ClientReqID  *string         `json:"clientRequestId"`
	TraceID      *string         `json:"traceId"`
	ClientAddr   *string         `json:"clientAddress"`
	Details      json.RawMessage `json:"details"`
}

// View renders ev for the API.
func View(ev audit.Event) EventView {
	v := EventView{ID: ev.ID, Time: httpx.At(ev.Time), Service: ev.Service, AccountID: ev.AccountID, Actor: ev.Actor,
		Action: ev.Action, Target: ev.Target, Outcome: ev.Outcome, RequestID: orNil(ev.RequestID), ClientReqID: orNil(ev.ClientRequestID),
		TraceID:    orNil(ev.TraceID),
		ClientAddr: orNil(ev.ClientAddr), Details: json.RawMessage("{}")}
	if ev.DeploymentID > 0 {
		v.DeploymentID = &ev.DeploymentID
	}
	if len(ev.Details) > 0 {
		if raw, err := json.Marshal(ev.Details); err == nil {
			v.Details = raw
		}
	}
	return v
}

func orNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func encodePage(_ context.Context, w http.ResponseWriter, resp any) error {
	pg := resp.(httpx.Page[audit.Event])
	items := make([]EventView, len(pg.Items))
	for i, ev := range pg.Items {
		items[i] = View(ev)
	}
	httpx.WriteJSON(w, http.StatusOK, httpx.Page[EventView]{Items: items, PageInfo: pg.PageInfo})
	return nil
}
