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

// keyDirectory has no keys until one is added, and counts API key lookups.
type keyDirectory struct {
	lookups atomic.Int64
	key     *store.APIKey
	changed []string
}

func (d *keyDirectory) Account(context.Context, int64) (store.Account, error) {
	return store.Account{}, store.ErrNotFound
}
func (d *keyDirectory) Deployment(context.Context, int64) (store.Deployment, error) {
	return store.Deployment{}, store.ErrNotFound
}
func (d *keyDirectory) User(context.Context, int64) (store.User, error) {
	return store.User{}, store.ErrNotFound
}
func (d *keyDirectory) UserByUsername(context.Context, int64, string) (store.User, error) {
	return store.User{}, store.ErrNotFound
}
func (d *keyDirectory) APIKey(_ context.Context, id string) (store.APIKey, error) {
	d.lookups.Add(1)
	if d.key != nil && d.key.ID == id {
		return *d.key, nil
	}
	return store.APIKey{}, store.ErrNotFound
}
func (d *keyDirectory) ChangedSince(context.Context, time.Time) (store.Changes, error) {
	return store.Changes{Keys: d.changed}, nil
}

// Well-formed unknown API keys must not each cost an identity-store query. A miss is
// remembered for MissingKeyTTL, and forgotten as soon as the change poller sees the key
// created.
func TestUnknownAPIKeyIdsAreNegativeCached(t *testing.T) {
	dir := &keyDirectory{}
	a := New(Options{Directory: dir})
	keyID, raw, hash := credentials.NewAPIKey()
	for i := 0; i < 100; i++ {
		if _, err := a.APIKey(context.Background(), raw); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("unknown key: %v", err)
		}
	}
	if got := dir.lookups.Load(); got != 1 {
		t.Fatalf("100 requests with one unknown key made %d identity-store lookups, want 1", got)
	}
	// The key is created: the poller reports it, and the next request finds it.
	dir.key = &store.APIKey{ID: keyID, SecretHash: hash}
	dir.changed = []string{keyID}
	if err := a.Evict(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.APIKey(context.Background(), raw); errors.Is(err, ErrUnauthenticated) && err.Error() == "unauthenticated: unknown API key" {
		t.Fatalf("a key created after a miss is still refused once the poller saw it: %v", err)
	}
	if got := dir.lookups.Load(); got != 2 {
		t.Fatalf("lookups = %d, want 2 (the miss was forgotten)", got)
	}
}
