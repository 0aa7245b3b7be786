// Package memqueue is an in-memory dbtsync.JobQueue, dbtsync.JobFeed,
// dbtsync.ManifestStore and dbtsync.LedgerStore, for unit tests of the service and the
// worker without NATS. The contract suite (internal/queue/queuetest) runs against it and
// against the JetStream adapter, so both behave alike.
package memqueue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Queue keeps jobs, lines, deliveries, objects and ledgers in memory; it is safe for
// concurrent use.
type Queue struct {
	mu          sync.Mutex
	limits      Limits
	jobs        map[jobKey]*entry
	lines       map[lineKey][]string
	queues      map[dbtsync.QueueKey]*depQueue
	wake        chan struct{} // a delivery may be ready
	manifests   map[string]manifest
	results     map[string][]byte
	ledgers     map[dbtsync.LedgerKey]*ledger
	unavailable bool
}

// Limits are a deployment's queue limits; zero fields take the defaults.
type Limits struct {
	MaxQueued  int // jobs queued or running (dbtsync.DefaultMaxQueuedJobs)
	MaxRunning int // deliveries out at once (dbtsync.DefaultMaxRunningJobs)
}

type ledger struct {
	l   dbtsync.Ledger
	rev uint64
}

type jobKey struct {
	deploymentID int64
	id           string
}

type lineKey struct {
	deploymentID int64
	branch       string
}

// entry is a job with its revision (for UpdateJob's compare-and-set) and the channels of
// its cancel watchers.
type entry struct {
	job      dbtsync.Job
	rev      uint64
	watchers []chan struct{}
}

type manifest struct {
	deploymentID int64
	data         []byte
}

// New returns an empty queue with the default limits.
func New() *Queue { return NewWithLimits(Limits{}) }

// NewWithLimits returns an empty queue with limits.
func NewWithLimits(l Limits) *Queue {
	if l.MaxQueued <= 0 {
		l.MaxQueued = dbtsync.DefaultMaxQueuedJobs
	}
	if l.MaxRunning <= 0 {
		l.MaxRunning = dbtsync.DefaultMaxRunningJobs
	}
	return &Queue{limits: l, jobs: map[jobKey]*entry{}, lines: map[lineKey][]string{}, queues: map[dbtsync.QueueKey]*depQueue{},
		wake: make(chan struct{}, 1), manifests: map[string]manifest{}, results: map[string][]byte{}, ledgers: map[dbtsync.LedgerKey]*ledger{}}
}

// SetUnavailable makes every call fail as an unreachable NATS would (true), or work
// again (false).
func (q *Queue) SetUnavailable(down bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unavailable = down
}

var errDown = dbtsync.QueueUnavailable(errors.New("memqueue: no servers available for connection"))

// lock takes the queue, or reports it unreachable.
func (q *Queue) lock() error {
	q.mu.Lock()
	if q.unavailable {
		q.mu.Unlock()
		return errDown
	}
	return nil
}

// Enqueue records the job, puts it in its branch's line and queues a delivery with ctx's
// trace context on its deployment's queue, unless that holds its limit of jobs.
func (q *Queue) Enqueue(ctx context.Context, j dbtsync.Job) error {
	if err := q.lock(); err != nil {
		return err
	}
	k := jobKey{j.DeploymentID, j.SyncJobID}
	if _, ok := q.jobs[k]; ok {
		q.mu.Unlock()
		return dbtsync.QueueUnavailable(fmt.Errorf("memqueue: job %s exists", j.SyncJobID))
	}
	qk := dbtsync.QueueKey{Account: j.AccountID, Deployment: j.DeploymentID}
	dq := q.queueOf(qk)
	if dq.jobs >= q.limits.MaxQueued {
		q.mu.Unlock()
		return dbtsync.ErrJobLimit
	}
	dq.jobs++
	q.jobs[k] = &entry{job: copyJob(j), rev: 1}
	lk := lineKey{j.DeploymentID, j.BranchName}
	q.lines[lk] = append(q.lines[lk], j.SyncJobID)
	q.mu.Unlock()
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	q.ready(&delivery{q: q, key: qk, id: j.SyncJobID, trace: carrier}, false)
	return nil
}

// QueuedJobs is how many jobs of the deployment are queued or running.
func (q *Queue) QueuedJobs(_ context.Context, k dbtsync.QueueKey) (int, error) {
	if err := q.lock(); err != nil {
		return 0, err
	}
	defer q.mu.Unlock()
	if dq := q.queues[k]; dq != nil {
		return dq.jobs, nil
	}
	return 0, nil
}

