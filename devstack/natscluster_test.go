package devstack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
)

// A stream of three replicas on the three-node cluster keeps its messages when its
// leader's node is killed: another node leads it, takes new messages, and the killed
// node catches up when it restarts. Platform users connect to any node as themselves.
func TestNATSClusterStreamSurvivesItsLeaderKilled(t *testing.T) {
	t.Parallel()
	c := devstack.NATSClusterForTest(t, 3, devstack.NATSUsersOnly())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream := devstack.UniqueName(t, "s")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}, Replicas: 3}); err != nil {
		t.Fatalf("create an R3 stream: %v", err)
	}
	if _, err := js.Publish(ctx, stream+".a", []byte("before")); err != nil {
		t.Fatal(err)
	}
	leader, err := c.StreamLeader(ctx, stream)
	if err != nil || leader < 0 {
		t.Fatalf("stream leader: %d, %v", leader, err)
	}
	c.Kill(leader)
	var next int
	apitest.Eventually(t, 60*time.Second, "another node leads the stream", func() (bool, string) {
		next, err = c.StreamLeader(ctx, stream)
		return err == nil && next >= 0 && next != leader, fmt.Sprintf("leader %d, %v", next, err)
	})
	if _, err := js.Publish(ctx, stream+".a", []byte("after"), jetstream.WithRetryAttempts(20)); err != nil {
		t.Fatalf("publish after the leader's node was killed: %v", err)
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().State.Msgs; got != 2 {
		t.Errorf("messages after the kill and restart: %d, want 2", got)
	}
	for i, u := range strings.Split(c.UserURL("dbtsync-worker"), ",") {
		wc, err := nats.Connect(u, nats.NoReconnect())
		if err != nil {
			t.Errorf("the worker's user on node %d: %v", i+1, err)
			continue
		}
		wc.Close()
	}
}
