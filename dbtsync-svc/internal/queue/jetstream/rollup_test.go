package jetstream_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
)

// rollupFailed is JetStream's error code for a refused roll-up (JSStreamRollupFailedErr).
const rollupFailed natsjs.ErrorCode = 10111

// The job and ledger buckets refuse roll-ups and purges: buckets made before with
// roll-ups allowed (as CreateOrUpdateKeyValue makes them) are hardened by the next open
// and stay so when it opens them again, new ones are made hardened, and the worker's
// "Nats-Rollup: all" publish to a bucket is refused and leaves its keys, while the
// buckets' operations the pipeline uses still work as the worker.
func TestOpenMakesTheJobAndLedgerBucketsRefuseRollUps(t *testing.T) {
	t.Parallel()
	buckets := []string{jetstream.DefaultNames.KV, jetstream.DefaultNames.Ledgers}
	hardened := func(ctx context.Context, t *testing.T, js natsjs.JetStream, replicas int) {
		t.Helper()
		for _, b := range buckets {
			s, err := js.Stream(ctx, "KV_"+b)
			if err != nil {
				t.Fatal(err)
			}
			c := s.CachedInfo().Config
			if c.AllowRollup || !c.DenyPurge || !c.DenyDelete || !c.AllowDirect || c.MaxMsgsPerSubject != 1 ||
				c.Replicas != replicas || c.Discard != natsjs.DiscardNew {
				t.Errorf("%s: rollup %v, deny purge %v, deny delete %v, direct %v, history %d, replicas %d, discard %v", b,
					c.AllowRollup, c.DenyPurge, c.DenyDelete, c.AllowDirect, c.MaxMsgsPerSubject, c.Replicas, c.Discard)
			}
		}
	}

	t.Run("existing buckets", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn := usersOnly(t)
		svc := conn("dbtsync-svc")
		js, err := natsjs.New(svc)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range buckets { // as an earlier dbtsync-svc made them
			cfg := natsjs.KeyValueConfig{Bucket: b, Storage: natsjs.FileStorage, History: 1}
			if b == jetstream.DefaultNames.KV {
				cfg.TTL = jetstream.DefaultLimits.JobRetention
			}
			kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, "before", []byte("kept")); err != nil {
				t.Fatal(err)
			}
			if s, _ := js.Stream(ctx, "KV_"+b); !s.CachedInfo().Config.AllowRollup {
				t.Fatalf("%s was made without roll-ups", b)
			}
		}
		for range 2 { // the open hardens them, the next finds them so
			if _, err := jetstream.Open(ctx, svc, jetstream.Options{Limits: storage}); err != nil {
				t.Fatalf("dbtsync-svc opens the pipeline: %v", err)
			}
			hardened(ctx, t, js, 1)
		}
		if s, _ := js.Stream(ctx, "KV_"+jetstream.DefaultNames.KV); s.CachedInfo().Config.MaxAge != jetstream.DefaultLimits.JobRetention {
			t.Errorf("the job bucket's TTL after hardening: %s", s.CachedInfo().Config.MaxAge)
		}
		// Replicas are still brought to the setting (one server: an R3 is refused, so
		// the open fails instead of leaving the buckets as they were silently).
		if _, err := jetstream.Open(ctx, svc, jetstream.Options{Limits: storage, Replicas: 3}); err == nil {
			t.Error("an open with three replicas on one server succeeded")
		}
		worker := conn("dbtsync-worker")
		if _, err := jetstream.Open(ctx, worker, jetstream.Options{Bind: true, Limits: storage}); err != nil {
			t.Fatalf("the worker binds to the hardened pipeline: %v", err)
		}
		wjs, err := natsjs.New(worker)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range buckets {
			refusesRollUps(ctx, t, wjs, b)
			kv, err := wjs.KeyValue(ctx, b)
			if err != nil {
				t.Fatalf("the worker opens %s: %v", b, err)
			}
			if e, err := kv.Get(ctx, "before"); err != nil || string(e.Value()) != "kept" {
				t.Fatalf("%s's key after the roll-up: %v", b, err)
			}
			bucketWorks(ctx, t, kv)
		}
	})

	t.Run("new buckets", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn := usersOnly(t)
		svc := conn("dbtsync-svc")
		if _, err := jetstream.Open(ctx, svc, jetstream.Options{Limits: storage}); err != nil {
			t.Fatalf("dbtsync-svc makes the pipeline: %v", err)
		}
		js, err := natsjs.New(svc)
		if err != nil {
			t.Fatal(err)
		}
		hardened(ctx, t, js, 1)
		for _, b := range buckets { // not even by their owner
			s, err := js.Stream(ctx, "KV_"+b)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Purge(ctx); err == nil {
				t.Errorf("dbtsync-svc purged %s", b)
			}
		}
		wjs, err := natsjs.New(conn("dbtsync-worker"))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range buckets {
			kv, err := wjs.KeyValue(ctx, b)
			if err != nil {
				t.Fatalf("the worker opens %s: %v", b, err)
			}
			if _, err := kv.Put(ctx, "before", []byte("kept")); err != nil {
				t.Fatal(err)
			}
			refusesRollUps(ctx, t, wjs, b)
			if e, err := kv.Get(ctx, "before"); err != nil || string(e.Value()) != "kept" {
				t.Fatalf("%s's key after the roll-up: %v", b, err)
			}
		}
	})
}