// copyJob returns j with its own slices and pointers, so callers never share memory with
// the queue.
func copyJob(j dbtsync.Job) dbtsync.Job {
	j.Warnings = slices.Clone(j.Warnings)
	j.Ref = clonePtr(j.Ref)
	j.Error = clonePtr(j.Error)
	j.StartedAt = clonePtr(j.StartedAt)
	j.FinishedAt = clonePtr(j.FinishedAt)
	j.Changed = clonePtr(j.Changed)
	j.Progress.ModelsTotal = clonePtr(j.Progress.ModelsTotal)
	j.Select, j.Exclude = clonePtr(j.Select), clonePtr(j.Exclude)
	if j.Selection != nil {
		sel := *j.Selection
		sel.Kept, sel.Dropped = slices.Clone(sel.Kept), slices.Clone(sel.Dropped)
		j.Selection = &sel
	}
	return j
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Job reads a job.
func (q *Queue) Job(_ context.Context, deploymentID int64, id string) (dbtsync.Job, error) {
	if err := q.lock(); err != nil {
		return dbtsync.Job{}, err
	}
	defer q.mu.Unlock()
	e, ok := q.jobs[jobKey{deploymentID, id}]
	if !ok {
		return dbtsync.Job{}, dbtsync.ErrNotFound
	}
	return copyJob(e.job), nil
}

// UpdateJob applies fn outside the lock and stores the result if nobody changed the job
// in between, as the JetStream adapter's compare-and-set does.
func (q *Queue) UpdateJob(_ context.Context, deploymentID int64, id string, fn func(*dbtsync.Job) error) (dbtsync.Job, error) {
	for {
		if err := q.lock(); err != nil {
			return dbtsync.Job{}, err
		}
		e, ok := q.jobs[jobKey{deploymentID, id}]
		if !ok {
			q.mu.Unlock()
			return dbtsync.Job{}, dbtsync.ErrNotFound
		}
		j, rev := copyJob(e.job), e.rev
		q.mu.Unlock()
		if err := fn(&j); err != nil {
			return dbtsync.Job{}, err
		}
		if err := q.lock(); err != nil {
			return dbtsync.Job{}, err
		}
		if e.rev != rev {
			q.mu.Unlock()
			continue
		}
		e.job, e.rev = copyJob(j), e.rev+1
		if j.CancelRequested {
			for _, w := range e.watchers {
				close(w)
			}
			e.watchers = nil
		}
		q.mu.Unlock()
		return j, nil
	}
}

// JobPage lists the deployment's job ids, newest first (ids are time-ordered), a page
// after the cursor (a job id).
func (q *Queue) JobPage(_ context.Context, deploymentID int64, after string, first int) ([]string, string, bool, error) {
	if err := q.lock(); err != nil {
		return nil, "", false, err
	}
	defer q.mu.Unlock()
	var ids []string
	for k := range q.jobs {
		if k.deploymentID == deploymentID {
			ids = append(ids, k.id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	start := 0
	if after != "" {
		i := slices.Index(ids, after)
		if i < 0 {
			return nil, "", false, dbtsync.ErrBadCursor
		}
		start = i + 1
	}
	end := min(start+first, len(ids))
	page := ids[start:end]
	if len(page) == 0 {
		return nil, "", false, nil
	}
	return page, page[len(page)-1], end < len(ids), nil
}

// UpdateLedger applies fn to the ledger with compare-and-set, as the JetStream
// adapter's KV update does (fn runs outside the lock).
func (q *Queue) UpdateLedger(_ context.Context, key dbtsync.LedgerKey, fn func(*dbtsync.Ledger) error) error {
	for {
		if err := q.lock(); err != nil {
			return err
		}
		cur := q.ledgers[key]
		var l dbtsync.Ledger
		var rev uint64
		if cur != nil {
			l, rev = copyLedger(cur.l), cur.rev
		}
		q.mu.Unlock()
		if err := fn(&l); err != nil {
			return err
		}
		if err := q.lock(); err != nil {
			return err
		}
		if now := q.ledgers[key]; (now == nil && rev != 0) || (now != nil && now.rev != rev) {
			q.mu.Unlock()
			continue
		}
		q.ledgers[key] = &ledger{l: copyLedger(l), rev: rev + 1}
		q.mu.Unlock()
		return nil
	}
}

func copyLedger(l dbtsync.Ledger) dbtsync.Ledger {
	return dbtsync.Ledger{Holds: maps.Clone(l.Holds), Stored: maps.Clone(l.Stored), Ops: slices.Clone(l.Ops)}
}

// LineHead is the job at the head of the branch's line.
func (q *Queue) LineHead(_ context.Context, deploymentID int64, branch string) (string, error) {
	if err := q.lock(); err != nil {
		return "", err
	}
	defer q.mu.Unlock()
	if line := q.lines[lineKey{deploymentID, branch}]; len(line) > 0 {
		return line[0], nil
	}
	return "", nil
}

// LeaveLine takes the job out of its branch's line.
func (q *Queue) LeaveLine(_ context.Context, deploymentID int64, branch, id string) error {
	if err := q.lock(); err != nil {
		return err
	}
	defer q.mu.Unlock()
	lk := lineKey{deploymentID, branch}
	q.lines[lk] = slices.DeleteFunc(q.lines[lk], func(s string) bool { return s == id })
	return nil
}

// WatchCancel returns a channel closed at the first update that requests a cancel (the
// watch outlives ctx: closing it then is harmless).
func (q *Queue) WatchCancel(_ context.Context, deploymentID int64, id string) (<-chan struct{}, error) {
	if err := q.lock(); err != nil {
		return nil, err
	}
	defer q.mu.Unlock()
	ch := make(chan struct{})
	if e, ok := q.jobs[jobKey{deploymentID, id}]; ok {
		e.watchers = append(e.watchers, ch)
	}
	return ch, nil
}
