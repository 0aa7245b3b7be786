package dbtsync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// What deployments and accounts keep in the manifest store (uploaded manifests, files
// results) is charged to them in ledgers, one per deployment and one per account, each
// changed with compare-and-set (LedgerStore): a charge that would pass a quota is
// refused atomically, so concurrent uploads cannot all pass a quota that each of them
// alone fits, and the account's quota, well below the store's
// size, keeps one account from filling the store every tenant writes to.
//
// A charge is never kept per object, so a ledger stays small whatever the count of
// objects: an upload in progress holds bytes by the minute its hold lapses (it renews
// it while it streams; a crashed API's hold lapses by itself), and a stored object is
// charged by the hour the store removes it (its expiry, rounded up), so charges of
// objects the store expired lapse with them. Whoever deletes an object earlier frees its
// charge with the same amount and hour (kept in its job).

// Ledger is one deployment's or one account's charges.
type Ledger struct {
	Holds  map[int64]int64 `json:"holds,omitempty"`  // bytes held by uploads in progress, by the unix minute their hold lapses
	Stored map[int64]int64 `json:"stored,omitempty"` // bytes of stored objects, by the unix hour the store removes them
	// Ops are the ids of the last changes applied: a change retried because its reply
	// was lost (a leader change) is applied once.
	Ops []string `json:"ops,omitempty"`
}

// LedgerKey names a ledger.
type LedgerKey string

func deploymentLedger(deploymentID int64) LedgerKey {
	return LedgerKey("deployment." + strconv.FormatInt(deploymentID, 10))
}
func accountLedger(acc int64) LedgerKey { return LedgerKey("account." + strconv.FormatInt(acc, 10)) }

// keptOps is how many change ids a ledger remembers.
const keptOps = 64

// Charge is what one object (or upload in progress) is charged: bytes held until a
// minute, and bytes stored until an hour (unix).
type Charge struct {
	Held, HoldMinute   int64
	Stored, StoredHour int64
}

// Used is the bytes the ledger's charges hold at now.
func (l Ledger) Used(now time.Time) int64 {
	c := Ledger{Holds: maps.Clone(l.Holds), Stored: maps.Clone(l.Stored)}
	return c.total(now)
}

// total is the ledger's live charges at now, after dropping the lapsed ones.
func (l *Ledger) total(now time.Time) int64 {
	var t int64
	minute, hour := now.Unix()/60, now.Unix()/3600
	for m, b := range l.Holds {
		if m < minute {
			delete(l.Holds, m)
			continue
		}
		t += b
	}
	for h, b := range l.Stored {
		if h < hour {
			delete(l.Stored, h)
			continue
		}
		t += b
	}
	return t
}

func add(m map[int64]int64, k, b int64) map[int64]int64 {
	if b == 0 {
		return m
	}
	if m == nil {
		m = map[int64]int64{}
	}
	if m[k] += b; m[k] <= 0 {
		delete(m, k) // a charge freed after its bucket was partly pruned never goes negative
	}
	return m
}

// move changes one object's charge from from to to, refusing a growth past quota.
func (l *Ledger) move(op string, from, to Charge, quota int64, now time.Time) error {
	if slices.Contains(l.Ops, op) {
		return nil
	}
	total := l.total(now)
	l.Holds = add(l.Holds, from.HoldMinute, -from.Held)
	l.Stored = add(l.Stored, from.StoredHour, -from.Stored)
	after := l.total(now) + to.Held + to.Stored
	if grows := to.Held + to.Stored - from.Held - from.Stored; grows > 0 && after > quota {
		return errQuota{used: total, quota: quota}
	}
	l.Holds = add(l.Holds, to.HoldMinute, to.Held)
	l.Stored = add(l.Stored, to.StoredHour, to.Stored)
	l.Ops = append(l.Ops, op)
	if len(l.Ops) > keptOps {
		l.Ops = l.Ops[len(l.Ops)-keptOps:]
	}
	return nil
}

