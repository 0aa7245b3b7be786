package webhooks

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/idempotency"
)

// Path is the webhooks' route.
const Path = "/api/v1/webhooks"

// RegisterRoutes adds the webhooks API to r (the caller wraps the router in
// identity.Require); idem, when set, honours Idempotency-Key on the POSTs.
func RegisterRoutes(r *httpx.Router, e Endpoints, logger *slog.Logger, idem *idempotency.Middleware) {
	o := httpx.HandleOptions{Logger: logger, MaxBody: MaxBodyBytes, Encode: encodeResponse}
	if idem != nil {
		o.Wrap = idem.Wrap
	}
	httpx.Handle(r, http.MethodPost, Path, e.Create, decodeCreate, o)
	httpx.Handle(r, http.MethodGet, Path, e.List, decodeList, o)
	httpx.Handle(r, http.MethodGet, Path+"/{id}", e.Get, decodeID, o)
	httpx.Handle(r, http.MethodPatch, Path+"/{id}", e.Update, decodeUpdate, o)
	httpx.Handle(r, http.MethodDelete, Path+"/{id}", e.Delete, decodeID, o)
	httpx.Handle(r, http.MethodPost, Path+"/{id}/secret/rotate", e.RotateSecret, decodeID, o)
	httpx.Handle(r, http.MethodGet, Path+"/{id}/deliveries", e.ListDeliveries, decodeDeliveries, o)
	httpx.Handle(r, http.MethodPost, Path+"/{id}/deliveries/{deliveryId}/redeliver", e.Redeliver, decodeRedeliver, o)
	httpx.Handle(r, http.MethodPost, Path+"/{id}/ping", e.Ping, decodeID, o)
}

// SubscriptionView is a subscription as the API shows it: never its secret.
type SubscriptionView struct {
	ID             string      `json:"id"`
	URL            string      `json:"url"`
	Events         []string    `json:"events"`
	DeploymentIDs  []int64     `json:"deploymentIds"`
	Enabled        bool        `json:"enabled"`
	IncludeRefused bool        `json:"includeRefused"`
	Description    string      `json:"description"`
	DisabledReason *string     `json:"disabledReason"`
	DisabledAt     *httpx.Time `json:"disabledAt"`
	CreatedAt      httpx.Time  `json:"createdAt"`
	UpdatedAt      httpx.Time  `json:"updatedAt"`
}

// ViewSubscription renders s for the API.
func ViewSubscription(s Subscription) SubscriptionView {
	v := SubscriptionView{ID: s.ID, URL: s.URL, Events: s.Events, DeploymentIDs: s.DeploymentIDs, Enabled: s.Enabled, IncludeRefused: s.IncludeRefused,
		Description: s.Description, CreatedAt: httpx.At(s.CreatedAt), UpdatedAt: httpx.At(s.UpdatedAt)}
	if v.Events == nil {
		v.Events = []string{}
	}
	if s.DisabledReason != "" {
		v.DisabledReason = &s.DisabledReason
	}
	if !s.DisabledAt.IsZero() {
		v.DisabledAt = &httpx.Time{Time: s.DisabledAt}
	}
	return v
}

// AttemptView is a delivery's last attempt as the API shows it.
type AttemptView struct {
	At        httpx.Time `json:"at"`
	Status    *int       `json:"status,omitempty"`
	LatencyMS int64      `json:"latencyMs"`
	Error     string     `json:"error,omitempty"`
	Excerpt   string     `json:"excerpt,omitempty"`
}

// DeliveryView is a delivery as the API shows it: never its body.
type DeliveryView struct {
	ID            string       `json:"id"`
	EventID       string       `json:"eventId"`
	Type          string       `json:"type"`
	Sequence      int64        `json:"sequence"`
	Status        string       `json:"status"`
	Attempts      int          `json:"attempts"`
	CreatedAt     httpx.Time   `json:"createdAt"`
	NextAttemptAt *httpx.Time  `json:"nextAttemptAt,omitempty"`
	FinishedAt    *httpx.Time  `json:"finishedAt,omitempty"`
	LastAttempt   *AttemptView `json:"lastAttempt,omitempty"`
}

// ViewDelivery renders d for the API.
func ViewDelivery(d Delivery) DeliveryView {
	v := DeliveryView{ID: d.ID, EventID: d.EventID, Type: d.Type, Sequence: d.Seq, Status: d.Status, Attempts: d.Attempts, CreatedAt: httpx.At(d.CreatedAt)}
	if d.Status == StatusPending && !d.Due.IsZero() {
		v.NextAttemptAt = &httpx.Time{Time: d.Due}
	}
	if d.Status != StatusPending && !d.DoneAt.IsZero() {
		v.FinishedAt = &httpx.Time{Time: d.DoneAt}
	}
	if a := d.Last; a != nil {
		v.LastAttempt = &AttemptView{At: httpx.At(a.At), LatencyMS: a.LatencyMS, Error: a.Error, Excerpt: a.Excerpt}
		if a.Status != 0 {
			st := a.Status
			v.LastAttempt.Status = &st
		}
	}
	return v
}

type createdView struct {
	SubscriptionView
	Secret string `json:"secret"`
}

type rotatedView struct {
	Secret                  string      `json:"secret"`
	PreviousSecretExpiresAt *httpx.Time `json:"previousSecretExpiresAt"`
}

func encodeResponse(_ context.Context, w http.ResponseWriter, resp any) error {
	switch v := resp.(type) {
	case Created:
		httpx.WriteJSON(w, http.StatusCreated, createdView{SubscriptionView: ViewSubscription(v.Subscription), Secret: v.SecretText})
	case Rotated:
		out := rotatedView{Secret: v.SecretText}
		if !v.PrevUntil.IsZero() {
			out.PreviousSecretExpiresAt = &httpx.Time{Time: v.PrevUntil}
		}
		httpx.WriteJSON(w, http.StatusOK, out)
	case Subscription:
		httpx.WriteJSON(w, http.StatusOK, ViewSubscription(v))
	case httpx.Page[Subscription]:
		items := make([]SubscriptionView, len(v.Items))
		for i, s := range v.Items {
			items[i] = ViewSubscription(s)
		}
		httpx.WriteJSON(w, http.StatusOK, httpx.Page[SubscriptionView]{Items: items, PageInfo: v.PageInfo})
	case httpx.Page[Delivery]:
		items := make([]DeliveryView, len(v.Items))
		for i, d := range v.Items {
			items[i] = ViewDelivery(d)
		}
		httpx.WriteJSON(w, http.StatusOK, httpx.Page[DeliveryView]{Items: items, PageInfo: v.PageInfo})
	case pingResult:
		httpx.WriteJSON(w, http.StatusAccepted, ViewDelivery(v.Delivery))
	case deleted:
		w.WriteHeader(http.StatusNoContent)
	default:
		return httpx.EncodeResponse(context.Background(), w, resp)
	}
	return nil
}
