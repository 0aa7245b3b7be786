package redisha_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
)

// traffic is the steady load a failover happens under: mints, double exchanges (the
// same session id on both gateways at once), revocations retried until acknowledged, and
// embed-token requests on both gateways for every revoked token and a sample of the
// others. Every answer is judged as it arrives; what broke a rule is a violation.
type traffic struct {
	gateways []*apitest.Client
	key      string // an API key of the seeded account
	dep      int64

	mu         sync.Mutex
	sessions   []*session
	violations []string
	statuses   map[string]int // "kind status" -> count
	unavail    map[string]int // 503s by kind
	total      int
	last503    time.Time
	users      atomic.Int64
}

// session is one minted session as the clients know it.
type session struct {
	id         string
	token      string    // from its one successful exchange
	exchanged  int       // successful exchanges (200): single use means at most 1
	revoking   bool      // a revoke was sent: until it is acknowledged the token may go either way
	revokedAt  time.Time // when the revoke was acknowledged (204)
	revokeWant bool      // chosen to be revoked
}

func newTraffic(gateways []string, key string, dep int64) *traffic {
	tr := &traffic{key: key, dep: dep, statuses: map[string]int{}, unavail: map[string]int{}}
	for _, g := range gateways {
		c := apitest.New(g)
		c.HTTP.Timeout = 15 * time.Second
		tr.gateways = append(tr.gateways, c)
	}
	return tr
}

// run sends the load until ctx ends; the revoker then finishes the revocation it is
// retrying, so every revoke sent is acknowledged before the checks.
func (tr *traffic) run(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { tr.mintLoop(ctx, i) })
	}
	wg.Go(func() { tr.revokeLoop(ctx) })
	for g := range tr.gateways {
		wg.Go(func() { tr.probeLoop(ctx, g) })
	}
	return wg.Wait
}

// answer is one request's outcome as judged.
type answer struct {
	status int
	body   map[string]any
}

// send sends one request through gateway g and judges what the platform may answer to
// kind in any state: allowed are the statuses listed, and a 503 with Retry-After and
// the error body. Anything else (a 500, no answer) is a violation.
func (tr *traffic) send(g int, kind, method, path, authz string, body any, allowed ...int) answer {
	r := tr.gateways[g].Do(method, path, authz, body)
	var a answer
	a.status = r.Status
	_ = json.Unmarshal(r.Body, &a.body)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.total++
	tr.statuses[fmt.Sprintf("%s %d", kind, r.Status)]++
	switch {
	case r.Err != nil:
		tr.violate("%s through gateway %d: no answer: %v", kind, g+1, r.Err)
		a.status = 0
	case r.Status == 503:
		tr.unavail[kind]++
		tr.last503 = time.Now()
		st, _ := a.body["status"].(float64)
		if r.Header.Get("Retry-After") == "" || int(st) != 503 {
			tr.violate("%s through gateway %d: 503 without Retry-After or the error body: %q %s", kind, g+1, r.Header.Get("Retry-After"), r.Body)
		}
	default:
		ok := false
		for _, s := range allowed {
			ok = ok || s == r.Status
		}
		if !ok {
			tr.violate("%s through gateway %d: %d %s", kind, g+1, r.Status, r.Body)
		}
	}
	return a
}

