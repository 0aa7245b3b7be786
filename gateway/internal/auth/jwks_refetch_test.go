package auth

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Tokens naming unknown kids must not each start a JWKS fetch while the endpoint fails.
// Concurrent refetches are merged, a failing endpoint is not asked
// again within minRefresh, and the wait doubles with each failure.
func TestUnknownKidRefetchesAreMergedAndBackedOff(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		time.Sleep(50 * time.Millisecond)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ks := NewKeySet(nil, srv.URL).WithMinRefresh(time.Second)
	token := &jwt.Token{Header: map[string]any{"kid": "made-up"}}
	flood := func() {
		var wg sync.WaitGroup
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = ks.Keyfunc(token) }()
		}
		wg.Wait()
	}
	flood()
	if got := hits.Load(); got != 1 {
		t.Fatalf("100 concurrent unknown kids made %d JWKS fetches, want 1", got)
	}
	flood()
	if got := hits.Load(); got != 1 {
		t.Fatalf("a flood right after a failed fetch made %d more fetches, want none", got-1)
	}
	time.Sleep(1200 * time.Millisecond) // past minRefresh, but one failure doubles the wait
	flood()
	if got := hits.Load(); got != 1 {
		t.Fatalf("after one failure the wait is 2 x minRefresh; got %d fetches", got)
	}
	time.Sleep(1000 * time.Millisecond)
	flood()
	if got := hits.Load(); got != 2 {
		t.Fatalf("after the backoff one more fetch is allowed; got %d fetches", got)
	}
}
