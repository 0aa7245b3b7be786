package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// writes records what each flush wrote.
type writes struct {
	mu    sync.Mutex
	calls []map[string]time.Time
	fail  bool
}

func (w *writes) MarkAPIKeysUsed(_ context.Context, used map[string]time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail {
		return errors.New("store down")
	}
	w.calls = append(w.calls, used)
	return nil
}

// A key used many times between two flushes costs one write of its latest use; a flush
// that fails keeps the marks for the next; a key not used since is not written again.
func TestLastUseIsOneWritePerKeyAndFlush(t *testing.T) {
	a := New(Options{})
	w := &writes{}
	base := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for i := range 1000 {
		a.used.mark("aaaaaaaaaaaaaaaa", base.Add(time.Duration(i)*time.Millisecond))
	}
	a.used.mark("bbbbbbbbbbbbbbbb", base)
	w.fail = true
	if _, err := a.FlushLastUsed(t.Context(), w); err == nil {
		t.Fatal("a failed flush reported no error")
	}
	w.fail = false
	n, err := a.FlushLastUsed(t.Context(), w)
	if err != nil || n != 2 || len(w.calls) != 1 {
		t.Fatalf("flush after 1001 uses of 2 keys: %d keys, %d writes, %v; want 2 keys in 1 write", n, len(w.calls), err)
	}
	if got := w.calls[0]["aaaaaaaaaaaaaaaa"]; !got.Equal(base.Add(999 * time.Millisecond)) {
		t.Fatalf("the written last use is %v, want the latest mark", got)
	}
	if n, _ := a.FlushLastUsed(t.Context(), w); n != 0 {
		t.Fatalf("a flush with no use since wrote %d keys", n)
	}
}

// The background flush writes at most once per interval, and once more when it stops.
func TestLastUseFlushRunsPerIntervalAndAtTheEnd(t *testing.T) {
	a := New(Options{})
	w := &writes{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { a.RunLastUsedFlush(ctx, w, time.Hour, nil); close(done) }()
	for range 100 {
		a.used.mark("cccccccccccccccc", time.Now())
	}
	cancel()
	<-done
	if len(w.calls) != 1 || len(w.calls[0]) != 1 {
		t.Fatalf("writes %v: want the one flush at the end, of one key", w.calls)
	}
}
