package devstack_test

import (
	"context"
	"os"
	"syscall"
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

// The platform's streams reserve their MaxBytes against JetStream's file storage; a
// devstack nats-server offers the same storage whatever the disk has free, so a stream
// reserving more than the disk has free (the object store's 8 GiB on a smaller disk)
// is created, where nats-server's default (75% of the free disk) refuses it.
func TestNATSStorageDoesNotDependOnTheFreeDisk(t *testing.T) {
	t.Parallel()
	n := devstack.NATSForTest(t)
	var fs syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	if free*2 >= devstack.JetStreamMaxStore {
		t.Skipf("the disk has %d bytes free: more than half of what devstack offers", free)
	}
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := devstack.UniqueName(t, "big")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}, MaxBytes: free * 2}); err != nil {
		t.Fatalf("a stream reserving twice the free disk (%d bytes): %v", free*2, err)
	}
}
