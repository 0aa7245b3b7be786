// Package ratelimit limits requests per credential across every gateway replica, with
// fixed windows counted in Redis: one round trip per limited request.
package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limit is N requests per Window; a zero Limit is no limit.
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
	if !ok || err != nil || count < 0 {
		return Limit{}, fmt.Errorf("rate limit %q: want N/duration such as 600/1m, or 0", s)
	}
	window, err := time.ParseDuration(w)
	if err != nil || window < time.Second {
		return Limit{}, fmt.Errorf("rate limit %q: the window must be a duration of at least 1s", s)
	}
	return Limit{N: count, Window: window}, nil
}

// The window starts with the first request: INCR, and on the first one set its expiry.
var fixedWindow = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}
`)

// Limiter counts requests in Redis.
type Limiter struct {
	rdb    redis.Scripter
	prefix string
}

// New returns a limiter whose keys start with prefix.
func New(rdb redis.Scripter, prefix string) *Limiter { return &Limiter{rdb: rdb, prefix: prefix} }

// Decision is the outcome of one request against a limit.
type Decision struct {
	Allowed    bool
	Remaining  int64
	RetryAfter time.Duration // until the window resets
}

// Allow counts one request of key against limit; an error (Redis unavailable) comes
// with a Decision that does not allow.
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Decision, error) {
	if !limit.Enabled() {
		return Decision{Allowed: true, Remaining: -1}, nil
	}
	res, err := fixedWindow.Run(ctx, l.rdb, []string{l.prefix + key}, limit.Window.Milliseconds()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("the counter script answered %d values", len(res))
	}
	if err != nil {
		// Not counted: the caller refuses (a limit that cannot be checked is not lifted).
		return Decision{}, fmt.Errorf("rate limit: %w", err)
	}
	n, ttl := res[0], time.Duration(res[1])*time.Millisecond
	d := Decision{Allowed: n <= limit.N, Remaining: max(limit.N-n, 0), RetryAfter: ttl}
	return d, nil
}
