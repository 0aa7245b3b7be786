// Package jetstream is dbtsync-svc's NATS JetStream adapter, the sync pipeline: the work
// queue stream that delivers jobs to workers (JobsStream: a subject and a consumer per
// deployment, JobsSubject.<account>.<deployment>, whose per-subject limit is the
// deployment's queue limit and whose consumer's pending limit its running limit), the
// key-value bucket of job state, branch lines and each deployment's job index (JobsKV),
// the bucket of storage ledgers (LedgersKV), and the object store of uploaded manifests
// and files results (ManifestStore). Its records are its own; it maps them to the
// domain's types and wraps NATS errors with dbtsync.ErrQueueUnavailable. Queue
// implements dbtsync.JobQueue, dbtsync.JobFeed, dbtsync.ManifestStore and
// dbtsync.LedgerStore.
//
// Every call is retried across a leader election or a reconnect (Options.Retry), and
// every write is safe to repeat, for a JetStream whose leader may change mid-call
// (replicated streams) and whose reply may be lost after the write was made: jobs are
// published with their id as Nats-Msg-Id (a repeat is a duplicate, dropped before the
// per-subject limit counts it), a job record carries the id of the change that wrote it
// (a writer that finds its own change knows it landed), branch lines and the job index
// add an id once, and a ledger change carries its id (Ledger.Ops).
package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	libconfig "github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/natsx"
)

// JetStream resources of the pipeline.
const (
	JobsStream    = "DBTSYNC_JOBS"
	JobsSubject   = "dbtsync.jobs"
	JobsKV        = "dbtsync_jobs"
	LedgersKV     = "dbtsync_ledgers"
	ManifestStore = "dbtsync_manifests"
	WorkersName   = "dbtsync-workers" // the prefix of the consumers' names (and the one consumer of old)
)

// Limits bound what sync jobs keep in JetStream; zero fields take the defaults.
type Limits struct {
	JobRetention   time.Duration // job records (and branch lines) untouched this long are removed
	ObjectMaxAge   time.Duration // uploaded manifests and files results are removed after this long
	ObjectMaxBytes int64         // all uploaded manifests and results together
	MaxQueuedJobs  int           // a deployment's jobs queued or running (the stream's limit per subject)
	MaxRunningJobs int           // a deployment's deliveries out at once (its consumer's pending limit)
	IndexPage      int           // job ids per page of a deployment's job index
}

// DefaultLimits apply where Limits leaves a field zero.
var DefaultLimits = Limits{JobRetention: 30 * 24 * time.Hour, ObjectMaxAge: dbtsync.DefaultObjectMaxAge, ObjectMaxBytes: 8 << 30,
	MaxQueuedJobs: dbtsync.DefaultMaxQueuedJobs, MaxRunningJobs: dbtsync.DefaultMaxRunningJobs, IndexPage: 100}

// WithDefaults is l with DefaultLimits where it leaves a field zero.
func (l Limits) WithDefaults() Limits { return libconfig.OrDefaults(l, DefaultLimits) }

// Names are the JetStream resources a Queue uses.
type Names struct {
	Stream, Subject, KV, Ledgers, Objects, Workers string
}

// DefaultNames are the production resources.
var DefaultNames = Names{Stream: JobsStream, Subject: JobsSubject, KV: JobsKV, Ledgers: LedgersKV, Objects: ManifestStore, Workers: WorkersName}

// Options configure Open.
type Options struct {
	Limits
	// Replicas of the stream, the buckets and the object store: 1 on a single server, 3
	// on a three-node cluster (a node lost is a leader election, not lost jobs). Open
	// applies it to existing ones too. Zero: 1.
	Replicas int
	// Retry carries each call across a leader election or a reconnect (its budget, within
	// the caller's deadline); its Conn is set by Open.
	Retry  natsx.Retrier
	Names  Names        // zero: DefaultNames (tests give each queue its own)
	Logger *slog.Logger // Consume's transient pull errors (nil: slog.Default())
	// Bind opens the stream, the buckets and the object store as they are, without
	// creating or updating any (the worker's: its NATS user may not), waiting for them
	// until ctx ends while the process that owns them (dbtsync-svc) has not made them
	// yet; Replicas and the limits the resources carry are the owner's.
	Bind bool
}

// Queue is the pipeline over one NATS connection.
type Queue struct {
	names   Names
	limits  Limits
	nc      *nats.Conn
	js      natsjs.JetStream
	stream  natsjs.Stream
	kv      natsjs.KeyValue
	ledgers natsjs.KeyValue
	obj     natsjs.ObjectStore
	retry   natsx.Retrier
	logger  *slog.Logger
}

