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
func casUpdate[T any](ctx context.Context, kv natsjs.KeyValue, key string, fn func(*T) error) error {
	for {
		var v T
		var rev uint64
		e, err := kv.Get(ctx, key)
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
		if rev == 0 {
			_, err = kv.Create(ctx, key, b)
		} else {
			_, err = kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return nil
		}
		if !isWrongSequence(err) {
			return unavailable(err)
		}
	}
}
