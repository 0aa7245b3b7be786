package natsx

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A three-node JetStream loses a stream's leader with its node: its followers elect a
// new one within seconds (4 to 9 s of election timeout, plus the catch-up), and until
// then a publish to the stream finds no responder, an API call answers 503, and a
// client whose server died waits for its reconnect. Retry carries a call across that
// gap, within a budget and the caller's own deadline. A call it repeats must be safe to
// repeat: a publish carries its message id (the stream drops the duplicate within its
// Duplicates window), a KV write is a compare-and-set whose writer recognises its own
// change, a read is a read.

// DefaultRetryBudget is how long Retry keeps trying when its budget is not set: longer
// than an election's 9 s worst case, shorter than the gateway's 30 s upstream timeout.
const DefaultRetryBudget = 12 * time.Second

// attemptTimeout bounds one attempt, so an attempt sent to a server that is going away
// (its answer never comes) leaves time for the next one.
const attemptTimeout = 3 * time.Second

// reconnectGrace is how long a connection may be seen down before retrying stops: a
// client that lost its server reconnects to another within it, and when every server
// is gone, a caller is answered at once instead of at the end of the budget.
const reconnectGrace = 2 * time.Second

// Retrier retries calls to NATS that fail while JetStream elects a leader or the
// connection reconnects. The zero value retries for DefaultRetryBudget.
type Retrier struct {
	// Budget is how long a call is retried in all (also bounded by its context's
	// deadline); negative: never retried.
	Budget time.Duration
	// Conn, when set, ends the retries once it has been seen disconnected for
	// reconnectGrace: NATS is out of reach, not electing a leader.
	Conn *nats.Conn
	// OnRetry, when set, is told of each failed attempt that is retried (metrics, tests).
	OnRetry func(err error)
}

// Do calls op until it succeeds, fails with an error that retrying cannot cure, or the
// budget or ctx runs out; it returns op's last error. Each attempt gets a context of its
// own, bounded by attemptTimeout and what is left of the budget.
func (r Retrier) Do(ctx context.Context, op func(ctx context.Context) error) error {
	budget := r.Budget
	if budget == 0 {
		budget = DefaultRetryBudget
	}
	deadline := time.Now().Add(max(budget, 0))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := 50 * time.Millisecond
	var downSince time.Time // when the connection was first seen down, zero while it is up
	for {
		r.watch(&downSince)
		end := time.Now().Add(attemptTimeout)
		if deadline.Before(end) {
			end = deadline
		}
		actx, cancel := context.WithDeadline(ctx, end)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !Transient(err) || r.watch(&downSince) >= reconnectGrace {
			return err
		}
		// Half to all of wait, so replicas that failed together do not retry together.
		pause := wait/2 + rand.N(wait/2+1)
		if time.Now().Add(pause).After(deadline) {
			return err
		}
		if r.OnRetry != nil {
			r.OnRetry(err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		wait = min(wait*2, time.Second)
	}
}

// watch notes whether the connection is down and returns for how long it has been seen
// down (zero when it is up or there is no Conn).
func (r Retrier) watch(downSince *time.Time) time.Duration {
	switch {
	case r.Conn == nil || r.Conn.IsConnected():
		*downSince = time.Time{}
		return 0
	case downSince.IsZero():
		*downSince = time.Now()
	}
	return time.Since(*downSince)
}

// transientAPICodes are the JetStream API errors of a cluster in transition: no leader
// (yet), a peer restarting, a compare-and-set's base not yet known to a new leader.
var transientAPICodes = map[jetstream.ErrorCode]bool{
	10008: true, // JetStream system temporarily unavailable (no leader, no quorum)
	10004: true, // incomplete results (a peer did not answer)
	10076: true, // JetStream not enabled (a server still starting it)
	10039: true, // JetStream not enabled for account (the same, seen by the account)
	10163: true, // expected last sequence per subject temporarily unavailable (a new leader)
}

// Transient reports whether err is one a retry may cure: no responder (a stream without
// a leader, a request sent while its responders reconnect), a timeout, a connection
// reconnecting, or JetStream saying it is temporarily unavailable. A deadline or
// cancellation of the caller's own context is not: Do checks that context itself.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return transientAPICodes[apiErr.ErrorCode]
	}
	for _, e := range []error{nats.ErrNoResponders, jetstream.ErrNoStreamResponse, nats.ErrTimeout, context.DeadlineExceeded,
		jetstream.ErrAsyncPublishTimeout, nats.ErrConnectionReconnecting, nats.ErrDisconnected, jetstream.ErrServerShutdown,
		jetstream.ErrConsumerLeadershipChanged, jetstream.ErrNoHeartbeat} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
