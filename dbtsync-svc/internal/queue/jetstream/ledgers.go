package jetstream

import (
	"context"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// UpdateLedger applies fn to the ledger of key (KV entry ledger.<key>) with
// compare-and-set on the entry's revision.
func (q *Queue) UpdateLedger(ctx context.Context, key dbtsync.LedgerKey, fn func(*dbtsync.Ledger) error) error {
	return casUpdate(ctx, q, q.ledgers, "ledger."+string(key), fn)
}
