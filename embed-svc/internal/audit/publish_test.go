package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	auditpublish "github.com/analyticsco/platform/libs/audit/publish"
)

// counterValue reads a counter of reg with the label value.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					v += m.GetCounter().GetValue()
				}
			}
		}
	}
	return v
}

// An event published while the AUDIT stream cannot take it (no leader: here, no stream
// yet) is sent again within the publish timeout: once the stream takes messages, the
// event is in it, once, and was not put aside in the outbox or in memory.
func TestAnEventPublishedWhileTheStreamHasNoLeaderIsSentAgainUntilItTakesIt(t *testing.T) {
	t.Parallel()
	n := devstack.NATSForTest(t)
	pubConn := devstack.NATSConnForTest(t, n.URL)
	reg := prometheus.NewRegistry()
	pub, err := auditpublish.NewPublisher(auditpublish.Options{Service: "workspace-svc", NATS: pubConn, Registry: reg, PublishTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pub.Record(context.Background(), newEvent("workspace-svc", 1, "workspace.folder.create", time.Now()))
	}()
	// The client sends a publish three times itself when nobody answers; a fourth "no
	// responders" answer is the publisher's own retry.
	apitest.Eventually(t, 20*time.Second, "the publisher's own retry", func() (bool, string) {
		return pubConn.Stats().InMsgs >= 4, "fewer answers"
	})
	admin := devstack.NATSConnForTest(t, n.URL)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := auditpublish.EnsureStream(context.Background(), js, auditpublish.StreamLimits{})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if got := counterValue(t, reg, "audit_events_recorded_total", "stream"); got != 1 {
		t.Errorf("events recorded via the stream: %v, want 1", got)
	}
	info, err := s.Info(context.Background())
	if err != nil || info.State.Msgs != 1 {
		t.Errorf("events in the stream: %+v %v, want 1", info, err)
	}
}
