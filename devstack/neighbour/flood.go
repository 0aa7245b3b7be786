package neighbour

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"
)

// The flood's streams, each a few closed-loop clients of the flooder.
const (
	// StreamMove: the viewer bulk-moves the 100 workbooks of the maximum size it may not
	// move (2 clients).
	StreamMove = "viewer bulk move of 100"
	// StreamMint: the admin key mints for 20 users, each mint rewriting the user's
	// attribute values to 4 × 15,000 bytes, with a 15,000-byte securityContext (2 clients).
	StreamMint = "mint, maximal attributes"
	// StreamExchange: anonymous exchanges of a used session id and of unknown ones (1).
	StreamExchange = "anonymous failed exchange"
	// StreamBomb: git syncs of the bomb repository in the first deployment (1, never
	// paced: it keeps the deployment's queue at its cap, which a worker drains fast).
	StreamBomb = "dbt sync of the bomb"
	// StreamUpload: manifest uploads of UploadBytes into the second deployment (3 at once).
	StreamUpload = "dbt upload at the quota"
)

// Outcomes a stream's answers are counted under, besides "<status> <code>".
const (
	// OutcomeRefused is a bulk move answered 200 with every item refused 403.
	OutcomeRefused = "200 all refused"
	// OutcomeNoAnswer is a request that got no answer.
	OutcomeNoAnswer = "no answer"
)

// Stats counts each stream's answers by outcome ("202", "429 job_limit", ...).
type Stats map[string]map[string]int

// Count is how many answers of stream had outcome.
func (s Stats) Count(stream, outcome string) int { return s[stream][outcome] }

// Total is how many answers stream had.
func (s Stats) Total(stream string) int {
	n := 0
	for _, c := range s[stream] {
		n += c
	}
	return n
}

