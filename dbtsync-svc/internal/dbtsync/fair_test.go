package dbtsync_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Free slots serve the accounts in turn, then each account's deployments in turn: an
// account with many full queues takes one slot in turn with each other account.
func TestFairSchedulerServesAccountsThenDeploymentsInTurn(t *testing.T) {
	var s dbtsync.FairScheduler
	queues := []dbtsync.QueueKey{{Account: 1, Deployment: 10}, {Account: 1, Deployment: 11}, {Account: 1, Deployment: 12}, {Account: 2, Deployment: 20}}
	var served []string
	for range 6 {
		k := s.Order(queues)[0]
		s.Served(k)
		served = append(served, fmt.Sprintf("%d/%d", k.Account, k.Deployment))
	}
	if want := "[1/10 2/20 1/11 2/20 1/12 2/20]"; fmt.Sprint(served) != want {
		t.Errorf("served %v, want %s", served, want)
	}
	// A queue that yields nothing (at its running limit) is passed over: the order
	// still lists every queue.
	if got := s.Order(queues); len(got) != 4 || got[0] != (dbtsync.QueueKey{Account: 1, Deployment: 10}) {
		t.Errorf("order %v", got)
	}
}

// A charge moves atomically against the quota, is applied once per change id, and never
// counts what has lapsed.
func TestLedgerCharges(t *testing.T) {
	var l dbtsync.Ledger
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	held := dbtsync.Charge{Held: 600, HoldMinute: now.Unix()/60 + 5}
	if err := dbtsync.MoveCharge(&l, "op1", dbtsync.Charge{}, held, 1000, now); err != nil {
		t.Fatal(err)
	}
	if err := dbtsync.MoveCharge(&l, "op1", dbtsync.Charge{}, held, 1000, now); err != nil || l.Used(now) != 600 {
		t.Fatalf("a repeated change: %v, used %d", err, l.Used(now))
	}
	if err := dbtsync.MoveCharge(&l, "op2", dbtsync.Charge{}, dbtsync.Charge{Held: 500, HoldMinute: held.HoldMinute}, 1000, now); err == nil {
		t.Fatal("a charge past the quota was applied")
	}
	stored := dbtsync.Charge{Stored: 550, StoredHour: now.Unix()/3600 + 2}
	if err := dbtsync.MoveCharge(&l, "op3", held, stored, 1000, now); err != nil || l.Used(now) != 550 {
		t.Fatalf("hold to stored: %v, used %d", err, l.Used(now))
	}
	if later := now.Add(3 * time.Hour); l.Used(later) != 0 {
		t.Errorf("a lapsed charge still counts %d", l.Used(later))
	}
	if err := dbtsync.MoveCharge(&l, "op4", dbtsync.Charge{Stored: 900, StoredHour: stored.StoredHour}, dbtsync.Charge{}, 1000, now); err != nil || l.Used(now) != 0 {
		t.Errorf("freeing more than held: %v, used %d", err, l.Used(now))
	}
}
