package jetstream

import (
	"context"
	"encoding/json"
	"errors"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// errSkip, returned by a casUpdate function, leaves the entry as it is.
var errSkip = errors.New("nothing to change")

// casUpdate applies fn to the JSON entry of key in kv (the zero T when there is none) and
// stores the result with compare-and-set on the entry's revision, reading it again when
// someone changed it in between. fn's error aborts the update (errSkip: without error).
// Each call is retried (q.do); a write whose reply was lost is found applied when the
// entry is read again, so fn must leave an entry it already changed as it is (an id
// added once, a ledger change applied once).
func casUpdate[T any](ctx context.Context, q *Queue, kv natsjs.KeyValue, key string, fn func(*T) error) error {
	for {
		var v T
		var rev uint64
		e, err := q.getEntry(ctx, kv, key)
		switch {
		case errors.Is(err, natsjs.ErrKeyNotFound):
		case err != nil:
			return unavailable(err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &v); err != nil {
				return err
			}
		}
		if err := fn(&v); err != nil {
			if errors.Is(err, errSkip) {
				return nil
			}
			return err
		}
		b, _ := json.Marshal(v)
		err = q.do(ctx, func(ctx context.Context) (err error) {
			if rev == 0 {
				_, err = kv.Create(ctx, key, b)
			} else {
				_, err = kv.Update(ctx, key, b, rev)
			}
			return err
		})
		if err == nil {
			return nil
		}
		if !isWrongSequence(err) {
			return unavailable(err)
		}
	}
}

// getEntry reads key of kv, retried.
func (q *Queue) getEntry(ctx context.Context, kv natsjs.KeyValue, key string) (natsjs.KeyValueEntry, error) {
	var e natsjs.KeyValueEntry
	err := q.do(ctx, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, key)
		return err
	})
	return e, err
}
