package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The policies a request spends, each a budget of its own in Redis (docs/rate-limits.md).
const (
	policyNameAccount         = "account"          // bearer tokens and API keys of an account
	policyNameEmbed           = "embed"            // embed session tokens of an account
	policyNameGenerateSession = "generate-session" // per API key
	policyNameExchange        = "exchange"         // per client address
	policyNameDbtWebhook      = "dbt-webhook"      // dbt push webhooks, per deployment
)

// budgetPause is how long the account budgets go unchecked after a decision failed
// (Redis unreachable).
const budgetPause = time.Second

var errBudgetsPaused = errors.New("account budgets paused after a Redis failure")

// PlanLimits are the account budgets of each plan (free, premium, enterprise); an
// account's own override (store.Account.RateLimit) replaces its plan's.
type PlanLimits map[string]ratelimit.Limit

// LimitMetrics count what the limits decided apart from the HTTP metrics: requests
// refused with 429, and decisions that could not be made (Redis unavailable), by policy.
type LimitMetrics struct {
	refused   *prometheus.CounterVec
	unchecked *prometheus.CounterVec
}

// NewLimitMetrics registers the limit counters on reg.
func NewLimitMetrics(reg prometheus.Registerer) *LimitMetrics {
	m := &LimitMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_rate_limit_refused_total",
			Help: "Requests refused with 429 because a rate-limit policy's budget was spent, by policy."}, []string{"policy"}),
		unchecked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_rate_limit_unchecked_total",
			Help: "Requests whose rate-limit policy could not be checked (Redis unavailable), by policy: account and embed are served, generate-session and exchange refused with 503."}, []string{"policy"}),
	}
	reg.MustRegister(m.refused, m.unchecked)
	return m
}

func (m *LimitMetrics) refusedInc(policy string) {
	if m != nil {
		m.refused.WithLabelValues(policy).Inc()
	}
}

func (m *LimitMetrics) uncheckedInc(policy string) {
	if m != nil {
		m.unchecked.WithLabelValues(policy).Inc()
	}
}

// cost is what a request of rt spends of its budgets: the route's cost for the methods
// that write, 1 for reads.
func (rt route) costOf(method string) int64 {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return max(rt.writeCost, 1)
}

// withinRateLimit spends the request's budgets, after authentication and before anything
// serves it, and answers 429 itself when one is spent (or 503 when a limit that needs
// Redis cannot be checked). Every policy that applied is told in RateLimit-Policy and
// RateLimit, the one with the least remaining first.
func (g *Gateway) withinRateLimit(w *h1.ResponseWriter, r *h1.Request, rt route, p *identity.Principal) bool {
	if g.o.RateLimiter == nil {
		return true
	}
	var st [2]ratelimit.Status
	n := 0
	cost := rt.costOf(r.Method)
	// The route's own limit first: refused there, the account's budget is not spent.
	var key string
	var limit ratelimit.Limit
	switch rt.limit {
	case limitPerKey:
		key, limit, st[0].Policy = "gs:"+p.KeyID, g.o.GenerateSessionLimit, policyNameGenerateSession
	case limitPerClient:
		key, limit, st[0].Policy = "ex:"+g.clientAddr(r), g.o.ExchangeLimit, policyNameExchange
	case limitPerDeployment:
		key, limit, st[0].Policy = "dw:"+strconv.FormatInt(rt.deploymentID, 10), g.o.DbtWebhookLimit, policyNameDbtWebhook
	}
	if limit.Enabled() {
		d, err := g.o.RateLimiter.Allow(r.Context(), key, limit)
		if err != nil {
			// Counting failed (Redis unreachable): refused with 503, never served unlimited.
			// Both limited routes keep their sessions in the same Redis, so they could not be
			// served anyway.
			g.o.Logger.WarnContext(r.Context(), "rate limit not checked", "policy", st[0].Policy, "err", err)
			g.o.LimitMetrics.uncheckedInc(st[0].Policy)
			writeLimitUnavailable(w)
			return false
		}
		st[0].Limit, st[0].Decision = limit, d
		n = 1
		if !d.Allowed {
			return g.refuse(w, st[:n], 0, 1)
		}
	}
	if name, key, limit := g.accountBudget(r, p); limit.Enabled() {
		var d ratelimit.Decision
		err := errBudgetsPaused
		if now := time.Now().UnixNano(); now >= g.budgetsPausedUntil.Load() {
			if d, err = g.o.RateLimiter.AllowN(r.Context(), key, limit, cost); err != nil {
				// A failed decision waits for the client's retries and dial timeouts: the
				// next second's requests do not try again, each would wait as long.
				g.budgetsPausedUntil.Store(time.Now().Add(budgetPause).UnixNano())
				g.o.Logger.WarnContext(r.Context(), "rate limit not checked; served", "policy", name, "err", err)
			}
		}
		if err != nil {
			// A general budget fails open: an outage of Redis does not take the API down
			// with it. Counted (and logged once a pause), so that it is seen.
			g.o.LimitMetrics.uncheckedInc(name)
		} else {
			st[n] = ratelimit.Status{Policy: name, Limit: limit, Decision: d}
			n++
			if !d.Allowed {
				return g.refuse(w, st[:n], n-1, cost)
			}
		}
	}
	if n == 0 {
		return true
	}
	if n == 2 && st[1].Remaining < st[0].Remaining {
		st[0], st[1] = st[1], st[0]
	}
	w.AddHeader("RateLimit-Policy", ratelimit.PolicyHeader(st[:n]...))
	w.AddHeader("RateLimit", ratelimit.Header(st[:n]...))
	return true
}

