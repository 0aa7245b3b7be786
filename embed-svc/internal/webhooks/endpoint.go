package webhooks

import (
	"context"

	"github.com/go-kit/kit/endpoint"
)

// Endpoints are the API's go-kit endpoints.
type Endpoints struct {
	Create, List, Get, Update, Delete, RotateSecret, ListDeliveries, Redeliver, Ping endpoint.Endpoint
}

// The answers that are not a subscription or a page.
type (
	deleted    struct{}
	pingResult struct{ Delivery }
)

// MakeEndpoints adapts s.
func MakeEndpoints(s Service) Endpoints {
	return Endpoints{
		Create: func(ctx context.Context, req any) (any, error) {
			r := req.(createRequest)
			return s.Create(ctx, r.P, r.In)
		},
		List: func(ctx context.Context, req any) (any, error) {
			r := req.(listRequest)
			return s.List(ctx, r.P, r.First, r.After)
		},
		Get: func(ctx context.Context, req any) (any, error) {
			r := req.(idRequest)
			return s.Get(ctx, r.P, r.ID)
		},
		Update: func(ctx context.Context, req any) (any, error) {
			r := req.(updateRequest)
			return s.Update(ctx, r.P, r.ID, r.Patch)
		},
		Delete: func(ctx context.Context, req any) (any, error) {
			r := req.(idRequest)
			return deleted{}, s.Delete(ctx, r.P, r.ID)
		},
		RotateSecret: func(ctx context.Context, req any) (any, error) {
			r := req.(idRequest)
			return s.RotateSecret(ctx, r.P, r.ID)
		},
		ListDeliveries: func(ctx context.Context, req any) (any, error) {
			r := req.(deliveriesRequest)
			return s.ListDeliveries(ctx, r.P, r.ID, r.Q)
		},
		Redeliver: func(ctx context.Context, req any) (any, error) {
			r := req.(redeliverRequest)
			d, err := s.Redeliver(ctx, r.P, r.ID, r.DeliveryID)
			return pingResult{d}, err
		},
		Ping: func(ctx context.Context, req any) (any, error) {
			r := req.(idRequest)
			d, err := s.Ping(ctx, r.P, r.ID)
			return pingResult{d}, err
		},
	}
}
