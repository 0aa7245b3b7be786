package audit

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/devstack"
)

// nominalWait is the wait after failure n+1 (n from 0) without jitter.
func nominalWait(n int) time.Duration {
	return min(time.Duration(float64(retryFirstWait)*math.Pow(retryGrowth, float64(n))), retryMaxWait)
}

// Every wait lies within ±50% of its nominal wait, so none is longer than 7.5 s, and the
// draws spread across that range: two schedules are not the same.
func TestIngestRetryWaitsAreJitteredAndBounded(t *testing.T) {
	const schedules, attempts = 200, 20
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	distinct := map[time.Duration]bool{}
	for s := range schedules {
		b := retryBackOff()
		for n := range attempts {
			w, nom := b.NextBackOff(), nominalWait(n)
			if w < nom/2 || w > nom*3/2+1 || w > retryMaxWait*3/2+1 {
				t.Fatalf("schedule %d, wait %d: %v, want within ±50%% of %v", s, n, w, nom)
			}
			if n == attempts-1 {
				lo, hi = min(lo, w), max(hi, w)
				distinct[w] = true
			}
		}
	}
	// 200 uniform draws over [2.5s, 7.5s] cover most of it.
	if hi-lo < 4*time.Second || len(distinct) < schedules/2 {
		t.Fatalf("the longest waits span %v..%v, %d distinct of %d: not jittered", lo, hi, len(distinct), schedules)
	}
}

// retries records when a Run logged each failure to set the stream up.
type retries struct {
	mu    sync.Mutex
	times []time.Time
}

func (r *retries) Enabled(context.Context, slog.Level) bool { return true }
func (r *retries) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *retries) WithGroup(string) slog.Handler            { return r }
func (r *retries) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == "audit ingest: stream unavailable; retrying" {
		r.mu.Lock()
		r.times = append(r.times, rec.Time)
		r.mu.Unlock()
	}
	return nil
}

func (r *retries) gaps() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(r.times); i++ {
		g = append(g, r.times[i].Sub(r.times[i-1]))
	}
	return g
}

// Two ingesters that lose NATS at the same moment set the stream up again after waits
// that grow within their bounds and differ from one replica to the other.
func TestIngestersThatLoseNATSTogetherDoNotRetryInLockstep(t *testing.T) {
	n := devstack.NATSForTest(t)
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close() // every set-up fails at once: connection closed
	ctx, cancel := context.WithTimeout(context.Background(), 1600*time.Millisecond)
	defer cancel()
	logs := []*retries{{}, {}}
	var wg sync.WaitGroup
	for _, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			NewIngester(IngesterOptions{NATS: nc, Logger: slog.New(l)}).Run(ctx)
		}()
	}
	wg.Wait()
	gaps := [][]time.Duration{logs[0].gaps(), logs[1].gaps()}
	for r, g := range gaps {
		if len(g) < 3 {
			t.Fatalf("replica %d: %d retries in 1.6s", r, len(g))
		}
		for i, d := range g {
			if d > nominalWait(i)*3/2+200*time.Millisecond {
				t.Errorf("replica %d, wait %d: %v, want at most 1.5 × %v", r, i, d, nominalWait(i))
			}
		}
	}
	apart := false
	for i := range min(len(gaps[0]), len(gaps[1])) {
		if (gaps[0][i] - gaps[1][i]).Abs() > 5*time.Millisecond {
			apart = true
		}
	}
	if !apart {
		t.Fatalf("the replicas waited the same before every retry: %v and %v", gaps[0], gaps[1])
	}
}
