// Package audittest is the contract suite of the audit trail's Store port: the MongoDB
// adapter and the in-memory fake run it, so what the service tests on the fake is what
// production does. Each case works in accounts of its own.
package audittest

import (
	"context"
	"strconv"
	"testing"
	"time"

	auditsvc "github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/libs/audit"
)

// Run holds the Store newStore makes to the contract.
func Run(t *testing.T, newStore func(t *testing.T) auditsvc.Store) {
	t.Helper()
	contract(t, newStore(t))
}

var base = time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)

func event(acc int64, at time.Duration, action string, mod func(*audit.Event)) audit.Event {
	ev := audit.Event{ID: audit.NewID(base.Add(at)), Time: base.Add(at), Service: "workspace-svc", AccountID: acc, Action: action,
		Actor: audit.Actor{Type: audit.ActorUser, ID: "7", UserID: 7}, Target: audit.Target{Type: "folder", ID: "1"},
		Outcome: audit.Succeeded(200), RequestID: "r", ClientRequestID: "client-r", TraceID: "t", ClientAddr: "192.0.2.1"}
	if mod != nil {
		mod(&ev)
	}
	return ev
}

// number is a detail's numeric value, whichever number type the store decoded it as.
func number(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return -1
}

func ids(evs []audit.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func contract(t *testing.T, s auditsvc.Store) {
	ctx := context.Background()
	var evs []audit.Event
	for i := range 10 {
		evs = append(evs, event(1, time.Duration(i)*time.Second, "workspace.folder.create", func(e *audit.Event) {
			e.DeploymentID = int64(1 + i%2)
			e.Target.ID = strconv.Itoa(i)
		}))
	}
	evs = append(evs,
		event(1, 20*time.Second, "embed.session.generate", func(e *audit.Event) {
			e.Actor = audit.Actor{Type: audit.ActorAPIKey, ID: "0123456789abcdef", APIKeyID: "0123456789abcdef", UserID: 8}
			e.Target = audit.Target{Type: "embed_session", ID: "s1"}
			e.Outcome = audit.Failed(403, "external_user_limit")
			e.Details = map[string]any{"externalId": "ext-1", "count": 3.0}
		}),
		event(1, 21*time.Second, "embed.session.exchange", func(e *audit.Event) {
			e.Actor = audit.Actor{Type: audit.ActorEmbedUser, ExternalID: "ext-1", EmbedTenant: "tenant-a"}
		}),
		event(2, 5*time.Second, "workspace.folder.create", nil), // another account
	)
	if err := s.Insert(ctx, evs); err != nil {
		t.Fatal(err)
	}
	// Idempotent: the stream redelivers; a second insert of the same ids changes nothing.
	dup := evs[0]
	dup.Action = "changed"
	if err := s.Insert(ctx, []audit.Event{dup, evs[1]}); err != nil {
		t.Fatalf("insert of stored ids: %v", err)
	}
	t.Run("stored-names-the-stored-ids-only", func(t *testing.T) {
		unknown := audit.NewID(base.Add(time.Hour))
		got, err := s.Stored(ctx, []string{evs[0].ID, unknown, evs[12].ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !got[evs[0].ID] || !got[evs[12].ID] || got[unknown] {
			t.Errorf("stored: %v, want %s and %s only", got, evs[0].ID, evs[12].ID)
		}
	})

	list := func(f auditsvc.Filter, limit int) []audit.Event {
		t.Helper()
		got, err := s.List(ctx, 1, f, limit)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Run("newest-first-one-account-round-trip", func(t *testing.T) {
		got := list(auditsvc.Filter{}, 100)
		if len(got) != 12 {
			t.Fatalf("got %d events of account 1, want 12", len(got))
		}
		for i := 1; i < len(got); i++ {
			if got[i-1].ID <= got[i].ID {
				t.Fatalf("not newest first at %d: %v", i, ids(got))
			}
		}
		if got[len(got)-1].Action != "workspace.folder.create" {
			t.Fatalf("the stored event changed on a second insert: %+v", got[len(got)-1])
		}
		gen := got[1]
		want := evs[10]
		if gen.ID != want.ID || !gen.Time.Equal(want.Time) || gen.Actor != want.Actor || gen.Outcome != want.Outcome ||
			gen.Target != want.Target || gen.Details["externalId"] != "ext-1" || gen.Details["count"] != 3.0 ||
			gen.RequestID != "r" || gen.ClientRequestID != "client-r" || gen.TraceID != "t" || gen.ClientAddr != "192.0.2.1" || gen.Service != "workspace-svc" {
			t.Fatalf("round trip:\n got %+v\nwant %+v", gen, want)
		}
	})
	cases := []struct {
		name string
		f    auditsvc.Filter
		want int
	}{
		{"action", auditsvc.Filter{Action: "embed.session.generate"}, 1},
		{"action-group", auditsvc.Filter{ActionPrefix: "embed.session."}, 2},
		{"action-group-is-a-prefix-not-a-pattern", auditsvc.Filter{ActionPrefix: "embed.s.ssion."}, 0},
		{"actor-user-id", auditsvc.Filter{Actor: "7"}, 10},
		{"actor-key-owner", auditsvc.Filter{Actor: "8"}, 1},
		{"actor-api-key-id", auditsvc.Filter{Actor: "0123456789abcdef"}, 1},
		{"actor-external-id", auditsvc.Filter{Actor: "ext-1"}, 1},
		{"deployment", auditsvc.Filter{Deployments: []int64{2}}, 5},
		{"deployments-exclude-account-events", auditsvc.Filter{Deployments: []int64{1, 2}}, 10},
		{"target", auditsvc.Filter{TargetType: "folder", TargetID: "3"}, 1},
		{"target-type", auditsvc.Filter{TargetType: "embed_session"}, 1},
		{"from-inclusive", auditsvc.Filter{From: base.Add(5 * time.Second)}, 7},
		{"to-exclusive", auditsvc.Filter{To: base.Add(5 * time.Second)}, 5},
		{"range", auditsvc.Filter{From: base.Add(2 * time.Second), To: base.Add(4 * time.Second)}, 2},
		{"combined", auditsvc.Filter{Action: "workspace.folder.create", Deployments: []int64{1}, From: base.Add(4 * time.Second)}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := list(c.f, 100); len(got) != c.want {
				t.Fatalf("got %d events %v, want %d", len(got), ids(got), c.want)
			}
		})
	}
	t.Run("pages-follow-the-cursor-without-gaps", func(t *testing.T) {
		all := ids(list(auditsvc.Filter{}, 100))
		var seen []string
		f := auditsvc.Filter{}
		for {
			page := list(f, 5)
			seen = append(seen, ids(page)...)
			if len(page) < 5 {
				break
			}
			f.BeforeID = page[len(page)-1].ID
		}
		if len(seen) != len(all) {
			t.Fatalf("paged %d events, want %d", len(seen), len(all))
		}
		for i := range all {
			if seen[i] != all[i] {
				t.Fatalf("page order differs at %d", i)
			}
		}
	})
	t.Run("budget-counts-per-account-and-window", func(t *testing.T) {
		w := base.Add(time.Hour)
		for _, step := range []struct {
			acc        int64
			window     time.Time
			n          int
			wantBefore int64
		}{
			{3, w, 3, 0}, {3, w, 2, 3}, {3, w, 1, 5}, {4, w, 1, 0}, {3, w.Add(time.Minute), 1, 0},
		} {
			got, err := s.Admit(ctx, step.acc, step.window, step.n)
			if err != nil || got != step.wantBefore {
				t.Fatalf("Admit(%d, %s, %d) = %d %v, want %d", step.acc, step.window, step.n, got, err, step.wantBefore)
			}
		}
	})
	t.Run("merged-counts-add-up-in-one-summary-event", func(t *testing.T) {
		m := auditsvc.Merged{AccountID: 5, Window: base.Add(2 * time.Hour), Length: time.Minute, Limit: 10, Count: 4}
		if err := s.Merge(ctx, []auditsvc.Merged{m}); err != nil {
			t.Fatal(err)
		}
		m.Count = 3
		if err := s.Merge(ctx, []auditsvc.Merged{m, {AccountID: 6, Window: m.Window, Length: time.Minute, Limit: 10, Count: 1}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.List(ctx, 5, auditsvc.Filter{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("account 5 has %d events, want its one summary", len(got))
		}
		ev, want := got[0], m.Event()
		if ev.ID != want.ID || !ev.Time.Equal(want.Time) || ev.Action != auditsvc.ActionMerged || ev.Actor.Type != audit.ActorSystem ||
			ev.Target != want.Target || ev.Service != "embed-svc" || number(ev.Details["merged"]) != 7 || number(ev.Details["limit"]) != 10 ||
			number(ev.Details["windowSeconds"]) != 60 || len(ev.Details) != 3 {
			// The tenant reads the budget (limit, windowSeconds), never the operator's setting.
			t.Fatalf("summary %+v, want %+v with details.merged 7, limit and windowSeconds only", ev, want)
		}
		other, _ := s.List(ctx, 6, auditsvc.Filter{}, 10)
		if len(other) != 1 || number(other[0].Details["merged"]) != 1 || other[0].ID == ev.ID {
			t.Fatalf("account 6's summary: %+v", other)
		}
	})
	t.Run("cursor-and-to-together", func(t *testing.T) {
		got := list(auditsvc.Filter{To: base.Add(8 * time.Second), BeforeID: evs[3].ID}, 100)
		if len(got) != 3 {
			t.Fatalf("got %v, want the 3 events before the cursor", ids(got))
		}
	})
}

// Event is an event of account acc at base+at with action, changed by mod: what the
// adapters' own tests insert.
func Event(acc int64, at time.Duration, action string, mod func(*audit.Event)) audit.Event {
	return event(acc, at, action, mod)
}

// IDs are the events' ids, in their order.
func IDs(evs []audit.Event) []string { return ids(evs) }
