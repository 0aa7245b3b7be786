package devstack_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/natsx"
)

// branchResolve is dbtsync-svc's resolver subject (dbtsync-svc/client.ResolveSubject),
// objectRemove the worker's requests to dbtsync-svc to remove an object
// (dbtsync.RemoveObjectSubject).
const (
	branchResolve = "dbtsync.branches.resolve"
	objectRemove  = "dbtsync.objects.remove"
)

// usersOnlyNATS is the local stack's NATS: every connection names a platform user.
func usersOnlyNATS(t *testing.T) *devstack.NATS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := devstack.StartNATS(ctx, t.TempDir(), "", nil, devstack.NATSUsersOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// natsClient is a connection as one user, with the permission violations the server
// reported to it.
type natsClient struct {
	nc   *nats.Conn
	mu   sync.Mutex
	errs []string
}

func connectAs(t *testing.T, n *devstack.NATS, user string) *natsClient {
	t.Helper()
	c := &natsClient{}
	// The user's own inbox prefix, as server.ConnectNATS sets it.
	inbox, err := natsx.UserInbox(n.UserURL(user))
	if err != nil || inbox == nil {
		t.Fatalf("the inbox option of %s: %v", user, err)
	}
	nc, err := nats.Connect(n.UserURL(user), inbox, nats.Name(user), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			c.mu.Lock()
			c.errs = append(c.errs, err.Error())
			c.mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	return c
}

// violated reports whether the server refused op on subject ("Publish" or "Subscription").
func (c *natsClient) violated(op, subject string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		if strings.Contains(strings.ToLower(e), strings.ToLower(op+" to \""+subject+"\"")) {
			return true
		}
	}
	return false
}

// denied checks that the server refuses user's publish or subscription on subject.
func denied(t *testing.T, c *natsClient, user, op, subject string) {
	t.Helper()
	switch op {
	case "Publish":
		if err := c.nc.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	case "Subscription":
		if _, err := c.nc.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.nc.Flush()
	apitest.Eventually(t, 5*time.Second, user+": "+op+" to "+subject+" refused", func() (bool, string) {
		return c.violated(op, subject), "not refused"
	})
}

// Each process's NATS user may use only its own subjects: no process but the gateway can
// answer identity lookups, none can publish another service's audit events or read the
// AUDIT stream but its owner, and the dbt worker (which runs untrusted repositories)
// touches nothing beyond its jobs, the job state, the manifest store and its own audit
// subject.
func TestEachNATSUserIsRefusedWhatIsNotItsOwn(t *testing.T) {
	n := usersOnlyNATS(t)
	for _, tc := range []struct {
		user     string
		op       string
		subjects []string
	}{
		{"dbtsync-worker", "Publish", []string{"audit.events.workspace-svc", "audit.events.embed-svc", "audit.events.platformctl",
			"identity.lookup.deployment", "dbtsync.branches.resolve", "$JS.API.CONSUMER.CREATE.AUDIT.x", "$JS.API.STREAM.DELETE.AUDIT",
			"$JS.API.DIRECT.GET.AUDIT", "$JS.API.STREAM.MSG.GET.AUDIT"}},
		{"dbtsync-worker", "Subscription", []string{"identity.lookup.*", "identity.lookup.deployment", "audit.events.>", "dbtsync.branches.resolve",
			objectRemove, ">"}},
		// Only dbtsync-svc manages the pipeline's streams: the worker may not create,
		// update, delete or purge them (the object store's included: it asks dbtsync-svc
		// to remove an object), nor delete their messages.
		{"dbtsync-worker", "Publish", managementOf(
			[]string{"DBTSYNC_JOBS", "KV_dbtsync_jobs", "KV_dbtsync_ledgers", "OBJ_dbtsync_manifests"}, "CREATE", "UPDATE", "DELETE", "MSG.DELETE", "PURGE")},
		{"gateway", "Publish", []string{"audit.events.platformctl", "audit.events.workspace-svc", "identity.lookup.user", "dbtsync.jobs.1", "_INBOX.x",
			"$JS.API.CONSUMER.CREATE.AUDIT.x", "$JS.API.STREAM.DELETE.AUDIT"}},
		{"gateway", "Subscription", []string{"audit.events.>", "_INBOX.>", "_INBOX_embed-svc.>"}},
		{"workspace-svc", "Publish", []string{"audit.events.embed-svc", "identity.lookup.user", "dbtsync.jobs.1",
			"$JS.API.CONSUMER.CREATE.AUDIT.x", "$JS.API.STREAM.UPDATE.AUDIT", "$KV.dbtsync_jobs.job.1.x"}},
		{"workspace-svc", "Subscription", []string{"identity.lookup.*", "audit.events.>"}},
		{"embed-svc", "Publish", []string{"audit.events.workspace-svc", "dbtsync.jobs.1", "$KV.dbtsync_jobs.job.1.x",
			"$JS.API.CONSUMER.CREATE.DBTSYNC_JOBS.x", "$O.dbtsync_manifests.C.x"}},
		{"embed-svc", "Publish", []string{objectRemove}},
		{"embed-svc", "Subscription", []string{"identity.lookup.*", "dbtsync.branches.resolve", objectRemove}},
		{"workspace-svc", "Publish", []string{objectRemove}},
		{"gateway", "Publish", []string{objectRemove}},
		{"gateway", "Subscription", []string{objectRemove}},
		{"dbtsync-svc", "Publish", []string{objectRemove}},
		{"dbtsync-svc", "Publish", []string{"audit.events.dbtsync-worker", "audit.events.embed-svc", "identity.lookup.deployment",
			"$JS.API.CONSUMER.CREATE.AUDIT.x"}},
		{"dbtsync-svc", "Subscription", []string{"identity.lookup.*", "audit.events.>"}},
		{"platformctl", "Publish", []string{"audit.events.workspace-svc", "identity.lookup.user", "dbtsync.jobs.1", objectRemove}},
		{"platformctl", "Subscription", []string{"identity.lookup.*"}},
	} {
		t.Run(tc.user+"-"+tc.op, func(t *testing.T) {
			c := connectAs(t, n, tc.user)
			for _, s := range tc.subjects {
				denied(t, c, tc.user, tc.op, s)
			}
		})
	}
	// Without credentials nothing connects.
	if nc, err := nats.Connect(n.URL, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Errorf("an anonymous connection was accepted by the users-only server")
	}
}

// managementOf are the JetStream API subjects of ops (CREATE, PURGE, MSG.DELETE...) on
// each stream.
func managementOf(streams []string, ops ...string) []string {
	var out []string
	for _, s := range streams {
		for _, op := range ops {
			out = append(out, "$JS.API.STREAM."+op+"."+s)
		}
	}
	return out
}

type oneDeployment struct{}

func (oneDeployment) LookupDeployment(_ context.Context, id int64) (lookup.DeploymentInfo, error) {
	return lookup.DeploymentInfo{ID: id, AccountID: 7, ProductionBranch: "main"}, nil
}

func isKind(err error, k errs.Kind) bool {
	e, ok := errs.As(err)
	return ok && e.Kind == k
}

func (oneDeployment) LookupUser(context.Context, int64, string) (identity.User, error) {
	return identity.User{}, lookup.ErrNotFound
}

// What each user needs works under its permissions: the gateway answers embed-svc's
// identity lookups, a worker records an audit event on its own subject, embed-svc (the
// trail's owner) reads it from the AUDIT stream, and dbtsync-svc and the worker share the
// job stream, the job-state bucket and the manifest store.
func TestEachNATSUserCanDoItsOwnWork(t *testing.T) {
	n := usersOnlyNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	gw, embed := connectAs(t, n, "gateway"), connectAs(t, n, "embed-svc")
	if err := lookup.Serve(natsx.NewServer(gw.nc, natsx.ServerOptions{}), oneDeployment{}); err != nil {
		t.Fatal(err)
	}
	_ = gw.nc.Flush()
	embedRR := natsx.NewClient(embed.nc, natsx.ClientOptions{})
	dep, err := lookup.NewClient(embedRR, 5*time.Second).Deployment(ctx, 42)
	if err != nil || dep.AccountID != 7 {
		t.Fatalf("embed-svc's lookup answered by the gateway: %+v %v", dep, err)
	}
	// dbtsync-svc answers embed-svc's branch resolves (the contract is dbtsync-svc/client,
	// which devstack does not import), an error answer's headers included.
	api := connectAs(t, n, "dbtsync-svc")
	if err := natsx.Handle(natsx.NewServer(api.nc, natsx.ServerOptions{}), branchResolve, "dbtsync-resolver",
		func(_ context.Context, branch string) (bool, error) {
			if branch == "" {
				return false, errs.Invalidf("no branch")
			}
			return true, nil
		}); err != nil {
		t.Fatal(err)
	}
	_ = api.nc.Flush()
	resolve := natsx.NewEndpoint[string, bool](embedRR, branchResolve, 5*time.Second)
	if ok, err := resolve.Call(ctx, "main"); err != nil || !ok {
		t.Fatalf("embed-svc's resolve answered by dbtsync-svc: %v %v", ok, err)
	}
	if _, err := resolve.Call(ctx, ""); !isKind(err, errs.Invalid) {
		t.Fatalf("dbtsync-svc's error answer to embed-svc: %v, want a typed invalid", err)
	}

	embedJS, _ := jetstream.New(embed.nc)
	stream, err := publish.EnsureStream(ctx, embedJS, publish.StreamLimits{})
	if err != nil {
		t.Fatalf("embed-svc sets up the AUDIT stream: %v", err)
	}
	worker := connectAs(t, n, "dbtsync-worker")
	pub, err := publish.NewPublisher(publish.Options{Service: "dbtsync-worker", NATS: worker.nc})
	if err != nil {
		t.Fatal(err)
	}
	pub.Record(ctx, audit.Event{AccountID: 7, Action: "dbtsync.sync.finish", Target: audit.Target{Type: "sync_job", ID: "j1"}})
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "check", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("embed-svc creates its consumer: %v", err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || msg.Subject() != "audit.events.dbtsync-worker" || !bytes.Contains(msg.Data(), []byte("dbtsync.sync.finish")) {
		t.Fatalf("the worker's event on the stream: %v %v", msg, err)
	}
	if err := msg.Ack(); err != nil {
		t.Fatalf("embed-svc acknowledges: %v", err)
	}

	// dbtsync-svc makes the pipeline's streams; the worker binds to them.
	svc := connectAs(t, n, "dbtsync-svc")
	svcJS, _ := jetstream.New(svc.nc)
	workerJS, _ := jetstream.New(worker.nc)
	if _, err := svcJS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "DBTSYNC_JOBS", Subjects: []string{"dbtsync.jobs.>"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatalf("dbtsync-svc makes the jobs stream: %v", err)
	}
	if _, err := svcJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "dbtsync_jobs"}); err != nil {
		t.Fatalf("dbtsync-svc makes the job-state bucket: %v %v", err, svc.errs)
	}
	if _, err := svcJS.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "dbtsync_manifests"}); err != nil {
		t.Fatalf("dbtsync-svc makes the manifest store: %v", err)
	}
	if _, err := svcJS.Publish(ctx, "dbtsync.jobs.1", []byte("job")); err != nil {
		t.Fatalf("dbtsync-svc queues a job: %v", err)
	}
	svcKV, _ := svcJS.KeyValue(ctx, "dbtsync_jobs")
	if _, err := svcKV.Create(ctx, "job.1.a", []byte("queued")); err != nil {
		t.Fatalf("dbtsync-svc writes job state: %v", err)
	}
	svcObj, _ := svcJS.ObjectStore(ctx, "dbtsync_manifests")
	if _, err := svcObj.PutBytes(ctx, "manifest-a", []byte("manifest")); err != nil {
		t.Fatalf("dbtsync-svc stores a manifest: %v", err)
	}
	jobs, err := workerJS.Stream(ctx, "DBTSYNC_JOBS")
	if err != nil {
		t.Fatalf("the worker binds to the jobs stream: %v", err)
	}
	wc, err := jobs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "dbtsync-workers", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("the worker creates its consumer: %v", err)
	}
	job, err := wc.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || string(job.Data()) != "job" || job.Ack() != nil {
		t.Fatalf("the worker takes and acknowledges the job: %v %v", job, err)
	}
	workerKV, err := workerJS.KeyValue(ctx, "dbtsync_jobs")
	if err != nil {
		t.Fatalf("the worker binds to the job-state bucket: %v", err)
	}
	e, err := workerKV.Get(ctx, "job.1.a")
	if err != nil || string(e.Value()) != "queued" {
		t.Fatalf("the worker reads job state: %v", err)
	}
	if _, err := workerKV.Update(ctx, "job.1.a", []byte("done"), e.Revision()); err != nil {
		t.Fatalf("the worker updates job state: %v", err)
	}
	keys, err := workerKV.ListKeysFiltered(ctx, "job.1.*")
	if err != nil {
		t.Fatalf("the worker lists job keys: %v", err)
	}
	for range keys.Keys() {
	}
	workerObj, err := workerJS.ObjectStore(ctx, "dbtsync_manifests")
	if err != nil {
		t.Fatalf("the worker binds to the manifest store: %v", err)
	}
	if b, err := workerObj.GetBytes(ctx, "manifest-a"); err != nil || string(b) != "manifest" {
		t.Fatalf("the worker reads the manifest: %q %v", b, err)
	}
	// The worker writes a result to a name no object holds (a put that purges nothing)
	// and reads it back; it asks dbtsync-svc to remove an object, which dbtsync-svc does.
	if _, err := workerObj.PutBytes(ctx, "result-a", []byte("files")); err != nil {
		t.Fatalf("the worker stores a result: %v", err)
	}
	if b, err := workerObj.GetBytes(ctx, "result-a"); err != nil || string(b) != "files" {
		t.Fatalf("the worker reads its result: %q %v", b, err)
	}
	if err := natsx.Handle(natsx.NewServer(svc.nc, natsx.ServerOptions{}), objectRemove, "dbtsync-objects",
		func(ctx context.Context, name string) (bool, error) { return true, svcObj.Delete(ctx, name) }); err != nil {
		t.Fatal(err)
	}
	_ = svc.nc.Flush()
	remove := natsx.NewEndpoint[string, bool](natsx.NewClient(worker.nc, natsx.ClientOptions{}), objectRemove, 5*time.Second)
	if ok, err := remove.Call(ctx, "manifest-a"); err != nil || !ok {
		t.Fatalf("dbtsync-svc removes the manifest at the worker's request: %v %v", ok, err)
	}
	if _, err := workerObj.GetInfo(ctx, "manifest-a"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("the manifest after its removal: %v, want not found", err)
	}
	for who, c := range map[string]*natsClient{"gateway": gw, "embed-svc": embed, "dbtsync-svc": svc, "dbtsync-worker": worker} {
		c.mu.Lock()
		if len(c.errs) > 0 {
			t.Errorf("%s was refused: %v", who, c.errs)
		}
		c.mu.Unlock()
	}
}

