package publish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/logging"
)

// memOutbox is an Outbox in memory that can be made to fail.
type memOutbox struct {
	mu   sync.Mutex
	evs  []publish.Pending
	down bool
}

func (o *memOutbox) Put(_ context.Context, evs []publish.Pending) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return errors.New("outbox down")
	}
	o.evs = append(o.evs, evs...)
	return nil
}

func (o *memOutbox) Take(_ context.Context, limit int) ([]publish.Pending, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return nil, errors.New("outbox down")
	}
	return append([]publish.Pending(nil), o.evs[:min(limit, len(o.evs))]...), nil
}

func (o *memOutbox) Remove(_ context.Context, ids []string) error { return nil }

func (o *memOutbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.evs)
}

type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestWithoutTheStreamEventsGoToTheOutboxElseMemory(t *testing.T) {
	var out lines
	ob := &memOutbox{}
	p, err := publish.NewPublisher(publish.Options{Service: "workspace-svc", Outbox: ob, Logger: logging.New(&out, "info", "workspace-svc"), MaxHeld: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := logging.WithRequest(context.Background(), &logging.RequestInfo{ID: "req-1"})
	ev := audit.Event{AccountID: 1, Action: "workspace.folder.create", Target: audit.Target{Type: "folder", ID: "9"}}
	p.Record(ctx, ev)
	if ob.len() != 1 {
		t.Fatalf("outbox holds %d events, want 1", ob.len())
	}
	var got audit.Event
	if err := json.Unmarshal(ob.evs[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	if !audit.ValidID(got.ID) || got.ID != ob.evs[0].ID || got.Service != "workspace-svc" || got.RequestID != "req-1" ||
		got.Outcome.Result != audit.Success || got.Time.IsZero() || ob.evs[0].Subject != "audit.events.workspace-svc" {
		t.Fatalf("outboxed event %+v (subject %q)", got, ob.evs[0].Subject)
	}
	// One log line per event, carrying the event.
	var line struct {
		Msg   string      `json:"msg"`
		Audit audit.Event `json:"audit"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &line); err != nil || line.Msg != "audit event" || line.Audit.ID != got.ID {
		t.Fatalf("log %q: %v", out.String(), err)
	}

	// Outbox down too: held in memory, at most MaxHeld, the oldest dropped.
	ob.down = true
	for i := 0; i < 5; i++ {
		p.Record(ctx, ev)
	}
	if n := p.Flush(ctxTimeout(t, 50*time.Millisecond)); n != 3 {
		t.Fatalf("held %d events, want MaxHeld 3", n)
	}
	if !strings.Contains(out.String(), "audit event dropped") {
		t.Errorf("no log line for the dropped events")
	}
	// The outbox is back: Flush hands the held events to it.
	ob.down = false
	if n := p.Flush(ctxTimeout(t, 5*time.Second)); n != 0 || ob.len() != 4 {
		t.Fatalf("after the outbox came back: %d held, %d in the outbox, want 0 and 4", n, ob.len())
	}
}

func TestEventsOfNoAccountAreOnlyLogged(t *testing.T) {
	var out lines
	ob := &memOutbox{}
	p, _ := publish.NewPublisher(publish.Options{Service: "embed-svc", Outbox: ob, Logger: slog.New(slog.NewJSONHandler(&out, nil))})
	p.Record(context.Background(), audit.Event{Action: "embed.session.exchange", Outcome: audit.Failed(401, "session_id_invalid")})
	if ob.len() != 0 || p.Flush(context.Background()) != 0 {
		t.Fatalf("an event of no account was kept")
	}
	if !strings.Contains(out.String(), `"action":"embed.session.exchange"`) {
		t.Fatalf("not logged: %q", out.String())
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
