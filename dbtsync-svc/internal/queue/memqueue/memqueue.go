// Package memqueue is an in-memory dbtsync.JobQueue, dbtsync.JobFeed and
// dbtsync.ManifestStore, for unit tests of the service and the worker without NATS. The
// contract suite of internal/queue runs against it and against the JetStream adapter, so
// both behave alike.
package memqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Queue keeps jobs, lines, deliveries and objects in memory; it is safe for concurrent use.
type Queue struct {
	mu          sync.Mutex
	jobs        map[jobKey]*entry
	lines       map[lineKey][]string
	manifests   map[string]manifest
	results     map[string][]byte
	pending     chan *delivery // deliveries waiting for a consumer
	unavailable bool
}

type jobKey struct {
	dep int64
	id  string
}

type lineKey struct {
	dep    int64
	branch string
}

// entry is a job with its revision (for UpdateJob's compare-and-set) and the channels of
// its cancel watchers.
type entry struct {
	job      dbtsync.Job
	rev      uint64
	watchers []chan struct{}
}

type manifest struct {
	dep  int64
	data []byte
}

// New returns an empty queue.
func New() *Queue {
	return &Queue{jobs: map[jobKey]*entry{}, lines: map[lineKey][]string{}, manifests: map[string]manifest{},
		results: map[string][]byte{}, pending: make(chan *delivery, 1024)}
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
// trace context.
func (q *Queue) Enqueue(ctx context.Context, j dbtsync.Job) error {
	if err := q.lock(); err != nil {
		return err
	}
	defer q.mu.Unlock()
	k := jobKey{j.DeploymentID, j.SyncJobID}
	if _, ok := q.jobs[k]; ok {
		return dbtsync.QueueUnavailable(fmt.Errorf("memqueue: job %s exists", j.SyncJobID))
	}
	q.jobs[k] = &entry{job: copyJob(j), rev: 1}
	lk := lineKey{j.DeploymentID, j.BranchName}
	q.lines[lk] = append(q.lines[lk], j.SyncJobID)
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	q.deliver(&delivery{q: q, dep: j.DeploymentID, id: j.SyncJobID, trace: carrier})
	return nil
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
func (q *Queue) Job(_ context.Context, dep int64, id string) (dbtsync.Job, error) {
	if err := q.lock(); err != nil {
		return dbtsync.Job{}, err
	}
	defer q.mu.Unlock()
	e, ok := q.jobs[jobKey{dep, id}]
	if !ok {
		return dbtsync.Job{}, dbtsync.ErrNotFound
	}
	return copyJob(e.job), nil
}

// UpdateJob applies fn outside the lock and stores the result if nobody changed the job
// in between, as the JetStream adapter's compare-and-set does.
func (q *Queue) UpdateJob(_ context.Context, dep int64, id string, fn func(*dbtsync.Job) error) (dbtsync.Job, error) {
	for {
		if err := q.lock(); err != nil {
			return dbtsync.Job{}, err
		}
		e, ok := q.jobs[jobKey{dep, id}]
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

// JobIDs lists the deployment's job ids, newest first.
func (q *Queue) JobIDs(_ context.Context, dep int64) ([]string, error) {
	if err := q.lock(); err != nil {
		return nil, err
	}
	defer q.mu.Unlock()
	var ids []string
	for k := range q.jobs {
		if k.dep == dep {
			ids = append(ids, k.id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids, nil
}

// LineHead is the job at the head of the branch's line.
func (q *Queue) LineHead(_ context.Context, dep int64, branch string) (string, error) {
	if err := q.lock(); err != nil {
		return "", err
	}
	defer q.mu.Unlock()
	if line := q.lines[lineKey{dep, branch}]; len(line) > 0 {
		return line[0], nil
	}
	return "", nil
}

// LeaveLine takes the job out of its branch's line.
func (q *Queue) LeaveLine(_ context.Context, dep int64, branch, id string) error {
	if err := q.lock(); err != nil {
		return err
	}
	defer q.mu.Unlock()
	lk := lineKey{dep, branch}
	q.lines[lk] = slices.DeleteFunc(q.lines[lk], func(s string) bool { return s == id })
	return nil
}

// WatchCancel returns a channel closed at the first update that requests a cancel (the
// watch outlives ctx: closing it then is harmless).
func (q *Queue) WatchCancel(_ context.Context, dep int64, id string) (<-chan struct{}, error) {
	if err := q.lock(); err != nil {
		return nil, err
	}
	defer q.mu.Unlock()
	ch := make(chan struct{})
	if e, ok := q.jobs[jobKey{dep, id}]; ok {
		e.watchers = append(e.watchers, ch)
	}
	return ch, nil
}