// accountBudget is the account policy that r spends, by its credential's kind: the
// account's own override, else its plan's default. A zero limit: none applies (a public
// route, or no budget configured).
func (g *Gateway) accountBudget(r *h1.Request, p *identity.Principal) (name, key string, limit ratelimit.Limit) {
	if len(g.o.PlanLimits) == 0 || p == nil || p.Account.ID == 0 {
		return "", "", ratelimit.Limit{}
	}
	id := strconv.FormatInt(p.Account.ID, 10)
	switch p.Credential {
	case identity.CredentialBearer, identity.CredentialAPIKey:
		name, key = policyNameAccount, "acct:"+id
	case identity.CredentialEmbed:
		name, key = policyNameEmbed, "embed:"+id
	default:
		return "", "", ratelimit.Limit{}
	}
	limit = g.o.PlanLimits[p.Account.Plan]
	if g.o.Auth != nil {
		// The account's record is cached (and evicted by the change poller).
		if acct, err := g.o.Auth.Account(r.Context(), p.Account.ID); err == nil && acct.RateLimit != "" {
			if l, err := ratelimit.ParseLimit(acct.RateLimit); err == nil {
				limit = l
			} else {
				g.o.Logger.WarnContext(r.Context(), "account rate-limit override ignored", "account", p.Account.ID, "err", err)
			}
		}
	}
	return name, key, limit
}

// refuse answers 429 for st[over], which a request of cost could not spend, with every
// policy that was decided in the header fields.
func (g *Gateway) refuse(w *h1.ResponseWriter, st []ratelimit.Status, over int, cost int64) bool {
	s := st[over]
	g.o.LimitMetrics.refusedInc(s.Policy)
	w.AddHeader("RateLimit-Policy", ratelimit.PolicyHeader(st...))
	w.AddHeader("RateLimit", ratelimit.Header(st...))
	secs := max(ratelimit.Seconds(s.RetryAfter), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	costNote := ""
	if cost > 1 {
		costNote = fmt.Sprintf(" (this request costs %d)", cost)
	}
	httpx.WriteError(w, http.StatusTooManyRequests,
		fmt.Sprintf("rate limit policy %s (%d requests per %s) is spent for %s%s; retry in %d s",
			s.Policy, s.Limit.N, s.Limit.Window, policySubject(s.Policy), costNote, secs))
	return false
}

func policySubject(policy string) string {
	switch policy {
	case policyNameGenerateSession:
		return "this API key"
	case policyNameExchange:
		return "this client address"
	case policyNameDbtWebhook:
		return "this deployment's push webhooks"
	case policyNameEmbed:
		return "this account's embed session tokens"
	}
	return "this account"
}
