package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
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

// leaderEntry reads key of kv from its stream's leader (the JetStream API's message get,
// which only the leader answers): natsjs.ErrKeyNotFound when the key holds no value.
func (q *Queue) leaderEntry(ctx context.Context, kv natsjs.KeyValue, key string) (natsjs.KeyValueEntry, error) {
	subj := "$KV." + kv.Bucket() + "." + key
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subj})
	msg, err := q.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+kv.Bucket(), req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *struct {
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
		Error *natsjs.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("message get of %s: %w", subj, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == natsjs.JSErrCodeMessageNotFound:
		return nil, natsjs.ErrKeyNotFound
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, fmt.Errorf("message get of %s: no message in the answer", subj)
	}
	m := resp.Message
	if len(m.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return nil, fmt.Errorf("message get of %s: %w", subj, err)
		}
		switch h.Get("KV-Operation") {
		case "DEL", "PURGE":
			return nil, natsjs.ErrKeyNotFound
		}
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