// String lists every stream's outcomes.
func (s Stats) String() string {
	var b strings.Builder
	for _, st := range []string{StreamMove, StreamMint, StreamExchange, StreamBomb, StreamUpload} {
		fmt.Fprintf(&b, "%s: %v; ", st, s[st])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// AtCaps says the flood has met each of the limits that bound it: the bomb's
// deployment's queue is full (429 job_limit), the uploads have met the quota (413
// storage_quota), and the viewer's moves and the mints are being answered.
func (s Stats) AtCaps() bool {
	return s.Count(StreamBomb, "429 job_limit") > 0 && s.Count(StreamUpload, "413 storage_quota") > 0 &&
		s.Total(StreamMove) > 0 && s.Total(StreamMint) > 0 && s.Total(StreamExchange) > 0
}

// Flood is a running flood.
type Flood struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	stats  Stats
}

// StartFlood starts every stream of the flood; Stop ends it. Each client sends its next
// request as soon as the last is answered, after pause when pause is above zero (but
// the bomb's, which keeps its queue full; the attack suite paces the flood so the local stack's one serialized store can keep up on
// a shared machine; make bench floods at full speed).
func (r *Run) StartFlood(ctx context.Context, pause time.Duration) *Flood {
	ctx, cancel := context.WithCancel(ctx)
	f := &Flood{cancel: cancel, stats: Stats{}}
	moveBody := map[string]any{"folderId": nil, "items": r.floodItems}
	streams := []struct {
		name    string
		clients int
		send    func(ctx context.Context, n int) (answer, string)
	}{
		{StreamMove, 2, func(ctx context.Context, _ int) (answer, string) {
			a := r.fc.do(ctx, "POST", depPath(r.bombDep, "/workspace/bulk-move"), bearer(r.flooder, "viewer"), moveBody)
			return a, moveOutcome(a, len(r.floodItems))
		}},
		{StreamMint, 2, func(ctx context.Context, n int) (answer, string) {
			return r.fc.do(ctx, "POST", "/api/v1/embed/generate-session", "Api-Key "+r.flooder.APIKeys["admin"], r.maximalMint(n)), ""
		}},
		{StreamExchange, 1, func(ctx context.Context, n int) (answer, string) {
			id := r.usedSession
			if n%2 == 1 {
				id = randomHex(16)
			}
			return r.fc.do(ctx, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": id}), ""
		}},
		{StreamBomb, 1, func(ctx context.Context, n int) (answer, string) {
			return r.fc.do(ctx, "POST", depPath(r.bombDep, "/dbt-sync"), bearer(r.flooder, "developer"),
				map[string]any{"source": "git", "branchName": fmt.Sprintf("bomb/%s", randomHex(4))}), ""
		}},
		{StreamUpload, 3, func(ctx context.Context, n int) (answer, string) {
			return r.fc.do(ctx, "POST", depPath(r.uploadDep, "/dbt-sync"), bearer(r.flooder, "developer"), r.upload), ""
		}},
	}
	for _, s := range streams {
		for c := range s.clients {
			f.wg.Go(func() {
				for n := c; ctx.Err() == nil; n += s.clients {
					a, outcome := s.send(ctx, n)
					if ctx.Err() != nil {
						return // cut short by Stop: not an answer of the platform
					}
					f.count(s.name, a, outcome)
					if pause > 0 && s.name != StreamBomb {
						select {
						case <-ctx.Done():
						case <-time.After(pause): // the pace of the flood, not a wait for a state
						}
					}
				}
			})
		}
	}
	return f
}

func (f *Flood) count(stream string, a answer, outcome string) {
	if outcome == "" {
		outcome = fmt.Sprint(a.Status)
		if a.Err != nil {
			outcome = OutcomeNoAnswer
		} else if a.code != "" {
			outcome += " " + a.code
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stats[stream] == nil {
		f.stats[stream] = map[string]int{}
	}
	f.stats[stream][outcome]++
}

// Stats is a copy of the counts so far.
func (f *Flood) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := Stats{}
	for k, v := range f.stats {
		out[k] = maps.Clone(v)
	}
	return out
}

// WaitAtCaps waits until the flood has met its limits (Stats.AtCaps), at most within.
func (f *Flood) WaitAtCaps(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for !f.Stats().AtCaps() {
		if time.Now().After(deadline) {
			return fmt.Errorf("the flood did not reach its limits within %s: %s", within, f.Stats())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling interval of a deadline loop
		}
	}
	return nil
}

// Stop ends the flood, waits for its clients and returns the final counts.
func (f *Flood) Stop() Stats {
	f.cancel()
	f.wg.Wait()
	return f.Stats()
}

// moveOutcome is OutcomeRefused for a bulk move that refused each of its n items with
// 403, otherwise the status (and code).
func moveOutcome(a answer, n int) string {
	if a.Err != nil || a.Status != 200 {
		return ""
	}
	var out struct {
		Moved  []json.RawMessage
		Failed []struct{ Error struct{ Status int } }
	}
	if json.Unmarshal(a.Body, &out) != nil || len(out.Moved) != 0 || len(out.Failed) != n {
		return "200 not all refused"
	}
	for _, f := range out.Failed {
		if f.Error.Status != 403 {
			return "200 not all refused"
		}
	}
	return OutcomeRefused
}

// maximalMint is the n-th mint's body: one of 20 users of a creator-mode tenant, with 4
// attribute values of 15,000 bytes (60,000 of EMBED_MAX_USER_ATTRIBUTE_BYTES' 65,536),
// whose letter changes every mint so every mint rewrites them, and a securityContext of
// 15,000 bytes (of EMBED_MAX_SECURITY_CONTEXT_BYTES' 16,384).
func (r *Run) maximalMint(n int) map[string]any {
	letter := string(rune('a' + n%26))
	var defs, values []any
	for i := range 4 {
		name := fmt.Sprintf("flood-%d", i)
		defs = append(defs, map[string]any{"name": name, "type": "string"})
		values = append(values, map[string]any{"name": name, "value": strings.Repeat(letter, 15000)})
	}
	return map[string]any{"deploymentId": r.bombDep, "externalId": fmt.Sprintf("flood-user-%d", n%20), "creatorMode": true,
		"embedTenantName": "flood-tenant", "userAttributeDefinitions": defs, "userAttributes": values,
		"securityContext": map[string]any{"blob": strings.Repeat("s", 15000)}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
