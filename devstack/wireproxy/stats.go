package wireproxy

import (
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The proxy counts, per command and collection, how long each command waited for its
// turn and how long it then took upstream, so a benchmark can tell queueing from work
// (make soak prints them). They are read with the command StatsCommand, which the proxy
// answers itself on any database and never forwards.

// StatsCommand is the name of the command the proxy answers with its Stats.
const StatsCommand = "wireproxyStats"

// StatsBounds are the upper bounds of the histograms' buckets; a last bucket counts
// what is above the last bound.
var StatsBounds = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second, 5 * time.Second,
}

// maxStatsKeys bounds the command × collection pairs counted apart; the rest are
// counted under "other".
const maxStatsKeys = 256

// Histogram counts durations in the buckets of StatsBounds.
type Histogram struct {
	Buckets []int64 // len(StatsBounds)+1
	Sum     time.Duration
}

func (h *Histogram) add(d time.Duration) {
	if h.Buckets == nil {
		h.Buckets = make([]int64, len(StatsBounds)+1)
	}
	h.Buckets[sort.Search(len(StatsBounds), func(i int) bool { return d <= StatsBounds[i] })]++
	h.Sum += d
}

// CommandStats are one command's figures on one collection.
type CommandStats struct {
	Count int64
	// Wait is the time from the command's arrival to its turn; Exec from its turn to
	// its reply (every batch of a write command, every part of a split find).
	Wait, Exec Histogram
	// Split is how many of them the proxy sent as one find per _id (split.go), and Parts
	// the finds they took upstream, the original's included when the proxy forwarded it
	// after all.
	Split, Parts int64
}

// stats is the proxy's Stats, guarded.
type stats struct {
	mu sync.Mutex
	m  map[string]*CommandStats
}

// record counts one command; parts is the finds it took upstream when the proxy split it
// (split.go), 0 when it did not.
func (s *stats) record(key string, wait, exec time.Duration, parts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]*CommandStats)
	}
	c, ok := s.m[key]
	if !ok {
		if len(s.m) >= maxStatsKeys {
			key = "other"
			c = s.m[key]
		}
		if c == nil {
			c = &CommandStats{}
			s.m[key] = c
		}
	}
	c.Count++
	if parts > 0 {
		c.Split++
		c.Parts += int64(parts)
	}
	c.Wait.add(wait)
	c.Exec.add(exec)
}

// Stats are the figures so far by "command collection" ("command" alone for a command
// on no collection).
func (p *Proxy) Stats() map[string]CommandStats {
	p.stats.mu.Lock()
	defer p.stats.mu.Unlock()
	out := make(map[string]CommandStats, len(p.stats.m))
	for k, c := range p.stats.m {
		out[k] = CommandStats{Count: c.Count, Split: c.Split, Parts: c.Parts,
			Wait: Histogram{Buckets: append([]int64(nil), c.Wait.Buckets...), Sum: c.Wait.Sum},
			Exec: Histogram{Buckets: append([]int64(nil), c.Exec.Buckets...), Sum: c.Exec.Sum}}
	}
	return out
}

// statsKey is what a request is counted under: its command's name and the collection it
// names (the body's first value, when a string), or the opcode of a legacy message.
func statsKey(msg []byte, m opMessage, isMsg bool) string {
	if !isMsg {
		return "opcode " + opName(opCode(msg))
	}
	name := m.name()
	if name == "" {
		return "other"
	}
	if coll, ok := m.body.Index(0).Value().StringValueOK(); ok {
		return name + " " + coll
	}
	return name
}

func opName(code int32) string {
	switch code {
	case opQuery:
		return "OP_QUERY"
	case opMsg:
		return "OP_MSG"
	}
	return "other"
}

// statsReply is the reply to StatsCommand: {ok: 1, boundsMicros: [...], commands: {key:
// {count, wait: [buckets], exec: [buckets], waitSumMicros, execSumMicros, split, parts}}}.
func (p *Proxy) statsReply(msg []byte) []byte {
	b := bsoncore.NewDocumentBuilder().AppendDouble("ok", 1)
	bounds := bsoncore.NewArrayBuilder()
	for _, d := range StatsBounds {
		bounds.AppendInt64(d.Microseconds())
	}
	b.AppendArray("boundsMicros", bounds.Build())
	cmds := bsoncore.NewDocumentBuilder()
	st := p.Stats()
	keys := make([]string, 0, len(st))
	for k := range st {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := st[k]
		cmds.AppendDocument(k, bsoncore.NewDocumentBuilder().AppendInt64("count", c.Count).
			AppendArray("wait", int64Array(c.Wait.Buckets)).AppendArray("exec", int64Array(c.Exec.Buckets)).
			AppendInt64("waitSumMicros", c.Wait.Sum.Microseconds()).AppendInt64("execSumMicros", c.Exec.Sum.Microseconds()).
			AppendInt64("split", c.Split).AppendInt64("parts", c.Parts).Build())
	}
	b.AppendDocument("commands", cmds.Build())
	return replyMessage(0, requestIDOf(msg), b.Build())
}

func int64Array(vs []int64) bsoncore.Array {
	a := bsoncore.NewArrayBuilder()
	for _, v := range vs {
		a.AppendInt64(v)
	}
	return a.Build()
}

// isStatsRequest reports whether msg asks for the proxy's stats.
func isStatsRequest(m opMessage, isMsg bool) bool { return isMsg && m.name() == StatsCommand }
