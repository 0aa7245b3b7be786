// Package natsha_test runs the platform on a three-node JetStream cluster and loses the
// leader of the job stream, then of the audit stream, under load (make test-nats-ha).
package natsha_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// The streams whose leader the suite kills, and the load each one carries.
var victims = []struct{ stream, load string }{
	{"DBTSYNC_JOBS", "dbt sync"},
	{"AUDIT", "audited request"},
}

// TestALostStreamLeaderLosesNoJobAndNoAuditEvent: the platform, two replicas of every
// process on a three-node cluster with every stream, bucket and object store at three
// replicas, under steady dbt syncs, audited requests and identity lookups. The node
// leading the job stream is killed (SIGKILL) and restarted, then the node leading the
// audit stream. Afterwards every accepted job finished once with its model's files,
// every acknowledged request's audit event is in the trail exactly once, and every
// request not served was a 503 with Retry-After. It logs each election's downtime.
func TestALostStreamLeaderLosesNoJobAndNoAuditEvent(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{NATSNodes: 3, Replicas: 2, Workers: 2, Gateways: 2, Env: []string{
		"DBT_SYNC_JETSTREAM_REPLICAS=3", "AUDIT_STREAM_REPLICAS=3",
		"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0",
		"DBT_SYNC_MAX_QUEUED_JOBS=1000", "DBT_SYNC_MAX_RUNNING_JOBS=8",
	}})
	everyStreamHasThreeReplicas(t, s.NATSCluster.URL())

	c := &clients{}
	for _, url := range s.Gateways {
		g := apitest.New(url)
		g.HTTP.Timeout = requestTimeout
		c.gateways = append(c.gateways, g)
	}
	acme := s.Seed.Accounts["acme"]
	tn := &tenant{c: c, dep: acme.Deployments[0].ID, developer: apitest.Bearer(acme.Users["developer"].Bearer),
		admin: apitest.Bearer(acme.Users["admin"].Bearer), apiKey: apitest.APIKey(acme.APIKeys["admin"])}
	l := newLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(halt) // a failure stops the load before the stack
	run(&wg, stop, 300*time.Millisecond, func(n int) { tn.syncs(l, n) })
	run(&wg, stop, 100*time.Millisecond, func(n int) { tn.folders(l, n) })
	run(&wg, stop, 100*time.Millisecond, func(n int) { tn.sessions(l, n) })
	l.served(t, "the load served before any node is lost")
	for _, v := range victims {
		loseLeader(t, s.NATSCluster, v.stream, v.load, l)
	}
	halt()

	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkOutages(t)
	ids := make([]string, 0, len(l.jobs))
	for id := range l.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	jobs := tn.waitFinished(t, ids, 3*time.Minute)
	for _, id := range ids {
		tn.checkJob(t, id, l.jobs[id], jobs[id])
	}
	for action, requests := range l.events {
		tn.checkEventsOnce(t, action, requests)
	}
}

// loseLeader kills the node leading stream, logs how long the election took and the
// longest a client of load waited for an answer meanwhile, and restarts the node once
// the load is served again.
func loseLeader(t *testing.T, cluster *devstack.NATSCluster, stream, load string, l *ledger) {
	t.Helper()
	var leader int
	apitest.Eventually(t, 30*time.Second, stream+" has a leader", func() (bool, string) {
		i, err := cluster.StreamLeader(context.Background(), stream)
		leader = i
		return err == nil && i >= 0, fmt.Sprint(i, err)
	})
	killed := time.Now()
	cluster.Kill(leader)
	apitest.Eventually(t, 60*time.Second, stream+" elects a new leader", func() (bool, string) {
		i, err := cluster.StreamLeader(context.Background(), stream)
		return err == nil && i >= 0 && i != leader, fmt.Sprint(i, err)
	})
	elected := time.Now()
	l.served(t, "the load served again after "+stream+" lost its leader")
	t.Logf("%s: leader %s killed; new leader after %s; longest wait for an answered %s: %s",
		stream, cluster.Nodes[leader].Name, elected.Sub(killed).Round(time.Millisecond), load,
		l.longestGap(load, killed, time.Now()).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cluster.Restart(ctx, leader); err != nil {
		t.Fatalf("restart %s: %v", cluster.Nodes[leader].Name, err)
	}
	l.served(t, "the load served with "+cluster.Nodes[leader].Name+" back")
}

// checkEventsOnce waits until the trail holds an event of action for every one of
// requests (by request id), and fails for any it holds more than once.
func (tn *tenant) checkEventsOnce(t *testing.T, action string, requests map[string]string) {
	t.Helper()
	var counts map[string]int
	apitest.Eventually(t, 60*time.Second, "every "+action+" event in the trail", func() (bool, string) {
		counts = tn.trail(t, action)
		missing := 0
		for request := range requests {
			if counts[request] == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d acknowledged requests without their event", missing, len(requests))
	})
	for request := range requests {
		if counts[request] != 1 {
			t.Errorf("%s of request %s: %d events in the trail, want exactly one", action, request, counts[request])
		}
	}
}

// everyStreamHasThreeReplicas: the job stream, the KV buckets, the object store and the
// audit stream were created (or moved) at the replicas the settings ask for.
func everyStreamHasThreeReplicas(t *testing.T, url string) {
	t.Helper()
	js, err := jetstream.New(devstack.NATSConnForTest(t, url))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"AUDIT", "DBTSYNC_JOBS", "KV_dbtsync_jobs", "KV_dbtsync_ledgers", "OBJ_dbtsync_manifests"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range want {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s: %d replicas, want 3", name, r)
		}
	}
}