func (tr *traffic) violate(format string, args ...any) {
	if len(tr.violations) < 50 {
		tr.violations = append(tr.violations, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
}

// mintLoop mints sessions through gateway g (for a handful of external users, so the
// mints mostly update users) and exchanges each through both gateways at once.
func (tr *traffic) mintLoop(ctx context.Context, g int) {
	for ctx.Err() == nil {
		user := fmt.Sprintf("redisha-user-%d", tr.users.Add(1)%8)
		a := tr.send(g, "mint", "POST", "/api/v1/embed/generate-session", apitest.APIKey(tr.key),
			map[string]any{"deploymentId": tr.dep, "externalId": user}, 200)
		id, _ := a.body["sessionId"].(string)
		if a.status != 200 || id == "" {
			pause(ctx, 100*time.Millisecond)
			continue
		}
		s := &session{id: id}
		tr.mu.Lock()
		s.revokeWant = len(tr.sessions)%3 == 0
		tr.sessions = append(tr.sessions, s)
		tr.mu.Unlock()
		tr.exchangeOnBoth(s)
	}
}

// exchangeOnBoth sends the session id to both gateways at once: one may win.
func (tr *traffic) exchangeOnBoth(s *session) {
	var wg sync.WaitGroup
	for g := range tr.gateways {
		wg.Go(func() { tr.exchange(g, s) })
	}
	wg.Wait()
}

// exchange sends session s's id through gateway g. A 200 is one of its exchanges: the
// first gives it its token, any other breaks single use. (Both of the first attempts may
// have been 503s, which exchanged nothing, so the first 200 may come later.)
func (tr *traffic) exchange(g int, s *session) answer {
	a := tr.send(g, "exchange", "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": s.id}, 200, 401)
	if a.status != 200 {
		return a
	}
	token, _ := a.body["token"].(string)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s.exchanged++
	if s.exchanged > 1 {
		tr.violate("session id %s… exchanged %d times", s.id[:8], s.exchanged)
		return a
	}
	s.token = token
	return a
}

// revokeLoop revokes every third exchanged session, alternating gateways, and retries a
// revoke until it is acknowledged (a 503 said nothing about whether it took).
func (tr *traffic) revokeLoop(ctx context.Context) {
	n := 0
	for ctx.Err() == nil {
		s := tr.pick(func(s *session) bool { return s.revokeWant && s.token != "" && !s.revoking })
		if s == nil {
			pause(ctx, 50*time.Millisecond)
			continue
		}
		tr.mu.Lock()
		s.revoking = true
		tr.mu.Unlock()
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			n++
			a := tr.send(n%len(tr.gateways), "revoke", "POST", "/api/v1/embed/session/revoke", apitest.APIKey(tr.key), map[string]any{"sessionId": s.id}, 204)
			if a.status == 204 {
				tr.mu.Lock()
				s.revokedAt = time.Now()
				tr.mu.Unlock()
				break
			}
			time.Sleep(100 * time.Millisecond) // the 503's Retry-After, shortened: the suite's own pace
		}
		if s.revokedAt.IsZero() {
			tr.mu.Lock()
			tr.violate("revoke of %s… never acknowledged within 45 s", s.id[:8])
			tr.mu.Unlock()
		}
	}
}

// probeLoop sends embed-token requests through gateway g: every revoked token (refused
// at every moment: 401, or 503 while Redis cannot answer) and some unrevoked ones (200,
// or 503).
func (tr *traffic) probeLoop(ctx context.Context, g int) {
	for ctx.Err() == nil {
		revoked, live := tr.tokens(8)
		for _, s := range revoked {
			if a := tr.info(g, s.token); a.status == 200 {
				tr.mu.Lock()
				tr.violate("revoked session %s… (revoke acknowledged %s earlier) accepted by gateway %d",
					s.id[:8], time.Since(s.revokedAt).Round(time.Millisecond), g+1)
				tr.mu.Unlock()
			}
		}
		for _, s := range live {
			a := tr.info(g, s.token)
			tr.mu.Lock()
			if a.status == 401 && !s.revoking {
				tr.violate("unrevoked session %s… refused by gateway %d", s.id[:8], g+1)
			}
			tr.mu.Unlock()
		}
		if len(revoked)+len(live) == 0 {
			pause(ctx, 50*time.Millisecond)
		}
	}
}

func (tr *traffic) info(g int, token string) answer {
	return tr.send(g, "session", "GET", "/api/v1/embed/session", apitest.Bearer(token), nil, 200, 401)
}

// tokens returns every token whose revoke was acknowledged and up to n others, at
// random, of sessions that are not being revoked.
func (tr *traffic) tokens(n int) (revoked, live []*session) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, s := range tr.sessions {
		switch {
		case s.token == "":
		case !s.revokedAt.IsZero():
			revoked = append(revoked, s)
		case !s.revoking:
			live = append(live, s)
		}
	}
	rand.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	return revoked, live[:min(n, len(live))]
}

func (tr *traffic) pick(match func(*session) bool) *session {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, s := range tr.sessions {
		if match(s) {
			return s
		}
	}
	return nil
}

// counts returns how many sessions have a token, and how many of those are revoked.
func (tr *traffic) counts() (exchanged, revoked int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, s := range tr.sessions {
		if s.token != "" {
			exchanged++
		}
		if !s.revokedAt.IsZero() {
			revoked++
		}
	}
	return exchanged, revoked
}

// summary is the 503 count by kind and the requests sent.
func (tr *traffic) summary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n, kinds := 0, []string{}
	for k, c := range tr.unavail {
		n += c
		kinds = append(kinds, fmt.Sprintf("%s %d", k, c))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%d 503s (%s) of %d requests", n, strings.Join(kinds, ", "), tr.total)
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
