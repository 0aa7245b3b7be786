// Package idemtest is the contract every idempotency.Store keeps, run against the memory
// store and against MongoStore on a real server (in the services' store tests).
package idemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/idempotency"
)

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// RunStoreContract runs the contract against s.
func RunStoreContract(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	scope := func() idempotency.Scope {
		return idempotency.Scope{Account: unique("a"), Credential: "key:" + unique("k"), Key: unique("idem-")}
	}
	t.Run("the first claim wins and the others see it running", func(t *testing.T) {
		sc := scope()
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, running := 0, 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, rec, err := s.Claim(ctx, sc, now, now.Add(time.Minute), now.Add(time.Hour))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("Claim: %v", err)
				case c != nil:
					won++
				case rec != nil && rec.Running:
					running++
				}
			}()
		}
		wg.Wait()
		if won != 1 || running != 7 {
			t.Fatalf("won %d, saw running %d; want 1 and 7", won, running)
		}
	})
	t.Run("a completed answer is returned to the next claim", func(t *testing.T) {
		sc := scope()
		c, _, err := s.Claim(ctx, sc, now, now.Add(time.Minute), now.Add(time.Hour))
		if err != nil || c == nil {
			t.Fatalf("Claim: %v, %v", c, err)
		}
		a := idempotency.Answer{Status: 201, Header: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"id":1}`)}
		if err := s.Complete(ctx, c, []byte("fp"), a); err != nil {
			t.Fatal(err)
		}
		c2, rec, err := s.Claim(ctx, sc, now.Add(time.Second), now.Add(time.Minute), now.Add(time.Hour))
		if err != nil || c2 != nil || rec == nil {
			t.Fatalf("second Claim = %v, %v, %v; want the record", c2, rec, err)
		}
		if rec.Running || rec.Answer.Status != 201 || !bytes.Equal(rec.Answer.Body, a.Body) || rec.Answer.Header["Content-Type"] != "application/json" || string(rec.Fingerprint) != "fp" {
			t.Fatalf("record = %+v", rec)
		}
	})
	t.Run("another credential or account has its own key", func(t *testing.T) {
		sc := scope()
		if c, _, _ := s.Claim(ctx, sc, now, now.Add(time.Minute), now.Add(time.Hour)); c == nil {
			t.Fatal("no claim")
		}
		other := sc
		other.Credential = "user:7"
		if c, _, err := s.Claim(ctx, other, now, now.Add(time.Minute), now.Add(time.Hour)); c == nil || err != nil {
			t.Fatalf("another credential's claim = %v, %v", c, err)
		}
		other = sc
		other.Account = unique("b")
		if c, _, err := s.Claim(ctx, other, now, now.Add(time.Minute), now.Add(time.Hour)); c == nil || err != nil {
			t.Fatalf("another account's claim = %v, %v", c, err)
		}
	})
	t.Run("a lapsed lease is taken over and the old claim is lost", func(t *testing.T) {
		sc := scope()
		old, _, _ := s.Claim(ctx, sc, now, now.Add(time.Second), now.Add(time.Hour))
		later := now.Add(2 * time.Second)
		c, rec, err := s.Claim(ctx, sc, later, later.Add(time.Minute), later.Add(time.Hour))
		if err != nil || c == nil {
			t.Fatalf("takeover = %v, %v, %v", c, rec, err)
		}
		if err := s.Complete(ctx, old, []byte("x"), idempotency.Answer{Status: 200}); err != idempotency.ErrClaimLost {
			t.Fatalf("old claim's Complete = %v, want ErrClaimLost", err)
		}
		if err := s.Renew(ctx, c, later.Add(2*time.Minute)); err != nil {
			t.Fatalf("Renew: %v", err)
		}
	})
	t.Run("an expired record is taken over", func(t *testing.T) {
		sc := scope()
		c, _, _ := s.Claim(ctx, sc, now, now.Add(time.Second), now.Add(2*time.Second))
		_ = s.Complete(ctx, c, []byte("fp"), idempotency.Answer{Status: 200})
		later := now.Add(3 * time.Second)
		if c, rec, err := s.Claim(ctx, sc, later, later.Add(time.Minute), later.Add(time.Hour)); c == nil || err != nil {
			t.Fatalf("claim after expiry = %v, %v, %v", c, rec, err)
		}
	})
	t.Run("a released key is free", func(t *testing.T) {
		sc := scope()
		c, _, _ := s.Claim(ctx, sc, now, now.Add(time.Minute), now.Add(time.Hour))
		if err := s.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		if c, _, err := s.Claim(ctx, sc, now, now.Add(time.Minute), now.Add(time.Hour)); c == nil || err != nil {
			t.Fatalf("claim after release = %v, %v", c, err)
		}
	})
	t.Run("usage sums the window's hourly buckets", func(t *testing.T) {
		acct := unique("u")
		base := now.Truncate(time.Hour)
		for i, at := range []time.Time{base.Add(-30 * time.Hour), base.Add(-5 * time.Hour), base.Add(time.Minute)} {
			if _, err := s.Use(ctx, acct, at, 24*time.Hour, 1, int64(10*(i+1))); err != nil {
				t.Fatal(err)
			}
		}
		u, err := s.Use(ctx, acct, base.Add(2*time.Minute), 24*time.Hour, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if u.Records != 2 || u.Bytes != 50 {
			t.Fatalf("usage = %+v, want 2 records and 50 bytes (the bucket 30 h ago is outside)", u)
		}
	})
}
