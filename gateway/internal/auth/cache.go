package auth

import (
	"sync"
	"time"
)

// ttlCache is a bounded map whose entries expire. When full it drops arbitrary
// entries (Go's map order is random), which bounds memory without an LRU's upkeep on
// the hot path.
type ttlCache[K comparable, V any] struct {
	mu   sync.RWMutex
	m    map[K]ttlEntry[V]
	max  int
	now  func() time.Time
	hits func()
}

type ttlEntry[V any] struct {
	v   V
	exp time.Time
}

func newTTLCache[K comparable, V any](max int, now func() time.Time) *ttlCache[K, V] {
	return &ttlCache[K, V]{m: make(map[K]ttlEntry[V]), max: max, now: now}
}

func (c *ttlCache[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || !c.now().Before(e.exp) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[K, V]) put(k K, v V, exp time.Time) {
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

func (c *ttlCache[K, V]) delete(k K) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

func (c *ttlCache[K, V]) deleteFunc(fn func(V) bool) {
	c.mu.Lock()
	for k, e := range c.m {
		if fn(e.v) {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}
