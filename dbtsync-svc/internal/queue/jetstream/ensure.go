package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// The pipeline's resources are created when missing and updated when their
// configuration differs from the process's (replicas raised to 3 when a deployment
// moves to a cluster, a new limit): never otherwise, so API replicas and workers
// starting together do not rewrite a stream while another creates its consumers.

// ensureStream creates the stream or brings its configuration to want.
func (q *Queue) ensureStream(ctx context.Context, want natsjs.StreamConfig) (natsjs.Stream, error) {
	var s natsjs.Stream
	err := q.do(ctx, func(ctx context.Context) error {
		var err error
		s, err = q.js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, natsjs.ErrStreamNotFound):
			s, err = q.js.CreateStream(ctx, want)
			if errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) { // another process was first
				s, err = q.js.Stream(ctx, want.Name)
				if err == nil && !sameStream(s.CachedInfo().Config, want) {
					s, err = q.js.UpdateStream(ctx, want)
				}
			}
		case err == nil && !sameStream(s.CachedInfo().Config, want):
			s, err = q.js.UpdateStream(ctx, want)
		}
		return err
	})
	return s, err
}

// sameStream compares what the pipeline sets of a stream.
func sameStream(a, b natsjs.StreamConfig) bool {
	return a.Replicas == max(b.Replicas, 1) && a.Retention == b.Retention && a.Storage == b.Storage &&
		a.Duplicates == b.Duplicates && a.MaxMsgsPerSubject == b.MaxMsgsPerSubject && a.Discard == b.Discard &&
		a.DiscardNewPerSubject == b.DiscardNewPerSubject && slices.Equal(a.Subjects, b.Subjects)
}

// ensureKeyValue opens the bucket, creating it or updating its configuration first when
// its stream's replicas, TTL or history differ from want.
func (q *Queue) ensureKeyValue(ctx context.Context, want natsjs.KeyValueConfig) (natsjs.KeyValue, error) {
	var kv natsjs.KeyValue
	err := q.do(ctx, func(ctx context.Context) error {
		s, err := q.js.Stream(ctx, "KV_"+want.Bucket)
		if err == nil && sameBucket(s.CachedInfo().Config, want.Replicas, want.TTL, 0, int64(want.History)) {
			kv, err = q.js.KeyValue(ctx, want.Bucket)
			return err
		}
		if err != nil && !errors.Is(err, natsjs.ErrStreamNotFound) {
			return err
		}
		kv, err = q.js.CreateOrUpdateKeyValue(ctx, want)
		return err
	})
	return kv, err
}

// ensureObjectStore is ensureKeyValue for the object store.
func (q *Queue) ensureObjectStore(ctx context.Context, want natsjs.ObjectStoreConfig) (natsjs.ObjectStore, error) {
	var obj natsjs.ObjectStore
	err := q.do(ctx, func(ctx context.Context) error {
		s, err := q.js.Stream(ctx, "OBJ_"+want.Bucket)
		if err == nil && sameBucket(s.CachedInfo().Config, want.Replicas, want.TTL, want.MaxBytes, 0) {
			obj, err = q.js.ObjectStore(ctx, want.Bucket)
			return err
		}
		if err != nil && !errors.Is(err, natsjs.ErrStreamNotFound) {
			return err
		}
		obj, err = q.js.CreateOrUpdateObjectStore(ctx, want)
		return err
	})
	return obj, err
}

// sameBucket compares a bucket's stream with what the pipeline sets: replicas, the
// TTL (MaxAge), MaxBytes when set and the history (MaxMsgsPerSubject) when set.
func sameBucket(c natsjs.StreamConfig, replicas int, ttl time.Duration, maxBytes, history int64) bool {
	return c.Replicas == max(replicas, 1) && c.MaxAge == ttl &&
		(maxBytes <= 0 || c.MaxBytes == maxBytes) && (history <= 0 || c.MaxMsgsPerSubject == history)
}

// bindWait is how long bind waits between two looks for resources not made yet, and
// bindLogEvery how often it says it still waits.
const (
	bindWait     = 500 * time.Millisecond
	bindLogEvery = 10 * time.Second
)

// bind opens the pipeline's resources as they are, waiting until ctx ends for those not
// made yet: the worker starts beside dbtsync-svc, which makes them, and binds once they
// exist.
func (q *Queue) bind(ctx context.Context) error {
	start, logged := time.Now(), time.Now()
	for {
		missing, err := q.bindOnce(ctx)
		if err != nil {
			return err
		}
		if missing == "" {
			return nil
		}
		if time.Since(logged) >= bindLogEvery {
			logged = time.Now()
			q.logger.WarnContext(ctx, "waiting for dbtsync-svc to create the sync pipeline's JetStream resources",
				"missing", missing, "waited", time.Since(start).Round(time.Second).String())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not created by dbtsync-svc within %s: %w", missing, time.Since(start).Round(time.Second), ctx.Err())
		case <-time.After(bindWait):
		}
	}
}

// bindOnce opens what exists of the pipeline; missing names the first resource that does
// not exist yet ("" when all do).
func (q *Queue) bindOnce(ctx context.Context) (missing string, err error) {
	open := func(what string, op func(ctx context.Context) error) (bool, error) {
		err := q.do(ctx, op)
		switch {
		case errors.Is(err, natsjs.ErrStreamNotFound), errors.Is(err, natsjs.ErrBucketNotFound):
			missing = what
			return false, nil
		case err != nil:
			return false, fmt.Errorf("%s: %w", what, err)
		}
		return true, nil
	}
	steps := []struct {
		what string
		op   func(ctx context.Context) error
	}{
		{"jobs stream", func(ctx context.Context) (err error) { q.stream, err = q.js.Stream(ctx, q.names.Stream); return err }},
		{"jobs bucket", func(ctx context.Context) (err error) { q.kv, err = q.js.KeyValue(ctx, q.names.KV); return err }},
		{"ledgers bucket", func(ctx context.Context) (err error) {
			q.ledgers, err = q.js.KeyValue(ctx, q.names.Ledgers)
			return err
		}},
		{"manifest store", func(ctx context.Context) (err error) { q.obj, err = q.js.ObjectStore(ctx, q.names.Objects); return err }},
	}
	for _, s := range steps {
		if ok, err := open(s.what, s.op); !ok {
			return missing, err
		}
	}
	return "", nil
}
