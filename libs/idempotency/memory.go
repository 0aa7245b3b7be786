package idempotency

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is a Store in the process's memory, for tests of the middleware; the same
// contract suite (idemtest) runs against it and MongoStore.
type Memory struct {
	mu      sync.Mutex
	records map[Scope]*memRecord
	usage   map[string]Usage
}

type memRecord struct {
	token   string
	expires time.Time
	rec     Record
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{records: map[Scope]*memRecord{}, usage: map[string]Usage{}}
}

// Claim implements Store.
func (m *Memory) Claim(_ context.Context, sc Scope, now, leaseUntil, expires time.Time) (*Claim, *Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.records[sc]; ok && r.expires.After(now) && (!r.rec.Running || r.rec.LeaseUntil.After(now)) {
		rec := r.rec
		rec.Fingerprint = slices.Clone(rec.Fingerprint)
		rec.Answer.Body = slices.Clone(rec.Answer.Body)
		return nil, &rec, nil
	}
	tok := NewToken()
	m.records[sc] = &memRecord{token: tok, expires: expires, rec: Record{Running: true, LeaseUntil: leaseUntil}}
	return &Claim{Scope: sc, Token: tok}, nil, nil
}

func (m *Memory) owned(c *Claim) (*memRecord, error) {
	r, ok := m.records[c.Scope]
	if !ok || r.token != c.Token {
		return nil, ErrClaimLost
	}
	return r, nil
}

// Renew implements Store.
func (m *Memory) Renew(_ context.Context, c *Claim, leaseUntil time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.owned(c)
	if err != nil || !r.rec.Running {
		return ErrClaimLost
	}
	r.rec.LeaseUntil = leaseUntil
	return nil
}

// Complete implements Store.
func (m *Memory) Complete(_ context.Context, c *Claim, fp []byte, a Answer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.owned(c)
	if err != nil {
		return err
	}
	a.Body = slices.Clone(a.Body)
	r.rec = Record{Fingerprint: slices.Clone(fp), Answer: a}
	return nil
}

// Release implements Store.
func (m *Memory) Release(_ context.Context, c *Claim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.owned(c); err == nil {
		delete(m.records, c.Scope)
	}
	return nil
}

// Use implements Store.
func (m *Memory) Use(_ context.Context, account string, now time.Time, window time.Duration, records, bytes int64) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := BucketID(account, now)
	u := m.usage[id]
	u.Records += records
	u.Bytes += bytes
	m.usage[id] = u
	var sum Usage
	seen := map[string]bool{}
	for t := now.Add(-window); !t.After(now); t = t.Add(Bucket) {
		b := BucketID(account, t)
		if seen[b] {
			continue
		}
		seen[b] = true
		sum.Records += m.usage[b].Records
		sum.Bytes += m.usage[b].Bytes
	}
	if !seen[id] {
		sum.Records += u.Records
		sum.Bytes += u.Bytes
	}
	return sum, nil
}