// Open creates the stream, buckets and object store, or brings their configuration to
// o's where it differs (replicas included); with o.Bind it opens them as they are.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Queue, error) {
	limits, n := o.Limits.WithDefaults(), o.Names
	if n == (Names{}) {
		n = DefaultNames
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	replicas := max(o.Replicas, 1)
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, err
	}
	o.Retry.Conn = nc
	q := &Queue{names: n, limits: limits, nc: nc, js: js, retry: o.Retry, logger: o.Logger}
	if o.Bind {
		if err := q.bind(ctx); err != nil {
			return nil, err
		}
		return q, nil
	}
	// A job is a message on its deployment's subject until a worker settles it: the
	// limit per subject, refusing new messages, caps the deployment's queue atomically.
	// Duplicates outlasts every retry of a publish (natsx.Retrier's budget, well under
	// a minute), so a retried job is stored once.
	q.stream, err = q.ensureStream(ctx, natsjs.StreamConfig{
		Name: n.Stream, Subjects: []string{n.Subject + ".>"}, Retention: natsjs.WorkQueuePolicy,
		Storage: natsjs.FileStorage, Duplicates: 10 * time.Minute, Replicas: replicas,
		MaxMsgsPerSubject: int64(limits.MaxQueuedJobs), Discard: natsjs.DiscardNew, DiscardNewPerSubject: true,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs stream: %w", err)
	}
	q.kv, err = q.ensureKeyValue(ctx, natsjs.KeyValueConfig{Bucket: n.KV, Storage: natsjs.FileStorage, History: 1,
		TTL: limits.JobRetention, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("jobs bucket: %w", err)
	}
	// Ledgers change by compare-and-set and expire nothing themselves: their charges
	// lapse by their own hours and minutes.
	q.ledgers, err = q.ensureKeyValue(ctx, natsjs.KeyValueConfig{Bucket: n.Ledgers, Storage: natsjs.FileStorage, History: 1, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("ledgers bucket: %w", err)
	}
	q.obj, err = q.ensureObjectStore(ctx, natsjs.ObjectStoreConfig{Bucket: n.Objects, Storage: natsjs.FileStorage,
		TTL: limits.ObjectMaxAge, MaxBytes: limits.ObjectMaxBytes, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("manifest store: %w", err)
	}
	return q, nil
}

// do runs op with the queue's retries (see natsx.Retrier): every op it is given is safe
// to repeat.
func (q *Queue) do(ctx context.Context, op func(ctx context.Context) error) error {
	return q.retry.Do(ctx, op)
}

// outlive makes, within one attempt of q.do (actx), something that lives as long as
// ctx: a watcher, an object's chunk subscription. open gets a context of ctx's that the
// attempt's end cancels while open runs, so a JetStream API request of open's that is
// never answered (sent to a server lost mid-call, or to a meta leader being replaced,
// which drops it) fails with the attempt, to be retried, instead of waiting for ctx's
// own deadline (a job's whole timeout). What open made after the attempt ended is
// closed. The returned cancel ends the context what open made lives on.
func outlive[T any](ctx, actx context.Context, open func(context.Context) (T, error), closeFn func(T)) (T, context.CancelFunc, error) {
	var zero T
	octx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(actx, cancel)
	v, err := open(octx)
	if !stop() { // the attempt's time ran out during open
		if err == nil {
			closeFn(v)
		}
		cancel()
		return zero, nil, context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		return zero, nil, err
	}
	return v, cancel, nil
}

// unavailable wraps a NATS error as the domain's ErrQueueUnavailable.
func unavailable(err error) error { return dbtsync.QueueUnavailable(err) }

func jobKey(deploymentID int64, id string) string { return fmt.Sprintf("job.%d.%s", deploymentID, id) }

// subject is the deployment's queue subject.
func (q *Queue) subject(k dbtsync.QueueKey) string {
	return fmt.Sprintf("%s.%d.%d", q.names.Subject, k.Account, k.Deployment)
}

// lineKey is the key of a branch's line of jobs (the name hashed: any branch name makes
// a valid key).
func lineKey(deploymentID int64, branch string) string {
	sum := sha256.Sum256([]byte(branch))
	return fmt.Sprintf("branchq.%d.%s", deploymentID, hex.EncodeToString(sum[:12]))
}
