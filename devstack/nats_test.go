package devstack_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/devstack"
)

func TestNATSJetStreamSurvivesRestart(t *testing.T) {
	t.Parallel()
	n := devstack.NATSForTest(t)
	url := n.URL
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream := devstack.UniqueName(t, "s")

	publish := func() {
		t.Helper()
		nc, err := nats.Connect(n.URL)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}}); err != nil {
			t.Fatalf("create stream: %v", err)
		}
		if _, err := js.Publish(ctx, stream+".a", []byte("hello")); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	publish()

	n.Stop()
	n.Stop() // idempotent
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connect succeeded while stopped")
	}
	if err := n.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if n.URL != url {
		t.Errorf("URL after restart = %s, want %s", n.URL, url)
	}

	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("messages after restart = %d, want 1", info.State.Msgs)
	}
}