// refusesRollUps publishes to one of bucket's keys with "Nats-Rollup: all" and with
// "Nats-Rollup: sub" (KeyValue.Purge): JetStream refuses both in the ack.
func refusesRollUps(ctx context.Context, t *testing.T, js natsjs.JetStream, bucket string) {
	t.Helper()
	for _, rollup := range []string{natsjs.MsgRollupAll, natsjs.MsgRollupSubject} {
		m := nats.NewMsg("$KV." + bucket + ".before")
		m.Header.Set(natsjs.MsgRollup, rollup)
		m.Data = []byte("rolled up")
		_, err := js.PublishMsg(ctx, m)
		var apiErr *natsjs.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != rollupFailed {
			t.Errorf("a %q roll-up of %s: %v, want JetStream's refusal", rollup, bucket, err)
		}
	}
	s, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second) // a refused request has no answer
	defer cancel()
	if err := s.Purge(pctx); err == nil {
		t.Errorf("%s was purged", bucket)
	}
}

// bucketWorks runs the operations the pipeline uses on kv: put, compare-and-set
// create and update, get, delete and a watch that sees them.
func bucketWorks(ctx context.Context, t *testing.T, kv natsjs.KeyValue) {
	t.Helper()
	w, err := kv.Watch(ctx, "k.>", natsjs.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	rev, err := kv.Create(ctx, "k.1", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "k.1", []byte("again")); !errors.Is(err, natsjs.ErrKeyExists) {
		t.Fatalf("a second create: %v", err)
	}
	if rev, err = kv.Update(ctx, "k.1", []byte("b"), rev); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "k.1", []byte("stale"), rev-1); err == nil {
		t.Fatal("an update at a stale revision succeeded")
	}
	if _, err := kv.Put(ctx, "k.1", []byte("c")); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k.1"); err != nil || string(e.Value()) != "c" {
		t.Fatalf("get: %v", err)
	}
	if err := kv.Delete(ctx, "k.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "k.1"); !errors.Is(err, natsjs.ErrKeyNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	var seen []string
	for len(seen) < 4 {
		select {
		case e := <-w.Updates():
			if e != nil {
				seen = append(seen, e.Operation().String()+" "+string(e.Value()))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the watch saw %q", seen)
		}
	}
	if want := []string{"KeyValuePutOp a", "KeyValuePutOp b", "KeyValuePutOp c", "KeyValueDeleteOp "}; !slices.Equal(seen, want) {
		t.Fatalf("the watch saw %q, want %q", seen, want)
	}
}
