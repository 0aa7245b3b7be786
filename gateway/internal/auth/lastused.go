package auth

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// usage marks when each API key was last used on this replica, in memory: a request
// costs an atomic store (a map insert the first time a key is seen since the last
// flush), never a database write. FlushLastUsed writes the marks out.
type usage struct {
	mu    sync.RWMutex
	marks map[string]*atomic.Int64 // key id -> unix milliseconds of its last use
}

func newUsage() *usage { return &usage{marks: map[string]*atomic.Int64{}} }

// maxMarks bounds the keys marked between two flushes; past it, new keys' uses are not
// marked until the next flush (lastUsedAt is a hint, not an account of every use).
const maxMarks = 100_000

func (u *usage) mark(keyID string, at time.Time) {
	ms := at.UnixMilli()
	u.mu.RLock()
	m, ok := u.marks[keyID]
	u.mu.RUnlock()
	if !ok {
		u.mu.Lock()
		if m, ok = u.marks[keyID]; !ok {
			if len(u.marks) >= maxMarks {
				u.mu.Unlock()
				return
			}
			m = new(atomic.Int64)
			u.marks[keyID] = m
		}
		u.mu.Unlock()
	}
	if m.Load() < ms {
		m.Store(ms)
	}
}

// take returns the marks and forgets them.
func (u *usage) take() map[string]time.Time {
	u.mu.Lock()
	marks := u.marks
	u.marks = map[string]*atomic.Int64{}
	u.mu.Unlock()
	out := make(map[string]time.Time, len(marks))
	for id, m := range marks {
		out[id] = time.UnixMilli(m.Load()).UTC()
	}
	return out
}

// LastUsedWriter stores the keys' last uses (store.Store.MarkAPIKeysUsed).
type LastUsedWriter interface {
	MarkAPIKeysUsed(ctx context.Context, used map[string]time.Time) error
}

// FlushLastUsed writes the last use of every key used since the previous flush, in one
// bulk write, and returns how many keys it wrote. On failure the marks are kept for the
// next flush.
func (a *Authenticator) FlushLastUsed(ctx context.Context, w LastUsedWriter) (int, error) {
	used := a.used.take()
	if err := w.MarkAPIKeysUsed(ctx, used); err != nil {
		for id, at := range used {
			a.used.mark(id, at)
		}
		return 0, err
	}
	return len(used), nil
}

// RunLastUsedFlush flushes the marks every interval until ctx ends, and once more then:
// a key's lastUsedAt is at most one interval behind its last use on any replica.
func (a *Authenticator) RunLastUsedFlush(ctx context.Context, w LastUsedWriter, interval time.Duration, flushed func(n int)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = a.FlushLastUsed(fctx, w)
			cancel()
			return
		case <-t.C:
		}
		n, err := a.FlushLastUsed(ctx, w)
		if err != nil {
			if a.log != nil && ctx.Err() == nil {
				a.log.Warn("writing API keys' last use failed; kept for the next flush", "err", err)
			}
			continue
		}
		if flushed != nil {
			flushed(n)
		}
	}
}
