package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/libs/httpx"
)

// Failed authentications are counted twice, per client address and per credential
// (an API key's id, a bearer token's hash), each against AUTH_FAILURE_LIMIT. Past it the
// address or the credential is throttled, not locked out: its requests are still
// authenticated, and what verifies is served, so one client failing behind an office NAT
// does not lock the office's valid credentials out, nor can someone who knows a key's id
// lock its owner out. What fails is answered 429. From a throttled address an API key the
// caches do not hold is looked up at a bounded rate (auth.Throttled): once per key id and
// second on each replica, and a key id the replica has never verified only within the
// address's lookup budget, AUTH_FAILURE_LIMIT again, counted apart: there a guesser could
// name a new key id every time, each a query to the identity store. A throttled
// credential is one key id, whose record the caches hold after one query. The throttle
// is remembered in this replica; the counts are shared in Redis.

// failureKeys are the counters a failed authentication of r adds to: its client
// address, and its credential when it names one.
func (g *Gateway) failureKeys(r *h1.Request) (addr, cred string) {
	addr = "addr:" + g.clientAddr(r)
	scheme, value := credential(r)
	switch {
	case value == "":
	case scheme == "api-key":
		if id, _, ok := credentials.ParseAPIKey(value); ok {
			cred = "key:" + id
		}
	case scheme == "bearer":
		sum := sha256.Sum256([]byte(value))
		cred = "token:" + hex.EncodeToString(sum[:16])
	}
	return addr, cred
}

// authThrottle is why a request is throttled: until when, whom it names, and the
// failure counter of its address when that is what is throttled.
type authThrottle struct {
	until time.Time
	who   string
	addr  string
}

// authThrottled reports whether r's client address or credential is over the limit.
func (g *Gateway) authThrottled(r *h1.Request) (authThrottle, bool) {
	if g.blocked == nil || g.blocked.Len() == 0 {
		return authThrottle{}, false
	}
	addr, cred := g.failureKeys(r)
	now := time.Now()
	if until, ok := g.blocked.Get(addr); ok && now.Before(until) {
		return authThrottle{until: until, who: "this client address", addr: addr}, true
	}
	if until, ok := g.blocked.Get(cred); ok && cred != "" && now.Before(until) {
		return authThrottle{until: until, who: "this credential"}, true
	}
	return authThrottle{}, false
}

// countFailedAuth counts a failed authentication of r; it reports whether it answered
// instead of the 401: 429 when the address or the credential is now over the limit,
// 503 when the failure could not be counted (Redis unavailable: failures are never
// left uncounted).
func (g *Gateway) countFailedAuth(ctx context.Context, w *h1.ResponseWriter, r *h1.Request) bool {
	if g.blocked == nil || g.o.RateLimiter == nil {
		return false
	}
	addr, cred := g.failureKeys(r)
	var over *authThrottle
	for _, c := range [...]struct{ key, who string }{{addr, "this client address"}, {cred, "this credential"}} {
		key, who := c.key, c.who
		if key == "" {
			continue
		}
		d, err := g.o.RateLimiter.Allow(ctx, "authfail:"+key, g.o.AuthFailureLimit)
		if err != nil {
			g.o.Logger.WarnContext(ctx, "failed authentication not counted", "err", err)
			writeLimitUnavailable(w)
			return true
		}
		if !d.Allowed {
			until := time.Now().Add(d.RetryAfter)
			g.blocked.Put(key, until, until)
			if over == nil || until.After(over.until) {
				over = &authThrottle{until: until, who: who}
			}
		}
	}
	if over == nil {
		return false
	}
	g.writeAuthThrottled(w, *over)
	return true
}

func (g *Gateway) writeAuthThrottled(w *h1.ResponseWriter, t authThrottle) {
	secs := max(int64((time.Until(t.until)+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	httpx.WriteError(w, http.StatusTooManyRequests,
		fmt.Sprintf("more than %d failed authentications per %s with %s; only credentials that verify are served until it passes, in %d s",
			g.o.AuthFailureLimit.N, g.o.AuthFailureLimit.Window, t.who, secs))
}

// lookupBudget is the identity-store lookups a throttled address may cause with API key
// ids this replica has never verified: AUTH_FAILURE_LIMIT per window, counted in Redis
// across replicas apart from its failures. A budget that cannot be counted grants
// nothing.
func (g *Gateway) lookupBudget(addr string) auth.LookupBudget {
	return func(ctx context.Context) bool {
		d, err := g.o.RateLimiter.Allow(ctx, "authlookup:"+addr, g.o.AuthFailureLimit)
		if err != nil {
			g.o.Logger.WarnContext(ctx, "identity-store lookup of a throttled address not counted", "err", err)
			return false
		}
		return d.Allowed
	}
}

// writeLimitUnavailable answers a request whose limit could not be checked (Redis is
// unavailable): refused, never served unlimited.
func writeLimitUnavailable(w *h1.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	httpx.WriteError(w, http.StatusServiceUnavailable, "request limits cannot be checked right now (Redis unavailable); retry shortly")
}

// newBlockedClients is the bounded set of client addresses and credentials over the
// failure limit.
func newBlockedClients() *auth.Cache[string, time.Time] {
	return auth.NewCache[string, time.Time](100_000, time.Now)
}
