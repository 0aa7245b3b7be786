package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/queuetest"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
)

// The JetStream adapter on a three-node cluster: replicas applied on start, and every
// call carried across a killed leader.

func clusterConn(t *testing.T, c *devstack.NATSCluster) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func clusterNames(t *testing.T) jetstream.Names {
	n := devstack.UniqueName(t, "q")
	return jetstream.Names{Stream: strings.ToUpper(n), Subject: n, KV: n + "_kv", Ledgers: n + "_led", Objects: n + "_obj", Workers: n + "_workers"}
}

// streamsOf are the JetStream streams behind the queue's stream, buckets and object store.
func streamsOf(n jetstream.Names) []string {
	return []string{n.Stream, "KV_" + n.KV, "KV_" + n.Ledgers, "OBJ_" + n.Objects}
}

func openQueue(t *testing.T, nc *nats.Conn, names jetstream.Names, replicas int) *jetstream.Queue {
	t.Helper()
	q, err := jetstream.Open(context.Background(), nc, jetstream.Options{Replicas: replicas, Names: names,
		Limits: jetstream.Limits{ObjectMaxBytes: 8 << 20, MaxQueuedJobs: 100_000, MaxRunningJobs: queuetest.MaxRunning}})
	if err != nil {
		t.Fatalf("open with %d replicas: %v", replicas, err)
	}
	return q
}

// A queue opened with one replica (a deployment's first start, or one before the
// setting) gets three when it is opened again with three: the stream, both buckets and
// the object store.
func TestOpenBringsExistingResourcesToTheirReplicas(t *testing.T) {
	t.Parallel()
	c := devstack.NATSClusterForTest(t, 3)
	nc := clusterConn(t, c)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names := clusterNames(t)
	replicas := func() map[string]int {
		out := map[string]int{}
		for _, name := range streamsOf(names) {
			s, err := js.Stream(context.Background(), name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = s.CachedInfo().Config.Replicas
		}
		return out
	}
	for _, want := range []int{1, 3, 3} {
		openQueue(t, nc, names, want)
		for name, got := range replicas() {
			if got != want {
				t.Errorf("%s after an open with %d replicas: %d", name, want, got)
			}
		}
	}
}

// While the leaders of the jobs stream and of the job bucket are killed and elected
// again, jobs keep being enqueued and updated: each enqueue that succeeded put its job
// in the stream once and in the index once, and each increment that succeeded counted
// once (a write whose reply was lost is recognised by its op id, not applied twice);
// an enqueue refused as unavailable left no job behind.
func TestEnqueueAndUpdateAcrossKilledLeadersApplyOnce(t *testing.T) {
	t.Parallel()
	c := devstack.NATSClusterForTest(t, 3)
	nc := clusterConn(t, c)
	names := clusterNames(t)
	q := openQueue(t, nc, names, 3)
	ctx := context.Background()
	counter := queuetest.Job(0, "counter")
	queuetest.Enqueue(t, q, counter)

	var accepted sync.Map // job id -> true
	var refused, increments, unknown, enqueues atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sent := 0
	untilStopped(&wg, stop, func() { // enqueues, each job its own branch's
		sent++
		j := queuetest.Job(sent, fmt.Sprintf("b%d", sent))
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := q.Enqueue(rctx, j)
		cancel()
		enqueues.Add(1)
		switch {
		case err == nil:
			accepted.Store(j.SyncJobID, true)
		case errors.Is(err, dbtsync.ErrQueueUnavailable):
			refused.Add(1)
		default:
			t.Errorf("enqueue %s: %v", j.SyncJobID, err)
		}
	})
	for range 2 { // increments of one job's attempts
		untilStopped(&wg, stop, func() {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := q.UpdateJob(rctx, queuetest.Dep, counter.SyncJobID, func(j *dbtsync.Job) error { j.Attempts++; return nil })
			cancel()
			switch {
			case err == nil:
				increments.Add(1)
			case errors.Is(err, dbtsync.ErrQueueUnavailable):
				unknown.Add(1) // applied or not: its reply never came
			default:
				t.Errorf("update: %v", err)
			}
		})
	}
	for _, stream := range []string{names.Stream, "KV_" + names.KV} {
		before := enqueues.Load()
		apitest.Eventually(t, 30*time.Second, "traffic before the kill", func() (bool, string) { return enqueues.Load() > before+5, "" })
		leader, err := c.StreamLeader(ctx, stream)
		if err != nil || leader < 0 {
			t.Fatalf("leader of %s: %d %v", stream, leader, err)
		}
		c.Kill(leader)
		after := enqueues.Load()
		apitest.Eventually(t, 60*time.Second, "enqueues after the kill", func() (bool, string) {
			return enqueues.Load() > after+5, fmt.Sprintf("%d enqueues", enqueues.Load()-after)
		})
		if err := c.Restart(contextWithin(t, 2*time.Minute), leader); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	// A read may come from a replica a little behind the leader: it catches up.
	apitest.Eventually(t, 30*time.Second, "every increment that succeeded counted once", func() (bool, string) {
		got, err := q.Job(ctx, queuetest.Dep, counter.SyncJobID)
		n := int64(got.Attempts)
		return err == nil && n >= increments.Load() && n <= increments.Load()+unknown.Load(),
			fmt.Sprintf("attempts %d (%v) after %d increments that succeeded and %d unanswered", n, err, increments.Load(), unknown.Load())
	})
	published := publishedJobs(t, nc, names.Stream)
	apitest.Eventually(t, 30*time.Second, "every accepted job in the index and the stream once", func() (bool, string) {
		ids, _, _, err := q.JobPage(ctx, queuetest.Dep, "", 10_000)
		if err != nil {
			return false, err.Error()
		}
		indexed := map[string]int{}
		for _, id := range ids {
			indexed[id]++
		}
		state := ""
		accepted.Range(func(k, _ any) bool {
			id := k.(string)
			if indexed[id] != 1 || published[id] != 1 {
				state = fmt.Sprintf("job %s: %d times in the index, %d in the stream; want once each", id, indexed[id], published[id])
			}
			return state == ""
		})
		return state == "", state
	})
	for id, times := range published {
		if _, ok := accepted.Load(id); !ok && id != counter.SyncJobID {
			if _, err := q.Job(ctx, queuetest.Dep, id); !errors.Is(err, dbtsync.ErrNotFound) {
				t.Errorf("job %s was refused, but its message (%d) and record (%v) stayed", id, times, err)
			}
		}
	}
	n := 0
	accepted.Range(func(any, any) bool { n++; return true })
	t.Logf("%d enqueues: %d accepted, %d refused as unavailable; %d increments, %d unanswered",
		enqueues.Load(), n, refused.Load(), increments.Load(), unknown.Load())
	if n == 0 || increments.Load() == 0 {
		t.Error("nothing succeeded")
	}
}

// untilStopped calls step again and again in a goroutine of wg until stop is closed.
func untilStopped(wg *sync.WaitGroup, stop <-chan struct{}, step func()) {
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			step()
		}
	})
}

// publishedJobs counts the stream's messages by job id (their message id).
func publishedJobs(t *testing.T, nc *nats.Conn, stream string) map[string]int {
	t.Helper()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := contextWithin(t, time.Minute)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	st := s.CachedInfo().State
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, natsjs.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[m.Header.Get(natsjs.MsgIDHeader)]++
	}
	return out
}

func contextWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
