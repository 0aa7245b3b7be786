package embed_test

import (
	"context"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// TestRefusedExchangesOfOneIDAreAuditedOncePerInterval: anyone holding a used session id
// can send it again and again without credentials; its account's audit trail records
// the refusals of that id at most once per EMBED_EXCHANGE_FAILURE_AUDIT_INTERVAL, each
// event counting those since the previous one (details.failedAttempts).
func TestRefusedExchangesOfOneIDAreAuditedOncePerInterval(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	offset := f.withSessionClock()
	f.withLimits(embed.Limits{ExchangeFailureAudit: time.Minute})
	id := f.mint(t, f.adminKey(), f.external("u"))
	if _, err := f.svc.ExchangeSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	refusals := func() []map[string]any {
		var out []map[string]any
		for _, ev := range f.trail.Events() {
			if ev.Action == embed.ActionSessionExchange && ev.Outcome.Status == 401 && ev.AccountID == accountID {
				out = append(out, ev.Details)
			}
		}
		return out
	}
	for range 300 {
		if _, err := f.svc.ExchangeSession(ctx, id); err == nil {
			t.Fatal("a used id was exchanged")
		}
	}
	if got := refusals(); len(got) != 1 || got[0]["failedAttempts"] != int64(1) {
		t.Fatalf("300 refusals in a minute recorded as %v, want one event counting 1", got)
	}
	offset.Store(int64(61 * time.Second))
	if _, err := f.svc.ExchangeSession(ctx, id); err == nil {
		t.Fatal("a used id was exchanged")
	}
	if got := refusals(); len(got) != 2 || got[1]["failedAttempts"] != int64(300) {
		t.Fatalf("after the interval: %v, want a second event counting the 299 unrecorded refusals and this one", got)
	}
}
