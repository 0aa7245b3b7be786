package webhooks

import (
	"context"
	"net/http"
	"net/url"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
)

// auditingMiddleware records every change of state the API makes, refused or not, in
// the audit trail (embed.webhook.*). A URL is recorded by its host only: its path or
// query may carry a receiver's token.
func auditingMiddleware(rec audit.Recorder) func(Service) Service {
	if rec == nil {
		return nil
	}
	return func(next Service) Service { return &auditing{Service: next, rec: rec} }
}

type auditing struct {
	Service
	rec audit.Recorder
}

func target(id string) audit.Target { return audit.Target{Type: TargetWebhook, ID: id} }

// urlHost is the host of a URL as the trail records it ("" when there is none).
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

func subscriptionDetails(d map[string]any, s Subscription) {
	d["host"], d["events"], d["enabled"], d["includeRefused"] = urlHost(s.URL), s.Events, s.Enabled, s.IncludeRefused
	if s.DeploymentIDs != nil {
		d["deploymentIds"] = s.DeploymentIDs
	}
}

func (a *auditing) Create(ctx context.Context, p *identity.Principal, in Input) (Created, error) {
	out, err := a.Service.Create(ctx, p, in)
	d := map[string]any{}
	if err == nil {
		subscriptionDetails(d, out.Subscription)
	} else {
		d["host"], d["events"] = urlHost(in.URL), in.Events
	}
	audit.Record(ctx, a.rec, p, ActionCreate, target(out.ID), err, http.StatusCreated, d)
	return out, err
}

func (a *auditing) Update(ctx context.Context, p *identity.Principal, id string, patch Patch) (Subscription, error) {
	out, err := a.Service.Update(ctx, p, id, patch)
	d := map[string]any{}
	if err == nil {
		subscriptionDetails(d, out)
	}
	audit.Record(ctx, a.rec, p, ActionUpdate, target(id), err, http.StatusOK, d)
	return out, err
}

func (a *auditing) Delete(ctx context.Context, p *identity.Principal, id string) error {
	err := a.Service.Delete(ctx, p, id)
	audit.Record(ctx, a.rec, p, ActionDelete, target(id), err, http.StatusNoContent, nil)
	return err
}

func (a *auditing) RotateSecret(ctx context.Context, p *identity.Principal, id string) (Rotated, error) {
	out, err := a.Service.RotateSecret(ctx, p, id)
	var d map[string]any
	if err == nil {
		d = map[string]any{"previousSecretExpiresAt": out.PrevUntil.UTC().Format("2006-01-02T15:04:05.000Z")}
	}
	audit.Record(ctx, a.rec, p, ActionRotate, target(id), err, http.StatusOK, d)
	return out, err
}

func (a *auditing) Redeliver(ctx context.Context, p *identity.Principal, id, deliveryID string) (Delivery, error) {
	out, err := a.Service.Redeliver(ctx, p, id, deliveryID)
	audit.Record(ctx, a.rec, p, ActionRedeliver, target(id), err, http.StatusAccepted, map[string]any{"deliveryId": deliveryID})
	return out, err
}

func (a *auditing) Ping(ctx context.Context, p *identity.Principal, id string) (Delivery, error) {
	out, err := a.Service.Ping(ctx, p, id)
	var d map[string]any
	if err == nil {
		d = map[string]any{"deliveryId": out.ID, "eventId": out.EventID}
	}
	audit.Record(ctx, a.rec, p, ActionPing, target(id), err, http.StatusAccepted, d)
	return out, err
}
