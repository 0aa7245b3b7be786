package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/embed-svc/internal/store/auditstore"
	libaudit "github.com/analyticsco/platform/libs/audit"
	auditpublish "github.com/analyticsco/platform/libs/audit/publish"
)

// ingesting runs an ingester of a fresh AUDIT stream into a memory store until the test
// ends; it returns the store, the NATS connection and the ingester's metrics.
func ingesting(t *testing.T, o audit.IngesterOptions) (*auditstore.Memory, *nats.Conn, *prometheus.Registry) {
	t.Helper()
	n := devstack.NATSForTest(t)
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st := auditstore.NewMemory()
	reg := prometheus.NewRegistry()
	o.NATS, o.Store, o.Registry = nc, st, reg
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go audit.NewIngester(o).Run(ctx)
	return st, nc, reg
}

// publish puts ev on subject as a publisher would (its id as the message id).
func publish(t *testing.T, nc *nats.Conn, subject string, ev libaudit.Event) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	apitest.Eventually(t, 10*time.Second, "the AUDIT stream takes "+ev.ID, func() (bool, string) {
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(ev.ID))
		return err == nil, "publish: " + errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func newEvent(service string, account int64, action string, at time.Time) libaudit.Event {
	return libaudit.Event{ID: libaudit.NewID(at), Time: at, Service: service, AccountID: account, Action: action,
		Actor: libaudit.Actor{Type: libaudit.ActorSystem}, Target: libaudit.Target{Type: "folder", ID: "1"}, Outcome: libaudit.Succeeded(200)}
}

func stored(t *testing.T, st *auditstore.Memory, account int64) []libaudit.Event {
	t.Helper()
	evs, err := st.List(context.Background(), account, audit.Filter{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// An event is stored only when its subject is its service's and its action is one that
// service records: a compromised process (NATS lets each publish only on its own
// subject) cannot make the trail show another service's action in any account.
func TestIngesterStoresOnlyWhatAServiceMayRecordOnItsOwnSubject(t *testing.T) {
	st, nc, reg := ingesting(t, audit.IngesterOptions{})
	now := time.Now()
	publish(t, nc, "audit.events.dbtsync-worker", newEvent("workspace-svc", 2, "workspace.folder.delete", now))
	publish(t, nc, "audit.events.dbtsync-worker", newEvent("dbtsync-worker", 2, "workspace.folder.delete", now))
	publish(t, nc, "audit.events.unknown-svc", newEvent("unknown-svc", 2, "unknown.thing.do", now))
	genuine := newEvent("dbtsync-worker", 2, "dbtsync.sync.finish", now)
	publish(t, nc, "audit.events.dbtsync-worker", genuine)
	// The stream delivers in order: once the genuine event is stored, the others were seen.
	apitest.Eventually(t, 10*time.Second, "the genuine event stored", func() (bool, string) {
		evs := stored(t, st, 2)
		return len(evs) > 0, "nothing stored"
	})
	if evs := stored(t, st, 2); len(evs) != 1 || evs[0].ID != genuine.ID {
		t.Fatalf("account 2 holds %+v, want only the worker's own dbtsync.sync.finish", evs)
	}
	if got := devstack.MetricValue(t, reg, "audit_ingest_failures_total", "forged"); got != 3 {
		t.Errorf("audit_ingest_failures_total{reason=forged} = %v, want 3", got)
	}
}

// One account's audit volume is bounded: past AccountLimit events in a window, the rest
// are not stored one by one but counted in the window's one summary event (and in
// audit_events_merged_total); another account's events are untouched.
func TestAccountAuditVolumeIsBoundedAndWhatWasMergedIsCounted(t *testing.T) {
	st, nc, reg := ingesting(t, audit.IngesterOptions{AccountLimit: 5, AccountWindow: time.Minute})
	window := time.Now().UTC().Truncate(time.Minute)
	for i := range 12 {
		publish(t, nc, "audit.events.workspace-svc", newEvent("workspace-svc", 1, "workspace.folder.create", window.Add(time.Duration(i)*time.Millisecond)))
	}
	for i := range 3 {
		publish(t, nc, "audit.events.workspace-svc", newEvent("workspace-svc", 2, "workspace.folder.create", window.Add(time.Duration(i)*time.Millisecond)))
	}
	merged := audit.Merged{AccountID: 1, Window: window}.Event().ID
	apitest.Eventually(t, 15*time.Second, "account 1's 12 events ingested", func() (bool, string) {
		var n float64
		for _, ev := range stored(t, st, 1) {
			if ev.ID == merged {
				n += number(ev.Details["merged"])
			} else {
				n++
			}
		}
		return n == 12 && len(stored(t, st, 2)) == 3, "not all ingested yet"
	})
	evs := stored(t, st, 1)
	var summary *libaudit.Event
	for i := range evs {
		if evs[i].Action == audit.ActionMerged {
			summary = &evs[i]
		}
	}
	if len(evs) != 6 || summary == nil || summary.ID != merged || number(summary.Details["merged"]) != 7 {
		t.Fatalf("account 1 holds %d events (summary %+v), want 5 and a summary of 7 merged", len(evs), summary)
	}
	if got := devstack.MetricValue(t, reg, "audit_events_merged_total"); got != 7 {
		t.Errorf("audit_events_merged_total = %v, want 7", got)
	}
}

// number is a detail's numeric value.
func number(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return -1
}

// An event stored by an ingester whose acknowledgement was lost (its stream changed
// leader, its process died) comes again; it is acknowledged, stays stored once, and
// is not counted against its account's budget a second time: the account's next event
// is still stored one by one, nothing is merged.
func TestARedeliveredStoredEventIsNotCountedAgainstItsAccountsBudget(t *testing.T) {
	nc := devstack.NATSConnForTest(t, devstack.NATSForTest(t).URL)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := auditpublish.EnsureStream(ctx, js, auditpublish.StreamLimits{})
	if err != nil {
		t.Fatal(err)
	}
	// The consumer of an ingester that stored the first event and died before its ack.
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: auditpublish.ConsumerName,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: -1})
	if err != nil {
		t.Fatal(err)
	}
	window := time.Now().UTC().Truncate(time.Minute)
	first := newEvent("workspace-svc", 1, "workspace.folder.create", window)
	publish(t, nc, "audit.events.workspace-svc", first)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for range batch.Messages() {
		got++ // taken, never acknowledged
	}
	if got != 1 {
		t.Fatalf("the first delivery: %d messages, want 1", got)
	}
	st := auditstore.NewMemory()
	if _, err := st.Admit(ctx, 1, window, 1); err != nil { // counted once, by the ingester that died
		t.Fatal(err)
	}
	if err := st.Insert(ctx, []libaudit.Event{first}); err != nil {
		t.Fatal(err)
	}
	second := newEvent("workspace-svc", 1, "workspace.folder.create", window.Add(time.Millisecond))
	publish(t, nc, "audit.events.workspace-svc", second)

	reg := prometheus.NewRegistry()
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go audit.NewIngester(audit.IngesterOptions{NATS: nc, Store: st, Registry: reg, AccountLimit: 2, AccountWindow: time.Minute}).Run(rctx)
	apitest.Eventually(t, 15*time.Second, "both events acknowledged", func() (bool, string) {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 0 && devstack.MetricValue(t, reg, "audit_events_stored_total") >= 1, "events still in the stream"
	})
	evs := stored(t, st, 1)
	if len(evs) != 2 || evs[0].ID != second.ID || evs[1].ID != first.ID {
		t.Errorf("account 1 holds %v, want the two events once each and no summary", ids(evs))
	}
	if got := devstack.MetricValue(t, reg, "audit_events_merged_total"); got != 0 {
		t.Errorf("audit_events_merged_total = %v, want 0", got)
	}
}

func ids(evs []libaudit.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID + " " + e.Action
	}
	return out
}

// The AUDIT stream a publisher created at one replica (its default, before the trail's
// owner started) is moved to the replicas the owner is configured with
// (AUDIT_STREAM_REPLICAS) when the ingester starts on a three-node cluster.
func TestTheIngesterMovesAnExistingAuditStreamToItsReplicas(t *testing.T) {
	t.Parallel()
	c := devstack.NATSClusterForTest(t, 3)
	nc := devstack.NATSConnForTest(t, c.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, auditpublish.StreamConfig(auditpublish.DefaultStreamLimits)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go audit.NewIngester(audit.IngesterOptions{NATS: nc, Store: auditstore.NewMemory(), Limits: auditpublish.StreamLimits{Replicas: 3}}).Run(rctx)
	apitest.Eventually(t, 30*time.Second, "the AUDIT stream at three replicas", func() (bool, string) {
		s, err := js.Stream(ctx, auditpublish.StreamName)
		if err != nil {
			return false, err.Error()
		}
		info := s.CachedInfo()
		return info.Config.Replicas == 3 && info.Cluster != nil && len(info.Cluster.Replicas) == 2,
			fmt.Sprintf("replicas %d, cluster %+v", info.Config.Replicas, info.Cluster)
	})
}
