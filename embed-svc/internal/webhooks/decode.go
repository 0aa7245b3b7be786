package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Bounds of a subscription as the API takes it.
const (
	MaxURLBytes         = 2048
	MaxEvents           = 20
	MaxDeploymentIDs    = 100
	MaxDescriptionBytes = 256
	// MaxBodyBytes bounds a request body: a subscription at every bound fits.
	MaxBodyBytes = 16 << 10
)

// The requests the endpoints take.
type (
	createRequest struct {
		P  *identity.Principal
		In Input
	}
	listRequest struct {
		P     *identity.Principal
		First int
		After string
	}
	idRequest struct {
		P  *identity.Principal
		ID string
	}
	updateRequest struct {
		P     *identity.Principal
		ID    string
		Patch Patch
	}
	deliveriesRequest struct {
		P  *identity.Principal
		ID string
		Q  DeliveryQuery
	}
	redeliverRequest struct {
		P              *identity.Principal
		ID, DeliveryID string
	}
)

// validID: a prefix and a ULID in its canonical form ("wh_…", "dlv_…").
func validID(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && audit.ValidID(rest)
}

// subID is the path's webhook id; anything that is no webhook id is no webhook.
func subID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !validID("wh_", id) {
		return "", errNotFound
	}
	return id, nil
}

