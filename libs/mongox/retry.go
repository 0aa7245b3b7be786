package mongox

import (
	"context"
	"time"
)

// RetryUnavailable runs f until it succeeds, fails for another reason than an unreachable
// database, or within has passed: what a service does at start-up with its indexes, since
// replicas starting together race to create the same ones (FerretDB answers the loser by
// dropping its connection; the next attempt finds the indexes in place) and the database
// may come up after the service.
func RetryUnavailable(ctx context.Context, within time.Duration, f func(context.Context) error) error {
	deadline := time.Now().Add(within)
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil || !Unavailable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
}

// IndexWait is how long a starting service waits for its indexes: the database may come
// up after it, and replicas starting together race to create the same indexes.
const IndexWait = 30 * time.Second

// EnsureIndexes runs each of ensure (a store's EnsureIndexes) with RetryUnavailable for
// up to within: how every service creates its indexes at start-up.
func EnsureIndexes(ctx context.Context, within time.Duration, ensure ...func(context.Context) error) error {
	for _, f := range ensure {
		if err := RetryUnavailable(ctx, within, f); err != nil {
			return err
		}
	}
	return nil
}
