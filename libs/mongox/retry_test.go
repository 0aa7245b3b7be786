package mongox

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

// nominalWait is the wait before attempt n+1 (n from 0) without jitter.
func nominalWait(n int) time.Duration {
	return min(time.Duration(float64(retryFirstWait)*math.Pow(retryGrowth, float64(n))), retryMaxWait)
}

// Every wait lies within ±50% of its attempt's nominal wait, the longest at most 1.5 times
// retryMaxWait, and the draws spread across that range: two schedules are not the same.
func TestRetryWaitsAreJitteredAndBounded(t *testing.T) {
	const schedules, attempts = 200, 20
	first := make([]time.Duration, schedules)
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for s := range schedules {
		b := retryBackOff()
		for n := range attempts {
			w, nom := b.NextBackOff(), nominalWait(n)
			if w < nom/2 || w > nom*3/2+1 || w > retryMaxWait*3/2+1 {
				t.Fatalf("schedule %d, wait %d: %v, want within ±50%% of %v", s, n, w, nom)
			}
			if n == 0 {
				first[s] = w
				lo, hi = min(lo, w), max(hi, w)
			}
		}
	}
	// 200 uniform draws over [50ms, 150ms] cover most of it.
	if hi-lo < 80*time.Millisecond {
		t.Fatalf("first waits span only %v..%v: not jittered", lo, hi)
	}
	distinct := map[time.Duration]bool{}
	for _, w := range first {
		distinct[w] = true
	}
	if len(distinct) < schedules/2 {
		t.Fatalf("%d distinct first waits of %d", len(distinct), schedules)
	}
}

// Two replicas that find the database unavailable at the same moment do not retry in
// lockstep; each keeps to its bounds, and stops once within has passed.
func TestReplicasRetryingTogetherDoNotRetryInLockstep(t *testing.T) {
	const within = 1500 * time.Millisecond
	var wg sync.WaitGroup
	times := make([][]time.Time, 2)
	start := time.Now()
	for r := range times {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := RetryUnavailable(context.Background(), within, func(context.Context) error {
				times[r] = append(times[r], time.Now())
				return ErrUnavailable
			})
			if err != ErrUnavailable {
				t.Errorf("replica %d: %v, want the last error", r, err)
			}
		}()
	}
	wg.Wait()
	if took := time.Since(start); took < within || took > within+500*time.Millisecond {
		t.Fatalf("retried for %v, want about %v", took, within)
	}
	apart := false
	for r, ts := range times {
		if len(ts) < 4 {
			t.Fatalf("replica %d: %d attempts in %v", r, len(ts), within)
		}
		for n := 1; n < len(ts); n++ {
			gap := ts[n].Sub(ts[n-1])
			if gap > nominalWait(n-1)*3/2+200*time.Millisecond {
				t.Errorf("replica %d, wait %d: %v, want at most 1.5 × %v", r, n-1, gap, nominalWait(n-1))
			}
		}
	}
	for n := 1; n < min(len(times[0]), len(times[1])); n++ {
		a, b := times[0][n].Sub(times[0][n-1]), times[1][n].Sub(times[1][n-1])
		if (a - b).Abs() > 5*time.Millisecond {
			apart = true
		}
	}
	if !apart {
		t.Fatalf("the replicas waited the same between every attempt: %v and %v", times[0], times[1])
	}
}

// A context ended during a wait ends the retries at once, with the last error.
func TestRetryUnavailableStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := RetryUnavailable(ctx, time.Minute, func(context.Context) error { return ErrUnavailable })
	if err != ErrUnavailable || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}
