package mongox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/mongox"
)

func TestUnavailable(t *testing.T) {
	cleared := errors.New("connection pool for 127.0.0.1:40489 was cleared because another operation failed with: connection(127.0.0.1:40489[-3]) incomplete read of message header: EOF")
	for _, err := range []error{context.DeadlineExceeded, mongox.ErrUnavailable, fmt.Errorf("find: %w", cleared), cleared} {
		if !mongox.Unavailable(err) {
			t.Errorf("%v: want unavailable", err)
		}
	}
	for _, err := range []error{nil, errors.New("E11000 duplicate key"), errors.New("bad query")} {
		if mongox.Unavailable(err) {
			t.Errorf("%v: want not unavailable", err)
		}
	}
}

// EnsureIndexes retries a store whose database is unreachable until it answers, stops
// at an error of another kind, and runs every store's EnsureIndexes in turn.
func TestEnsureIndexesRetriesOnlyWhileUnavailable(t *testing.T) {
	ctx := context.Background()
	calls := 0
	flaky := func(context.Context) error {
		if calls++; calls < 3 {
			return fmt.Errorf("create index: %w", mongox.ErrUnavailable)
		}
		return nil
	}
	other := 0
	second := func(context.Context) error { other++; return nil }
	if err := mongox.EnsureIndexes(ctx, 10*time.Second, flaky, second); err != nil || calls != 3 || other != 1 {
		t.Fatalf("err %v after %d calls of the flaky store and %d of the second; want nil, 3, 1", err, calls, other)
	}
	bad := errors.New("index options conflict")
	calls = 0
	broken := func(context.Context) error { calls++; return bad }
	if err := mongox.EnsureIndexes(ctx, 10*time.Second, broken, second); !errors.Is(err, bad) || calls != 1 || other != 1 {
		t.Fatalf("a refused index: err %v after %d calls, second store run %d times; want the error at once, second not run", err, calls, other)
	}
}
