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

// ensureKeyValue opens the bucket, creating its stream or bringing the stream's
// configuration to want's first when its replicas, TTL or history differ, or when it
// allows roll-ups or purges.
//
// The stream is made and updated here rather than by CreateOrUpdateKeyValue, which
// sets AllowRollup on every call: on a stream that allows roll-ups any publish to one
// of the bucket's keys with a "Nats-Rollup: all" header erases the whole bucket, and
// the worker's NATS user, which writes the buckets, must not be able to. The buckets'
// operations need no roll-up (a key's Delete publishes a marker, and the pipeline
// never purges a key), so the stream refuses roll-ups and purges; a new bucket's
// stream is created that way, and an existing one's is updated before the bucket is
// opened.
func (q *Queue) ensureKeyValue(ctx context.Context, want natsjs.KeyValueConfig) (natsjs.KeyValue, error) {
	wantStream := keyValueStream(want)
	var kv natsjs.KeyValue
	err := q.do(ctx, func(ctx context.Context) error {
		s, err := q.js.Stream(ctx, wantStream.Name)
		if errors.Is(err, natsjs.ErrStreamNotFound) {
			s, err = q.js.CreateStream(ctx, wantStream)
			if errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) { // another process was first
				s, err = q.js.Stream(ctx, wantStream.Name)
			}
		}
		if err != nil {
			return err
		}
		if c := s.CachedInfo().Config; !sameBucket(c, want.Replicas, want.TTL, 0, int64(want.History)) || c.AllowRollup || !c.DenyPurge {
			if _, err := q.js.UpdateStream(ctx, wantStream); err != nil {
				return err
			}
		}
		kv, err = q.js.KeyValue(ctx, want.Bucket)
		// The bucket's stream exists (just read or made), yet on a cluster its info can
		// lag a moment behind another process's creation of it, and the bucket reads as
		// not found: ask again for a little while before calling it missing.
		for wait := time.Duration(0); errors.Is(err, natsjs.ErrBucketNotFound) && wait < bucketInfoWait; wait += 100 * time.Millisecond {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			kv, err = q.js.KeyValue(ctx, want.Bucket)
		}
		return err
	})
	return kv, err
}

// bucketInfoWait bounds how long a bucket whose stream exists may read as not found.
const bucketInfoWait = 5 * time.Second

// keyValueStream is the stream configuration CreateOrUpdateKeyValue gives a bucket of
// c's (nats.go's prepareKeyValueConfig: the settings the pipeline's buckets use, without
// mirrors, sources or limit markers), except that it refuses roll-ups and purges.
// NATS allows no roll-up on a stream that denies purges, and once set DenyPurge cannot be
// cleared.
func keyValueStream(c natsjs.KeyValueConfig) natsjs.StreamConfig {
	history := int64(max(c.History, 1))
	maxBytes, maxMsgSize := c.MaxBytes, c.MaxValueSize
	if maxBytes == 0 {
		maxBytes = -1
	}
	if maxMsgSize == 0 {
		maxMsgSize = -1
	}
	duplicates := 2 * time.Minute
	if c.TTL > 0 && c.TTL < duplicates {
		duplicates = c.TTL
	}
	var compression natsjs.StoreCompression
	if c.Compression {
		compression = natsjs.S2Compression
	}
	return natsjs.StreamConfig{
		Name: "KV_" + c.Bucket, Description: c.Description, Subjects: []string{"$KV." + c.Bucket + ".>"},
		MaxMsgsPerSubject: history, MaxBytes: maxBytes, MaxAge: c.TTL, MaxMsgSize: maxMsgSize,
		Storage: c.Storage, Replicas: max(c.Replicas, 1), Placement: c.Placement,
		AllowRollup: false, DenyPurge: true, DenyDelete: true,
		Duplicates: duplicates, MaxMsgs: -1, MaxConsumers: -1, AllowDirect: true,
		RePublish: c.RePublish, Compression: compression, Discard: natsjs.DiscardNew, Metadata: c.Metadata,
	}
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
