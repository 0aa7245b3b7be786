package auth

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/store"
)

// userDirectory is a keyDirectory whose key's user and account exist.
type userDirectory struct{ keyDirectory }

func (d *userDirectory) User(_ context.Context, id int64) (store.User, error) {
	return store.User{ID: id, AccountID: 1, Username: "u"}, nil
}
func (d *userDirectory) Account(_ context.Context, id int64) (store.Account, error) {
	return store.Account{ID: id}, nil
}

type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

// budgetOf grants n lookups and counts what it was asked.
func budgetOf(n int64, asked *atomic.Int64) LookupBudget {
	return func(context.Context) bool { return asked.Add(1) <= n }
}

// From a throttled address, a valid API key whose cache entry expired is looked up again
// (one lookup per key id per interval), whatever the address's budget: it was verified
// before. Within the interval it is ErrNotCached; after it, served again.
func TestThrottledRequestLooksAnExpiredKeyUpOncePerInterval(t *testing.T) {
	clock := &testClock{t: time.Unix(1_700_000_000, 0)}
	dir := &userDirectory{}
	keyID, raw, hash := credentials.NewAPIKey()
	dir.key = &store.APIKey{ID: keyID, SecretHash: hash, UserID: 7, AccountID: 1}
	a := New(Options{Directory: dir, CacheTTL: 30 * time.Second, Now: clock.now, ThrottledLookupInterval: time.Second})
	if _, err := a.APIKey(context.Background(), raw); err != nil {
		t.Fatalf("the key unthrottled: %v", err)
	}
	clock.t = clock.t.Add(31 * time.Second) // past the cache TTL
	var asked atomic.Int64
	throttled := Throttled(context.Background(), budgetOf(0, &asked))
	if _, err := a.APIKey(throttled, raw); err != nil {
		t.Fatalf("the key throttled, its cache entry expired: %v, want served", err)
	}
	if got := dir.lookups.Load(); got != 2 {
		t.Fatalf("lookups %d, want 2 (one unthrottled, one throttled)", got)
	}
	if asked.Load() != 0 {
		t.Fatalf("the budget was asked %d times for a key verified before", asked.Load())
	}
	// The poller evicts the key (it changed): within the interval, no second lookup.
	dir.changed = []string{keyID}
	if err := a.Evict(context.Background(), clock.t); err != nil {
		t.Fatal(err)
	}
	if _, err := a.APIKey(throttled, raw); !errors.Is(err, ErrNotCached) {
		t.Fatalf("again within the interval: %v, want ErrNotCached", err)
	}
	if got := dir.lookups.Load(); got != 2 {
		t.Fatalf("lookups %d within the interval, want 2", got)
	}
	clock.t = clock.t.Add(time.Second)
	if _, err := a.APIKey(throttled, raw); err != nil {
		t.Fatalf("after the interval: %v, want served", err)
	}
	if got := dir.lookups.Load(); got != 3 {
		t.Fatalf("lookups %d after the interval, want 3", got)
	}
}

// A guesser behind a throttled address naming new key ids costs the identity store what
// the address's budget grants, one lookup per id; each id found missing is remembered,
// and beyond the budget the ids are ErrNotCached without a lookup. A valid key this
// replica never verified is served within the budget.
func TestThrottledGuessesCostTheStoreTheBudgetOnly(t *testing.T) {
	clock := &testClock{t: time.Unix(1_700_000_000, 0)}
	dir := &userDirectory{}
	a := New(Options{Directory: dir, Now: clock.now})
	var asked atomic.Int64
	ctx := Throttled(context.Background(), budgetOf(3, &asked))
	var guesses []string
	for i := 0; i < 20; i++ {
		_, raw, _ := credentials.NewAPIKey()
		guesses = append(guesses, raw)
		_, err := a.APIKey(ctx, raw)
		switch {
		case i < 3 && !errors.Is(err, ErrUnauthenticated):
			t.Fatalf("guess %d within the budget: %v, want ErrUnauthenticated", i, err)
		case i >= 3 && !errors.Is(err, ErrNotCached):
			t.Fatalf("guess %d beyond the budget: %v, want ErrNotCached", i, err)
		}
	}
	if got := dir.lookups.Load(); got != 3 {
		t.Fatalf("20 guesses made %d identity-store lookups, want 3 (the budget)", got)
	}
	for _, raw := range guesses[:3] {
		if _, err := a.APIKey(ctx, raw); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("a guess remembered as missing: %v", err)
		}
	}
	if got := dir.lookups.Load(); got != 3 {
		t.Fatalf("repeated guesses made %d lookups, want still 3", got)
	}
	keyID, raw, hash := credentials.NewAPIKey()
	dir.key = &store.APIKey{ID: keyID, SecretHash: hash, UserID: 7, AccountID: 1}
	if _, err := a.APIKey(Throttled(context.Background(), budgetOf(1, new(atomic.Int64))), raw); err != nil {
		t.Fatalf("a valid key never verified here, within the budget: %v, want served", err)
	}
	clock.t = clock.t.Add(time.Hour)
	if _, err := a.APIKey(Throttled(context.Background(), budgetOf(0, new(atomic.Int64))), raw); err != nil {
		t.Fatalf("the same key after its cache entry expired, no budget left: %v, want served", err)
	}
}
