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

// SetSubscriptionCountForTest stores an account document holding its subscription
// count alone, as creating a subscription leaves it.
func (m *Mongo) SetSubscriptionCountForTest(ctx context.Context, account int64, n int) error {
	_, err := m.accounts.InsertOne(ctx, map[string]any{"_id": account, subsField: n})
	return err
}
