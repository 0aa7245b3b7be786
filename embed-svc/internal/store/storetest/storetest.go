// Package storetest holds the contract of embed-svc's store ports, one suite that every
// adapter runs: RunDurable for the catalog, user and session-record stores (mongostore
// on FerretDB behind the serializing proxy, memstore in memory), RunSessions for the
// session store (redisstore on redis-server, a Sentinel group and a Redis Cluster, and
// memstore's), so a test of the service on the fakes tests what production does. Every
// case runs in parallel with a store of its own, in an account of its own (and the
// session store's keys are random).
package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Durable is what mongostore.Store and memstore.Store both are.
type Durable interface {
	embed.CatalogStore
	embed.UserStore
	embed.SessionRecordStore
}

// RunDurable runs every case of the catalog, user, group-member and session-record
// contracts against a store newStore returns (one per case).
func RunDurable(t *testing.T, newStore func(t *testing.T) Durable) {
	run(t, "catalog-store", catalogCases, newStore)
	run(t, "user-store", userCases, newStore)
	run(t, "group-members", memberCases, newStore)
	run(t, "session-record-store", recordCases, newStore)
}

// RunSessions runs every case of the session store's contract against a store newStore
// returns (one per case).
func RunSessions(t *testing.T, newStore func(t *testing.T) embed.SessionStore) {
	run(t, "session-store", sessionCases, newStore)
}

// run runs the port's cases, all in parallel, each on a store of its own.
func run[S any](t *testing.T, port string, cases map[string]func(t *testing.T, s S), newStore func(t *testing.T) S) {
	t.Run(port, func(t *testing.T) {
		t.Parallel()
		for name, c := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c(t, newStore(t))
			})
		}
	})
}

var accounts atomic.Int64

func init() { accounts.Store(time.Now().UnixNano() % 1_000_000 * 1000) }

// Account is a fresh account id: a case's own data.
func Account() int64 { return accounts.Add(1) }

// at is a test time at millisecond precision, as the stores keep it.
func at(d time.Duration) time.Time {
	return time.Now().UTC().Truncate(time.Millisecond).Add(d)
}

// together runs fn(i) n times at once and waits.
func together(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func ptr[T any](v T) *T { return &v }
