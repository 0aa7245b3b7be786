// Package fairshare bounds how many requests of one account a replica runs at once on a
// service's expensive routes, so that one account's flood queues behind its own bound
// instead of in front of every other account's requests.
//
// The bound is per replica: an account may have bound × replicas requests of a class in
// flight across a service. A request past it is refused before its body is read,
// 429 concurrency_limit with Retry-After.
package fairshare

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/obs"
)

// RetryAfter is the Retry-After of a refusal, in seconds: requests of these routes take
// tens of milliseconds to seconds, so one of the account's own frees a place soon.
const RetryAfter = "1"

// Limiter counts, per route class and account, the requests in flight. An entry exists
// only while its count is above zero, so the map holds at most as many entries as the
// replica has requests in flight; acquire and release are one map operation each under
// one mutex.
type Limiter struct {
	max     int
	mu      sync.Mutex
	flight  map[key]int
	refused *prometheus.CounterVec // by class only: label values never come from a client
}

type key struct {
	class   string
	account int64
}

// New returns a limiter of max requests in flight per account and route class (max <= 0:
// no bound); its refusals are counted on reg (nil: not registered) as
// <service>_fairshare_refusals_total{class}. A refusal names the bound and its value,
// never the operator's setting behind it.
func New(reg prometheus.Registerer, service string, max int) *Limiter {
	l := &Limiter{max: max, flight: map[key]int{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: obs.MetricPrefix(service) + "_fairshare_refusals_total",
			Help: "Requests refused 429 concurrency_limit because their account had its bound of requests of the route class in flight on this replica, by route class.",
		}, []string{"class"})}
	if reg != nil {
		reg.MustRegister(l.refused)
	}
	return l
}

// Acquire takes a place for account in class; ok false when the account has its bound
// in flight. release gives the place back; calling it more than once is harmless.
func (l *Limiter) Acquire(class string, account int64) (release func(), ok bool) {
	if l == nil || l.max <= 0 {
		return func() {}, true
	}
	k := key{class, account}
	l.mu.Lock()
	n := l.flight[k]
	if n >= l.max {
		l.mu.Unlock()
		l.refused.WithLabelValues(class).Inc()
		return nil, false
	}
	l.flight[k] = n + 1
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.flight[k] <= 1 {
				delete(l.flight, k)
			} else {
				l.flight[k]--
			}
			l.mu.Unlock()
		})
	}, true
}

// InFlight is what account has in flight in class.
func (l *Limiter) InFlight(class string, account int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flight[key{class, account}]
}

// Entries is the number of (class, account) pairs with requests in flight.
func (l *Limiter) Entries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.flight)
}

// Refusals is the refusal counter of class.
func (l *Limiter) Refusals(class string) prometheus.Counter { return l.refused.WithLabelValues(class) }

// Max is the bound (<= 0: none).
func (l *Limiter) Max() int { return l.max }

// Guard returns the middleware of one route class: it reads the account of the verified
// principal (identity.Require runs first) and refuses the request past the bound before
// next has read a byte of its body. The place is released when next returns, by panic or
// because the client went away included. A request without a principal passes: the
// identity middleware answers those.
func (l *Limiter) Guard(class string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if l == nil || l.max <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := identity.FromContext(r.Context())
			if p == nil {
				next.ServeHTTP(w, r)
				return
			}
			release, ok := l.Acquire(class, p.Account.ID)
			if !ok {
				w.Header().Set("Retry-After", RetryAfter)
				errs.WriteBody(w, http.StatusTooManyRequests, errs.CodeConcurrencyLimit,
					fmt.Sprintf("account %d has %d %s requests in flight on this replica, the most it may run at once; retry in %s second",
						p.Account.ID, l.max, class, RetryAfter))
				return
			}
			defer release()
			next.ServeHTTP(w, r)
		})
	}
}
