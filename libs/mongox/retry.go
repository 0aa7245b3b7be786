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