// Each user subscribes only to its own inbox (natsx.InboxPrefix): never to all of
// _INBOX, nor to another user's.
func TestNoNATSUserMaySubscribeToAnothersInbox(t *testing.T) {
	n := usersOnlyNATS(t)
	for _, u := range devstack.NATSUsers() {
		t.Run(u.Name, func(t *testing.T) {
			c := connectAs(t, n, u.Name)
			subjects := []string{"_INBOX.>", "_INBOX.*", "_INBOX.x.y", "_INBOX_*.>", "*.>"}
			for _, other := range devstack.NATSUsers() {
				if other.Name != u.Name {
					subjects = append(subjects, natsx.InboxPrefix(other.Name)+".>")
				}
			}
			for _, s := range subjects {
				denied(t, c, u.Name, "Subscription", s)
			}
		})
	}
}

// The dbt worker's user, which runs untrusted repositories, receives nothing of another
// process's traffic: while embed-svc asks the gateway an identity lookup and pulls an
// audit event from the AUDIT stream, the worker's subscriptions to every inbox, to
// embed-svc's and to everything are refused and get no message, and embed-svc gets its
// answer and its delivery. A worker connection without its own inbox prefix cannot even
// get its own JetStream answers.
func TestTheWorkerReceivesNoOtherProcesssRepliesOrDeliveries(t *testing.T) {
	n := usersOnlyNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	worker := connectAs(t, n, "dbtsync-worker")
	var mu sync.Mutex
	var overheard []string
	for _, s := range []string{"_INBOX.>", natsx.InboxPrefix("embed-svc") + ".>", natsx.InboxPrefix("gateway") + ".>", ">"} {
		if _, err := worker.nc.Subscribe(s, func(m *nats.Msg) {
			mu.Lock()
			overheard = append(overheard, m.Subject)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
		_ = worker.nc.Flush()
		apitest.Eventually(t, 5*time.Second, "the worker's subscription to "+s+" refused", func() (bool, string) {
			return worker.violated("Subscription", s), "not refused"
		})
	}

	gw, embed := connectAs(t, n, "gateway"), connectAs(t, n, "embed-svc")
	if err := lookup.Serve(natsx.NewServer(gw.nc, natsx.ServerOptions{}), oneDeployment{}); err != nil {
		t.Fatal(err)
	}
	_ = gw.nc.Flush()
	for i := range 3 {
		dep, err := lookup.NewClient(natsx.NewClient(embed.nc, natsx.ClientOptions{}), 5*time.Second).Deployment(ctx, int64(40+i))
		if err != nil || dep.AccountID != 7 {
			t.Fatalf("embed-svc's lookup answered by the gateway: %+v %v", dep, err)
		}
	}
	embedJS, err := jetstream.New(embed.nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := publish.EnsureStream(ctx, embedJS, publish.StreamLimits{})
	if err != nil {
		t.Fatalf("embed-svc sets up the AUDIT stream: %v", err)
	}
	ws := connectAs(t, n, "workspace-svc")
	pub, err := publish.NewPublisher(publish.Options{Service: "workspace-svc", NATS: ws.nc})
	if err != nil {
		t.Fatal(err)
	}
	pub.Record(ctx, audit.Event{AccountID: 9, Action: "workspace.folder.create", Target: audit.Target{Type: "folder", ID: "secret-folder"}})
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "trail", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("embed-svc creates its consumer: %v", err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || !bytes.Contains(msg.Data(), []byte("secret-folder")) {
		t.Fatalf("embed-svc's delivery of the folder event: %v %v", msg, err)
	}
	if !strings.HasPrefix(msg.Reply(), "$JS.ACK.AUDIT.") {
		t.Fatalf("the delivery's reply subject %q", msg.Reply())
	}
	_ = msg.Ack()
	// Whatever was on its way to the worker has arrived once a round trip of its own has.
	_ = worker.nc.Flush()
	_ = embed.nc.Flush()
	time.Sleep(200 * time.Millisecond)
	_ = worker.nc.Flush()
	mu.Lock()
	got := slices.Clone(overheard)
	mu.Unlock()
	if len(got) > 0 {
		t.Fatalf("the worker received %d messages of other processes: %v", len(got), got)
	}
	for who, c := range map[string]*natsClient{"gateway": gw, "embed-svc": embed, "workspace-svc": ws} {
		c.mu.Lock()
		if len(c.errs) > 0 {
			t.Errorf("%s was refused: %v", who, c.errs)
		}
		c.mu.Unlock()
	}

	// With the default _INBOX prefix the worker's own JetStream request gets no answer
	// it may receive.
	plain, err := nats.Connect(n.UserURL("dbtsync-worker"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plainJS, _ := jetstream.New(plain)
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	if _, err := plainJS.Stream(sctx, publish.StreamName); err == nil {
		t.Fatal("a worker connection on _INBOX received its JetStream answer")
	}
}

// The worker cannot delete or purge the jobs stream: the requests are refused and the
// stream keeps its jobs, which dbtsync-svc, its owner, may purge.
func TestTheWorkerCannotDeleteOrPurgeTheJobsStream(t *testing.T) {
	n := usersOnlyNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := connectAs(t, n, "dbtsync-svc")
	svcJS, _ := jetstream.New(svc.nc)
	if _, err := svcJS.CreateStream(ctx, jetstream.StreamConfig{Name: "DBTSYNC_JOBS", Subjects: []string{"dbtsync.jobs.>"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcJS.Publish(ctx, "dbtsync.jobs.1.2", []byte("job")); err != nil {
		t.Fatal(err)
	}
	worker := connectAs(t, n, "dbtsync-worker")
	workerJS, _ := jetstream.New(worker.nc)
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 2*time.Second) }
	dctx, dcancel := short()
	defer dcancel()
	if err := workerJS.DeleteStream(dctx, "DBTSYNC_JOBS"); err == nil {
		t.Fatal("the worker deleted the jobs stream")
	}
	jobs, err := workerJS.Stream(ctx, "DBTSYNC_JOBS")
	if err != nil {
		t.Fatalf("the worker binds to the jobs stream: %v", err)
	}
	pctx, pcancel := short()
	defer pcancel()
	if err := jobs.Purge(pctx); err == nil {
		t.Fatal("the worker purged the jobs stream")
	}
	uctx, ucancel := short()
	defer ucancel()
	if _, err := workerJS.UpdateStream(uctx, jetstream.StreamConfig{Name: "DBTSYNC_JOBS", Subjects: []string{"dbtsync.jobs.>"},
		Retention: jetstream.WorkQueuePolicy, MaxMsgs: 1}); err == nil {
		t.Fatal("the worker updated the jobs stream")
	}
	for _, s := range []string{"$JS.API.STREAM.DELETE.DBTSYNC_JOBS", "$JS.API.STREAM.PURGE.DBTSYNC_JOBS", "$JS.API.STREAM.UPDATE.DBTSYNC_JOBS"} {
		if !worker.violated("Publish", s) {
			t.Errorf("%s: not refused as a permissions violation", s)
		}
	}
	info, err := jobs.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("the jobs stream after the worker's attempts: %v %v, want its one job", info, err)
	}
	owned, _ := svcJS.Stream(ctx, "DBTSYNC_JOBS")
	if err := owned.Purge(ctx); err != nil {
		t.Fatalf("dbtsync-svc purges its stream: %v", err)
	}
}

// The worker cannot purge the manifest object store, neither whole nor filtered to one
// object's chunks (NATS authorizes a purge by the stream alone): its attempts are
// refused, every object stays, and dbtsync-svc, the store's owner, removes an object.
func TestTheWorkerCannotPurgeTheObjectStore(t *testing.T) {
	n := usersOnlyNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := connectAs(t, n, "dbtsync-svc")
	svcJS, _ := jetstream.New(svc.nc)
	svcObj, err := svcJS.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "dbtsync_manifests"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"manifest/a", "manifest/b"} {
		if _, err := svcObj.PutBytes(ctx, name, []byte("upload "+name)); err != nil {
			t.Fatal(err)
		}
	}
	a, err := svcObj.GetInfo(ctx, "manifest/a")
	if err != nil {
		t.Fatal(err)
	}
	worker := connectAs(t, n, "dbtsync-worker")
	workerJS, _ := jetstream.New(worker.nc)
	store, err := workerJS.Stream(ctx, "OBJ_dbtsync_manifests")
	if err != nil {
		t.Fatalf("the worker binds to the object store's stream: %v", err)
	}
	for _, opts := range [][]jetstream.StreamPurgeOpt{nil, {jetstream.WithPurgeSubject("$O.dbtsync_manifests.C." + a.NUID)}} {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := store.Purge(pctx, opts...)
		pcancel()
		if err == nil {
			t.Fatalf("the worker purged the object store (%d options)", len(opts))
		}
	}
	workerObj, err := workerJS.ObjectStore(ctx, "dbtsync_manifests")
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	if err := workerObj.Delete(dctx, "manifest/a"); err == nil {
		t.Fatal("the worker deleted an object")
	}
	if !worker.violated("Publish", "$JS.API.STREAM.PURGE.OBJ_dbtsync_manifests") {
		t.Errorf("the purge was not refused as a permissions violation: %v", worker.errs)
	}
	// The delete marked the object deleted before its purge was refused (the worker may
	// write the store's entries): its chunks stay, and so does every other object.
	info, err := store.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < 4 {
		t.Fatalf("the store holds %d messages after the worker's attempts, want both objects' chunks and entries", info.State.Msgs)
	}
	if b, err := svcObj.GetBytes(ctx, "manifest/b"); err != nil || string(b) != "upload manifest/b" {
		t.Fatalf("another object after the worker's attempts: %q %v", b, err)
	}
	if err := svcObj.Delete(ctx, "manifest/b"); err != nil {
		t.Fatalf("dbtsync-svc removes an object: %v", err)
	}
	if len(svc.errs) > 0 {
		t.Errorf("dbtsync-svc was refused: %v", svc.errs)
	}
}

// The worker cannot empty the job or ledger bucket with a roll-up: a publish to one of
// a bucket's keys with "Nats-Rollup: all" (which on a stream that allows roll-ups
// removes every key) is refused in its ack, and the bucket keeps its keys. The buckets'
// streams are configured as dbtsync-svc makes them (its queue's keyValueStream): roll-ups
// and purges refused.
func TestTheWorkerCannotRollUpTheJobAndLedgerBuckets(t *testing.T) {
	n := usersOnlyNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := connectAs(t, n, "dbtsync-svc")
	svcJS, _ := jetstream.New(svc.nc)
	worker := connectAs(t, n, "dbtsync-worker")
	workerJS, _ := jetstream.New(worker.nc)
	for _, bucket := range []string{"dbtsync_jobs", "dbtsync_ledgers"} {
		if _, err := svcJS.CreateStream(ctx, jetstream.StreamConfig{Name: "KV_" + bucket, Subjects: []string{"$KV." + bucket + ".>"},
			MaxMsgsPerSubject: 1, MaxBytes: -1, MaxMsgSize: -1, MaxMsgs: -1, MaxConsumers: -1, Storage: jetstream.FileStorage,
			Duplicates: 2 * time.Minute, AllowDirect: true, Discard: jetstream.DiscardNew,
			AllowRollup: false, DenyPurge: true, DenyDelete: true}); err != nil {
			t.Fatal(err)
		}
		kv, err := workerJS.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatalf("the worker opens %s: %v", bucket, err)
		}
		for _, key := range []string{"job.1.a", "job.2.b"} {
			if _, err := kv.Put(ctx, key, []byte("record")); err != nil {
				t.Fatalf("the worker writes %s: %v", bucket, err)
			}
		}
		m := nats.NewMsg("$KV." + bucket + ".job.1.a")
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
		m.Data = []byte("rolled up")
		_, err = workerJS.PublishMsg(ctx, m)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10111 { // JSStreamRollupFailedErr
			t.Fatalf("the worker's roll-up of %s: %v, want JetStream's refusal", bucket, err)
		}
		if err := kv.Purge(ctx, "job.2.b"); err == nil {
			t.Fatalf("the worker purged a key of %s", bucket)
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range keys.Keys() {
			got = append(got, k)
		}
		if slices.Sort(got); !slices.Equal(got, []string{"job.1.a", "job.2.b"}) {
			t.Fatalf("%s holds %q after the worker's roll-ups", bucket, got)
		}
		if e, err := kv.Get(ctx, "job.1.a"); err != nil || string(e.Value()) != "record" {
			t.Fatalf("a key of %s after the roll-up: %v", bucket, err)
		}
	}
	if len(worker.errs) > 0 || len(svc.errs) > 0 {
		t.Errorf("refused as permissions violations (the roll-ups are JetStream's refusals): %v %v", worker.errs, svc.errs)
	}
}
