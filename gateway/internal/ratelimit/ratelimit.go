// Package ratelimit limits requests across every gateway replica with the generic cell
// rate algorithm (GCRA) of github.com/go-redis/redis_rate, kept in Redis: one key per
// decision (so it works on a Redis Cluster), one script call per decision, and every key
// expires by itself once its budget is whole again. It also writes the RateLimit and
// RateLimit-Policy header fields of draft-ietf-httpapi-ratelimit-headers-09.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Limit is N requests (quota units) per Window; a zero Limit is no limit. Under GCRA a
// full budget allows a burst of N, and it refills at N per Window.
type Limit struct {
	N      int64
	Window time.Duration
}

// Enabled reports whether the limit applies.
func (l Limit) Enabled() bool { return l.N > 0 && l.Window > 0 }

func (l Limit) String() string {
	if !l.Enabled() {
		return "0"
	}
	return fmt.Sprintf("%d/%s", l.N, l.Window)
}

// ParseLimit parses "600/1m" (N per duration); "0" or "" disables.
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return Limit{}, nil
	}
	n, w, ok := strings.Cut(s, "/")
	count, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || count < 0 || count > 1<<30 {
		return Limit{}, fmt.Errorf("rate limit %q: want N/duration such as 600/1m (N at most %d), or 0", s, 1<<30)
	}
	window, err := time.ParseDuration(w)
	if err != nil || window < time.Second || window > 24*time.Hour {
		return Limit{}, fmt.Errorf("rate limit %q: the window must be a duration from 1s to 24h", s)
	}
	return Limit{N: count, Window: window}, nil
}

// Limiter decides requests against limits, in Redis.
type Limiter struct {
	gcra   *redis_rate.Limiter
	prefix string
}

// New returns a limiter whose keys start with prefix (redis_rate puts "rate:" before
// it). Its decisions go through the client's blocking auto-pipeline: the decisions of
// concurrent requests share one write and one read on one connection (each still its
// own script call, atomic in Redis), where one round trip each would cost the gateway
// about as much CPU as the rest of a request. A lone request still flushes at once.
func New(rdb redis.UniversalClient, prefix string) *Limiter {
	var c redis.Cmdable = rdb
	if ap, err := rdb.AutoPipeline(); err == nil {
		c = ap
	}
	return &Limiter{gcra: redis_rate.NewLimiter(c), prefix: prefix}
}

// Decision is the outcome of one request against a limit.
type Decision struct {
	Allowed   bool
	Remaining int64
	// RetryAfter is how long until a request of the same cost would be allowed (zero
	// when allowed); ResetAfter how long until the budget is whole again.
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// Allow decides one request of cost 1.
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Decision, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN decides one request that costs cost quota units of key's budget under limit;
// a request that is refused spends nothing. An error (Redis unavailable) comes with a
// Decision that does not allow: the caller chooses whether to refuse or serve.
func (l *Limiter) AllowN(ctx context.Context, key string, limit Limit, cost int64) (Decision, error) {
	if !limit.Enabled() {
		return Decision{Allowed: true, Remaining: -1}, nil
	}
	cost = max(cost, 1)
	res, err := l.gcra.AllowN(ctx, l.prefix+key, redis_rate.Limit{Rate: int(limit.N), Burst: int(limit.N), Period: limit.Window}, int(cost))
	if err != nil {
		return Decision{}, fmt.Errorf("rate limit: %w", err)
	}
	d := Decision{Allowed: res.Allowed > 0, ResetAfter: max(res.ResetAfter, 0)}
	// What is left, from the time until the budget is whole (a refused request spent
	// nothing, so a cheaper one may still fit): the script's own count is 0 when refused,
	// and truncated from a float, one short whenever the interval is not a whole number
	// of seconds (100/1m: 98 left after the first request).
	spent := d.ResetAfter.Seconds() * float64(limit.N) / limit.Window.Seconds()
	d.Remaining = min(max(int64(math.Floor(float64(limit.N)-spent+1e-6)), 0), limit.N)
	if !d.Allowed {
		d.RetryAfter = max(res.RetryAfter, 0)
		if cost > limit.N {
			// Never allowed: the whole window is the honest wait.
			d.RetryAfter = limit.Window
		}
	}
	return d, nil
}

// Status is a policy's decision for one request, as the header fields tell it.
type Status struct {
	Policy string // the policy's name, a token: "account", "embed", "exchange"
	Limit  Limit
	Decision
}

// Seconds rounds d up to whole seconds (at least 1 when d > 0).
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// PolicyHeader is the RateLimit-Policy field of the statuses: `"account";q=600;w=60`,
// a list when there are several.
func PolicyHeader(st ...Status) string {
	b := make([]byte, 0, 32*len(st))
	for i, s := range st {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, s.Policy)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, s.Limit.N, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, Seconds(s.Limit.Window), 10)
	}
	return string(b)
}

// Header is the RateLimit field of the statuses: `"account";r=42;t=18`, r the quota
// units left and t the seconds until the budget is whole again.
func Header(st ...Status) string {
	b := make([]byte, 0, 32*len(st))
	for i, s := range st {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, s.Policy)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, s.Remaining, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, Seconds(s.ResetAfter), 10)
	}
	return string(b)
}
