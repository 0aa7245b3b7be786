package jetstream

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/libs/natsx"
)

// An object's chunks come from an ordered push consumer that nats.go's ObjectStore.Get
// creates on the stream's leader. When that leader is lost mid-read, the client
// re-creates the consumer after two missed heartbeats; when that re-create fails with an
// error nats.go does not retry (no responders while the leaders are being elected), it
// drops the subscription and no chunk ever comes again, and the result's Read blocks
// until its context's deadline: a job's whole timeout. objectReader bounds every wait
// for a chunk by objectStall, and a read that stalls is abandoned and opened again
// (within the queue's retry budget), going on at the byte where it stopped.

// objectStall is how long a read waits for the object's next chunk before the read is
// done again: longer than the two missed heartbeats (10 s) after which nats.go re-creates
// a consumer that is merely slow to come back.
const objectStall = 12 * time.Second

// stallContext is ctx with a deadline that moves: each read of an object result takes
// its read deadline from its context, so a read without a chunk for stall returns (0,
// nil) or its pipe's timeout, instead of waiting for ctx's own deadline.
type stallContext struct {
	context.Context
	stall time.Duration
}

func (c stallContext) Deadline() (time.Time, bool) {
	d := time.Now().Add(c.stall)
	if pd, ok := c.Context.Deadline(); ok && pd.Before(d) {
		return pd, true
	}
	return d, true
}

// objectReader reads an object, opening it again where a read stalls.
type objectReader struct {
	q     *Queue
	ctx   context.Context
	name  string
	stall time.Duration

	cur    natsjs.ObjectResult
	cancel context.CancelFunc
	off    int64     // bytes returned to the caller
	skip   int64     // bytes of a reopened object still to be passed over
	since  time.Time // when the read first stalled, zero while new bytes come
	junk   []byte    // what the passed-over bytes are read into
}

// openReader opens the object name, or answers natsjs.ErrObjectNotFound.
func (q *Queue) openReader(ctx context.Context, name string, stall time.Duration) (*objectReader, error) {
	r := &objectReader{q: q, ctx: ctx, name: name, stall: stall}
	if err := r.reopen(); err != nil {
		return nil, err
	}
	return r, nil
}

// reopen gets the object again (with the queue's retries), to be read from r.off.
func (r *objectReader) reopen() error {
	r.drop()
	return r.q.do(r.ctx, func(actx context.Context) error {
		// The result is read after the attempt and lives as long as r.ctx; the attempt's
		// deadline bounds the Get alone.
		obj, cancel, err := outlive(r.ctx, actx, func(ctx context.Context) (natsjs.ObjectResult, error) {
			return r.q.obj.Get(stallContext{Context: ctx, stall: r.stall}, r.name)
		}, func(obj natsjs.ObjectResult) { _ = obj.Close() })
		if err != nil {
			return err
		}
		r.cur, r.cancel, r.skip = obj, cancel, r.off
		return nil
	})
}

// drop abandons the current result.
func (r *objectReader) drop() {
	if r.cur != nil {
		_ = r.cur.Close()
		r.cancel()
		r.cur, r.cancel = nil, nil
	}
}

// Read reads the object's next bytes, doing the read again when it stalls or fails for a
// while a retry may cure, until no byte came for the stall and the retry budget.
func (r *objectReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if r.cur == nil {
			if err := r.reopen(); err != nil {
				return 0, unavailable(err)
			}
		}
		buf := p
		if r.skip > 0 {
			if r.junk == nil {
				r.junk = make([]byte, 128<<10)
			}
			buf = r.junk[:min(r.skip, int64(len(r.junk)))]
		}
		n, err := r.cur.Read(buf)
		if n > 0 && r.skip > 0 { // what was read before: no progress
			r.skip -= int64(n)
			continue
		}
		if n > 0 {
			r.since, r.off = time.Time{}, r.off+int64(n)
			return n, err
		}
		if err == io.EOF {
			return 0, io.EOF
		}
		if r.ctx.Err() != nil {
			return 0, r.ctx.Err()
		}
		// A stalled read ends with its pipe's deadline passed (or, in other versions of
		// nats.go, with no byte and no error).
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !natsx.Transient(err) {
			return 0, err
		}
		// Stalled (no chunk within the stall) or a transient failure: read it again.
		if r.since.IsZero() {
			r.since = time.Now()
		} else if time.Since(r.since) > r.stall+r.budget() {
			return 0, unavailable(errors.Join(errors.New("object read stalled"), err))
		}
		r.drop()
	}
}

// budget is how long a read is done again after it first stalled (besides one stall).
func (r *objectReader) budget() time.Duration {
	if b := r.q.retry.Budget; b != 0 {
		return max(b, 0)
	}
	return natsx.DefaultRetryBudget
}

// Close ends the read.
func (r *objectReader) Close() error {
	r.drop()
	return nil
}
