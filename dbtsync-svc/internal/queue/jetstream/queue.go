// Package jetstream is dbtsync-svc's NATS JetStream adapter, the sync pipeline: the work
// queue stream that delivers jobs to workers (JobsStream, consumer WorkersName), the
// key-value bucket of job state and branch lines (JobsKV), and the object store of
// uploaded manifests and files results (ManifestStore). Its records are its own; it maps
// them to the domain's types and wraps NATS errors with dbtsync.ErrQueueUnavailable.
// Queue implements dbtsync.JobQueue, dbtsync.JobFeed and dbtsync.ManifestStore.
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
)

// JetStream resources of the pipeline.
const (
	JobsStream    = "DBTSYNC_JOBS"
	JobsSubject   = "dbtsync.jobs"
	JobsKV        = "dbtsync_jobs"
	ManifestStore = "dbtsync_manifests"
	WorkersName   = "dbtsync-workers"
)

// Limits bound what sync jobs keep in JetStream; zero fields take the defaults.
type Limits struct {
	JobRetention   time.Duration // job records (and branch lines) untouched this long are removed
	ObjectMaxAge   time.Duration // uploaded manifests and files results are removed after this long
	ObjectMaxBytes int64         // all uploaded manifests and results together
}

// DefaultLimits apply where Limits leaves a field zero.
var DefaultLimits = Limits{JobRetention: 30 * 24 * time.Hour, ObjectMaxAge: 7 * 24 * time.Hour, ObjectMaxBytes: 8 << 30}

func (l Limits) withDefaults() Limits {
	if l.JobRetention <= 0 {
		l.JobRetention = DefaultLimits.JobRetention
	}
	if l.ObjectMaxAge <= 0 {
		l.ObjectMaxAge = DefaultLimits.ObjectMaxAge
	}
	if l.ObjectMaxBytes <= 0 {
		l.ObjectMaxBytes = DefaultLimits.ObjectMaxBytes
	}
	return l
}

// Names are the JetStream resources a Queue uses.
type Names struct {
	Stream, Subject, KV, Objects, Workers string
}

// DefaultNames are the production resources.
var DefaultNames = Names{Stream: JobsStream, Subject: JobsSubject, KV: JobsKV, Objects: ManifestStore, Workers: WorkersName}

// Options configure Open.
type Options struct {
	Limits
	Names  Names        // zero: DefaultNames (tests give each queue its own)
	Logger *slog.Logger // Consume's transient pull errors (nil: slog.Default())
}

// Queue is the pipeline over one NATS connection.
type Queue struct {
	names  Names
	js     natsjs.JetStream
	stream natsjs.Stream
	kv     natsjs.KeyValue
	obj    natsjs.ObjectStore
	logger *slog.Logger
}

// Open creates (or updates) the stream, bucket and object store.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Queue, error) {
	limits, n := o.Limits.withDefaults(), o.Names
	if n == (Names{}) {
		n = DefaultNames
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, err
	}
	stream, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Name: n.Stream, Subjects: []string{n.Subject + ".>"}, Retention: natsjs.WorkQueuePolicy,
		Storage: natsjs.FileStorage, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs stream: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, natsjs.KeyValueConfig{Bucket: n.KV, Storage: natsjs.FileStorage, History: 1,
		TTL: limits.JobRetention})
	if err != nil {
		return nil, fmt.Errorf("jobs bucket: %w", err)
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, natsjs.ObjectStoreConfig{Bucket: n.Objects, Storage: natsjs.FileStorage,
		TTL: limits.ObjectMaxAge, MaxBytes: limits.ObjectMaxBytes})
	if err != nil {
		return nil, fmt.Errorf("manifest store: %w", err)
	}
	return &Queue{names: n, js: js, stream: stream, kv: kv, obj: obj, logger: o.Logger}, nil
}

// unavailable wraps a NATS error as the domain's ErrQueueUnavailable.
func unavailable(err error) error { return dbtsync.QueueUnavailable(err) }

func jobKey(dep int64, id string) string { return fmt.Sprintf("job.%d.%s", dep, id) }

// lineKey is the key of a branch's line of jobs (the name hashed: any branch name makes
// a valid key).
func lineKey(dep int64, branch string) string {
	sum := sha256.Sum256([]byte(branch))
	return fmt.Sprintf("branchq.%d.%s", dep, hex.EncodeToString(sum[:12]))
}
