package auth

import (
	"sync"
	"time"
)

// Cache is a bounded map whose entries expire. When full it drops arbitrary
// entries (Go's map order is random), which bounds memory without an LRU's upkeep on
// the hot path.
type Cache[K comparable, V any] struct {
	mu  sync.RWMutex
	m   map[K]ttlEntry[V]
	max int
	now func() time.Time
}

type ttlEntry[V any] struct {
	v   V
	exp time.Time
}

// NewCache returns a cache of at most max entries using now as its clock.
func NewCache[K comparable, V any](max int, now func() time.Time) *Cache[K, V] {
	return &Cache[K, V]{m: make(map[K]ttlEntry[V]), max: max, now: now}
}

// Get returns the value of k unless it is missing or expired.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || !c.now().Before(e.exp) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put stores v under k until exp.
func (c *Cache[K, V]) Put(k K, v V, exp time.Time) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		n := c.max / 10
		for key := range c.m {
			delete(c.m, key)
			if n--; n <= 0 {
				break
			}
		}
	}
	c.m[k] = ttlEntry[V]{v: v, exp: exp}
	c.mu.Unlock()
}

// Len is the number of entries, expired ones included.
func (c *Cache[K, V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// Delete removes k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
