package webhookstore

import (
	"context"

	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
)

// InsertSubscriptionForTest stores s as it is (the API's create checks limits first).
func (m *Mongo) InsertSubscriptionForTest(ctx context.Context, s webhooks.Subscription) error {
	_, err := m.subs.InsertOne(ctx, s)
	return err
}