// checkEvents: 1 to MaxEvents patterns, each ValidPattern; duplicates dropped.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 || len(events) > MaxEvents {
		return nil, errs.Invalidf("events must list 1 to %d event patterns, not %d", MaxEvents, len(events)).WithCode(errs.CodeInvalidEventPattern)
	}
	out := make([]string, 0, len(events))
	for _, p := range events {
		if !ValidPattern(p) {
			return nil, errs.Invalidf("events: %q is no event pattern: an action such as embed.session.revoke, a group such as workspace.* or workspace.folder.*, or * for every event (at most %d characters)",
				cutForMessage(p), MaxPatternBytes).WithCode(errs.CodeInvalidEventPattern)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// cutForMessage keeps a client's string short in a message.
func cutForMessage(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// checkDeploymentIDs: 1 to MaxDeploymentIDs positive ids, duplicates dropped, sorted.
func checkDeploymentIDs(ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, errs.Invalidf("deploymentIds must name 1 to %d deployments, or be null for every deployment of the account", MaxDeploymentIDs)
	}
	if len(ids) > MaxDeploymentIDs {
		return nil, errs.Invalidf("deploymentIds must name at most %d deployments, not %d", MaxDeploymentIDs, len(ids))
	}
	for _, d := range ids {
		if d <= 0 {
			return nil, errs.Invalidf("deploymentIds must be positive integers, not %d", d)
		}
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func checkURLShape(u string) error {
	if u == "" {
		return errs.Invalidf("url is required: the https URL the deliveries are sent to").WithCode(errs.CodeInvalidWebhookURL)
	}
	if len(u) > MaxURLBytes {
		return errs.Invalidf("url must be at most %d bytes, not %d", MaxURLBytes, len(u)).WithCode(errs.CodeInvalidWebhookURL)
	}
	return nil
}

func checkDescription(d string) error {
	if len(d) > MaxDescriptionBytes {
		return errs.Invalidf("description must be at most %d bytes, not %d", MaxDescriptionBytes, len(d))
	}
	return nil
}

// createBody is POST /api/v1/webhooks's body.
type createBody struct {
	URL            *string  `json:"url"`
	Events         []string `json:"events"`
	DeploymentIDs  []int64  `json:"deploymentIds"`
	Enabled        *bool    `json:"enabled"`
	IncludeRefused *bool    `json:"includeRefused"`
	Description    *string  `json:"description"`
}

func decodeCreate(_ context.Context, r *http.Request) (any, error) {
	var b createBody
	if err := httpx.DecodeJSON(r, &b); err != nil {
		return nil, err
	}
	in := Input{Enabled: true}
	if b.URL != nil {
		in.URL = *b.URL
	}
	if err := checkURLShape(in.URL); err != nil {
		return nil, err
	}
	var err error
	if in.Events, err = checkEvents(b.Events); err != nil {
		return nil, err
	}
	if b.DeploymentIDs != nil {
		if in.DeploymentIDs, err = checkDeploymentIDs(b.DeploymentIDs); err != nil {
			return nil, err
		}
	}
	if b.Enabled != nil {
		in.Enabled = *b.Enabled
	}
	if b.IncludeRefused != nil {
		in.IncludeRefused = *b.IncludeRefused
	}
	if b.Description != nil {
		if err := checkDescription(*b.Description); err != nil {
			return nil, err
		}
		in.Description = *b.Description
	}
	return createRequest{P: identity.FromContext(r.Context()), In: in}, nil
}

// patchBody is PATCH /api/v1/webhooks/{id}'s body: deploymentIds stays raw to tell
// null (every deployment) from absent (unchanged).
type patchBody struct {
	URL            *string         `json:"url"`
	Events         []string        `json:"events"`
	DeploymentIDs  json.RawMessage `json:"deploymentIds"`
	Enabled        *bool           `json:"enabled"`
	IncludeRefused *bool           `json:"includeRefused"`
	Description    *string         `json:"description"`
}

func decodeUpdate(_ context.Context, r *http.Request) (any, error) {
	id, err := subID(r)
	if err != nil {
		return nil, err
	}
	var b patchBody
	if err := httpx.DecodeJSON(r, &b); err != nil {
		return nil, err
	}
	var p Patch
	if b.URL != nil {
		if err := checkURLShape(*b.URL); err != nil {
			return nil, err
		}
		p.URL = b.URL
	}
	if b.Events != nil {
		if p.Events, err = checkEvents(b.Events); err != nil {
			return nil, err
		}
	}
	if b.DeploymentIDs != nil {
		var ids []int64
		if !bytes.Equal(bytes.TrimSpace(b.DeploymentIDs), []byte("null")) {
			if err := json.Unmarshal(b.DeploymentIDs, &ids); err != nil {
				return nil, errs.Invalidf("field \"deploymentIds\" must be an array of positive integers or null")
			}
			if ids, err = checkDeploymentIDs(ids); err != nil {
				return nil, err
			}
		}
		p.DeploymentIDs = &ids
	}
	p.Enabled, p.IncludeRefused = b.Enabled, b.IncludeRefused
	if b.Description != nil {
		if err := checkDescription(*b.Description); err != nil {
			return nil, err
		}
		p.Description = b.Description
	}
	return updateRequest{P: identity.FromContext(r.Context()), ID: id, Patch: p}, nil
}

func decodeList(_ context.Context, r *http.Request) (any, error) {
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	req := listRequest{P: identity.FromContext(r.Context()), First: pg.First}
	if pg.After != "" {
		id, err := httpx.DecodeCursor[string](pg.After)
		if err != nil || !validID("wh_", id) {
			return nil, httpx.ErrBadCursor
		}
		req.After = id
	}
	return req, nil
}

func decodeID(_ context.Context, r *http.Request) (any, error) {
	id, err := subID(r)
	if err != nil {
		return nil, err
	}
	return idRequest{P: identity.FromContext(r.Context()), ID: id}, nil
}

func decodeDeliveries(_ context.Context, r *http.Request) (any, error) {
	id, err := subID(r)
	if err != nil {
		return nil, err
	}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	q := DeliveryQuery{First: pg.First, Status: r.URL.Query().Get("status")}
	switch q.Status {
	case "", StatusPending, StatusSucceeded, StatusFailed:
	default:
		return nil, errs.Invalidf("status must be pending, succeeded or failed, not %q", cutForMessage(q.Status))
	}
	if pg.After != "" {
		did, err := httpx.DecodeCursor[string](pg.After)
		if err != nil || !validID("dlv_", did) {
			return nil, httpx.ErrBadCursor
		}
		q.After = did
	}
	return deliveriesRequest{P: identity.FromContext(r.Context()), ID: id, Q: q}, nil
}

func decodeRedeliver(_ context.Context, r *http.Request) (any, error) {
	id, err := subID(r)
	if err != nil {
		return nil, err
	}
	did := r.PathValue("deliveryId")
	if !validID("dlv_", did) {
		return nil, errDelNotFound
	}
	return redeliverRequest{P: identity.FromContext(r.Context()), ID: id, DeliveryID: did}, nil
}
