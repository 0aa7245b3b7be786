package mongox

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// RetryUnavailable runs f until it succeeds, fails for another reason than an unreachable
// database, or within has passed: what a service does at start-up with its indexes, since
// replicas starting together race to create the same ones (FerretDB answers the loser by
// dropping its connection; the next attempt finds the indexes in place) and the database
// may come up after the service. The waits between attempts follow retryBackOff, cut
// short at within, so the last attempt runs when within ends.
func RetryUnavailable(ctx context.Context, within time.Duration, f func(context.Context) error) error {
	deadline := time.Now().Add(within)
	b := retryBackOff()
	for {
		err := f(ctx)
		left := time.Until(deadline)
		if err == nil || !Unavailable(err) || left <= 0 {
			return err
		}
		t := time.NewTimer(min(b.NextBackOff(), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// The waits between attempts grow from retryFirstWait by half each attempt up to
// retryMaxWait, each drawn at random within retryJitter of that (±50%): replicas that
// failed together do not retry together.
const (
	retryFirstWait = 100 * time.Millisecond
	retryGrowth    = 1.5
	retryMaxWait   = 2 * time.Second
	retryJitter    = 0.5
)

func retryBackOff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: retryFirstWait, RandomizationFactor: retryJitter, Multiplier: retryGrowth, MaxInterval: retryMaxWait}
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
