package jetstream

import (
	"context"
	"encoding/json"
	"errors"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// UpdateLedger applies fn to the ledger of key (KV entry ledger.<key>) with
// compare-and-set on the entry's revision.
func (q *Queue) UpdateLedger(ctx context.Context, key dbtsync.LedgerKey, fn func(*dbtsync.Ledger) error) error {
	k := "ledger." + string(key)
	for {
		var l dbtsync.Ledger
		var rev uint64
		e, err := q.ledgers.Get(ctx, k)
		switch {
		case errors.Is(err, natsjs.ErrKeyNotFound):
		case err != nil:
			return unavailable(err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &l); err != nil {
				return err
			}
		}
		if err := fn(&l); err != nil {
			return err
		}
		b, _ := json.Marshal(l)
		if rev == 0 {
			_, err = q.ledgers.Create(ctx, k, b)
		} else {
			_, err = q.ledgers.Update(ctx, k, b, rev)
		}
		if err == nil {
			return nil
		}
		if !isWrongSequence(err) {
			return unavailable(err)
		}
	}
}
