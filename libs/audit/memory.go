package audit

import (
	"context"
	"sync"
	"time"
)

// Memory is a Recorder that keeps events in memory, completed as publish.Publisher
// completes them: for tests of what a service records.
type Memory struct {
	Service string
	mu      sync.Mutex
	events  []Event
}

// Record keeps the events.
func (m *Memory) Record(ctx context.Context, events ...Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range events {
		Complete(ctx, &ev, m.Service, time.Now())
		m.events = append(m.events, ev)
	}
}

// Events returns the events recorded so far, oldest first.
func (m *Memory) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events...)
}

// Reset forgets the events recorded so far.
func (m *Memory) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = nil
}