type errQuota struct{ used, quota int64 }

func (e errQuota) Error() string { return fmt.Sprintf("%d of %d bytes used", e.used, e.quota) }

// StorageQuotas are the bytes a deployment and an account may keep in the store.
type StorageQuotas struct {
	Deployment int64 // DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES
	Account    int64 // DBT_SYNC_MAX_ACCOUNT_UPLOAD_BYTES
}

// Defaults of the quotas: an account keeps a quarter of the store's default size.
const (
	DefaultDeploymentUploadBytes = 1 << 30
	DefaultAccountUploadBytes    = 2 << 30
)

// Storage charges objects to their deployment's and account's ledgers.
type Storage struct {
	Ledgers      LedgerStore
	Quotas       StorageQuotas
	ObjectMaxAge time.Duration // the store removes an object this long after it was written
	Now          func() time.Time
}

// holdLease is how long an upload's hold lasts without being renewed.
const holdLease = 10 * time.Minute

// charge moves the charge of an object of owner (account, deployment) from from to to
// in both ledgers, the deployment's first; a refusal names the quota it would pass
// (413) and leaves both as they were.
func (s *Storage) charge(ctx context.Context, acc, deploymentID int64, from, to Charge) error {
	now := s.Now()
	op := newOpID()
	if err := s.Ledgers.UpdateLedger(ctx, deploymentLedger(deploymentID), func(l *Ledger) error {
		return l.move(op, from, to, s.Quotas.Deployment, now)
	}); err != nil {
		return quotaError(err, "deployment", deploymentID, s.Quotas.Deployment)
	}
	err := s.Ledgers.UpdateLedger(ctx, accountLedger(acc), func(l *Ledger) error {
		return l.move(op, from, to, s.Quotas.Account, now)
	})
	if err != nil {
		back := newOpID()
		_ = s.Ledgers.UpdateLedger(context.WithoutCancel(ctx), deploymentLedger(deploymentID), func(l *Ledger) error {
			return l.move(back, to, from, s.Quotas.Deployment, now)
		})
		return quotaError(err, "account", acc, s.Quotas.Account)
	}
	return nil
}

func quotaError(err error, scope string, id, quota int64) error {
	var q errQuota
	if !errors.As(err, &q) {
		return err
	}
	return &QuotaError{Scope: fmt.Sprintf("%s %d", scope, id), Quota: quota, Used: q.used}
}

// QuotaError is a charge refused because it would pass a quota.
type QuotaError struct {
	Scope       string // "deployment 5", "account 1"
	Quota, Used int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s would pass its limit of %d bytes in the dbt sync object store (its uploaded manifests and files results hold %d); retry when its queued syncs have run or its results have expired",
		e.Scope, e.Quota, e.Used)
}

func newOpID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Hold makes held's hold cover need bytes (renewing it), taking room from both quotas.
func (s *Storage) Hold(ctx context.Context, acc, deploymentID int64, held Charge, need int64) (Charge, error) {
	to := Charge{Held: need, HoldMinute: s.Now().Add(holdLease).Unix()/60 + 1}
	if err := s.charge(ctx, acc, deploymentID, held, to); err != nil {
		return held, err
	}
	return to, nil
}

// StoredCharge is the charge of an object of size bytes written at written: until the
// hour after the store removes it.
func (s *Storage) StoredCharge(size int64, written time.Time) Charge {
	return Charge{Stored: size, StoredHour: written.Add(s.ObjectMaxAge).Unix()/3600 + 1}
}

// Move replaces a charge (a hold by the stored object's charge, or nothing by a
// result's); it refuses a growth past a quota.
func (s *Storage) Move(ctx context.Context, acc, deploymentID int64, from, to Charge) error {
	return s.charge(ctx, acc, deploymentID, from, to)
}

// Free releases a charge.
func (s *Storage) Free(ctx context.Context, acc, deploymentID int64, c Charge) error {
	return s.charge(ctx, acc, deploymentID, c, Charge{})
}
