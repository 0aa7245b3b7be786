package auditstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	auditsvc "github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/libs/audit"
)

// Memory is the Store in memory, for tests of what uses a Store; the contract test
// holds it to Mongo's behaviour.
type Memory struct {
	mu      sync.Mutex
	events  map[string]audit.Event
	budgets map[string]int64
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{events: map[string]audit.Event{}, budgets: map[string]int64{}}
}

// Admit adds n to the account's count of the window and returns the count before.
func (m *Memory) Admit(_ context.Context, accountID int64, window time.Time, n int) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := fmt.Sprintf("%d:%d", accountID, window.UnixMilli())
	before := m.budgets[k]
	m.budgets[k] = before + int64(n)
	return before, nil
}

// Merge adds each count to its window's summary event, inserting it the first time.
func (m *Memory) Merge(_ context.Context, merged []auditsvc.Merged) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mg := range merged {
		ev := mg.Event()
		if stored, ok := m.events[ev.ID]; ok {
			ev = stored
		}
		n, _ := ev.Details["merged"].(int64)
		ev.Details["merged"] = n + int64(mg.Count)
		m.events[ev.ID] = ev
	}
	return nil
}

// Insert stores events; those already stored are left as they are.
func (m *Memory) Insert(_ context.Context, events []audit.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range events {
		if _, ok := m.events[ev.ID]; !ok {
			ev.Time = ev.Time.UTC()
			m.events[ev.ID] = ev
		}
	}
	return nil
}

// Stored reports which of ids are stored.
func (m *Memory) Stored(_ context.Context, ids []string) (map[string]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for _, id := range ids {
		if _, ok := m.events[id]; ok {
			out[id] = true
		}
	}
	return out, nil
}

// List returns up to limit events of the account matching f, newest first.
func (m *Memory) List(_ context.Context, accountID int64, f auditsvc.Filter, limit int) ([]audit.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Event
	for _, ev := range m.events {
		if ev.AccountID == accountID && matches(ev, f) {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b audit.Event) int { return strings.Compare(b.ID, a.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func matches(ev audit.Event, f auditsvc.Filter) bool {
	switch {
	case f.Action != "" && ev.Action != f.Action,
		f.ActionPrefix != "" && !strings.HasPrefix(ev.Action, f.ActionPrefix),
		f.Actor != "" && !slices.Contains(ActorKeys(ev.Actor), f.Actor),
		f.Deployments != nil && !slices.Contains(f.Deployments, ev.DeploymentID),
		f.TargetType != "" && ev.Target.Type != f.TargetType,
		f.TargetID != "" && ev.Target.ID != f.TargetID,
		!f.From.IsZero() && ev.ID < audit.IDAt(f.From),
		!f.To.IsZero() && ev.ID >= audit.IDAt(f.To),
		f.BeforeID != "" && ev.ID >= f.BeforeID:
		return false
	}
	return true
}
