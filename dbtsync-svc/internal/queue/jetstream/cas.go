package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/libs/natsx"
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

// getEntry reads key of kv, retried. A bucket's reads are direct gets, which any
// replica answers, one behind included (a follower that has not applied the last writes,
// a node restarted and catching up): a key it says is missing may have been written. Its
// "not found" is therefore asked again of the stream's leader, which holds every write
// acknowledged, and only the leader's is returned: a worker would otherwise drop the
// delivery of a job queued a moment before, or take a line's head for gone.
func (q *Queue) getEntry(ctx context.Context, kv natsjs.KeyValue, key string) (natsjs.KeyValueEntry, error) {
	var e natsjs.KeyValueEntry
	err := q.do(ctx, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, key)
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			e, err = q.leaderEntry(ctx, kv, key)
		}
		return err
	})
	return e, err
}

// leaderEntry reads key of kv from its stream's leader (natsx.LeaderLastMsg):
// natsjs.ErrKeyNotFound when the key holds no value.
func (q *Queue) leaderEntry(ctx context.Context, kv natsjs.KeyValue, key string) (natsjs.KeyValueEntry, error) {
	m, err := natsx.LeaderLastMsg(ctx, q.nc, "KV_"+kv.Bucket(), "$KV."+kv.Bucket()+"."+key)
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil, natsjs.ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	switch m.Header.Get("KV-Operation") {
	case "DEL", "PURGE":
		return nil, natsjs.ErrKeyNotFound
	}
	return leaderKV{bucket: kv.Bucket(), key: key, value: m.Data, rev: m.Sequence, created: m.Time}, nil
}

// leaderKV is an entry read by leaderEntry.
type leaderKV struct {
	bucket, key string
	value       []byte
	rev         uint64
	created     time.Time
}

func (e leaderKV) Bucket() string               { return e.bucket }
func (e leaderKV) Key() string                  { return e.key }
func (e leaderKV) Value() []byte                { return e.value }
func (e leaderKV) Revision() uint64             { return e.rev }
func (e leaderKV) Created() time.Time           { return e.created }
func (e leaderKV) Delta() uint64                { return 0 }
func (e leaderKV) Operation() natsjs.KeyValueOp { return natsjs.KeyValuePut }
