package attack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// Were every NATS user allowed to subscribe to _INBOX.>, the dbt worker's credentials (the
// process that runs untrusted repositories) would receive every other process's replies
// and JetStream deliveries (every tenant's audit events, the identity lookups); they must
// not delete or purge the jobs stream either. With the worker's credentials,
// subscribing to every inbox, to embed-svc's or to the gateway's is refused, and while
// globex creates a folder (an audit event embed-svc pulls from the AUDIT stream) and
// mints an embed session (identity lookups embed-svc asks the gateway) nothing arrives;
// deleting, purging or updating DBTSYNC_JOBS is refused and the stream stays, and so is
// purging the manifest object store.
func TestWorkerNATSCredentialsReceiveNoOtherProcesssRepliesNorManageTheJobsStream(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	a := newAPI(s)
	globex := s.Seed.Accounts["globex"]

	var mu sync.Mutex
	var violations, overheard []string
	worker, err := nats.Connect(s.NATS.UserURL("dbtsync-worker"), nats.CustomInboxPrefix(natsx.InboxPrefix("dbtsync-worker")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				mu.Lock()
				violations = append(violations, err.Error())
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	refused := func(what string) {
		t.Helper()
		apitest.Eventually(t, 10*time.Second, what+" refused", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			for _, v := range violations {
				if strings.Contains(v, what) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("violations %v", violations)
		})
	}
	for _, inbox := range []string{"_INBOX.>", natsx.InboxPrefix("embed-svc") + ".>", natsx.InboxPrefix("gateway") + ".>"} {
		if _, err := worker.Subscribe(inbox, func(m *nats.Msg) {
			mu.Lock()
			overheard = append(overheard, m.Subject+" "+string(m.Data))
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
		_ = worker.Flush()
		refused(`Subscription to "` + inbox + `"`)
	}

	admin := apitest.Bearer(globex.Users["admin"].Bearer)
	folder := "secret-folder-" + fmt.Sprint(time.Now().UnixNano())
	if r := a.call("POST", fmt.Sprintf("/api/v1/deployments/%d/folders", globex.Deployments[0].ID), admin, map[string]any{"name": folder}); r.status != 200 {
		t.Fatalf("globex's folder: %s", r)
	}
	embedSessionID(t, embedMint(a, globex.APIKeys["admin"], globex.Deployments[0].ID, map[string]any{"externalId": "viewer-" + folder}))
	// embed-svc received what the worker tried to read: its delivery of the folder event.
	apitest.Eventually(t, 30*time.Second, "globex's folder creation in the trail", func() (bool, string) {
		for _, e := range trail(t, a, admin, "action=workspace.folder.create") {
			if e.Target.Type == "folder" {
				return true, ""
			}
		}
		return false, "not yet"
	})
	_ = worker.Flush()
	mu.Lock()
	got := append([]string(nil), overheard...)
	mu.Unlock()
	if len(got) > 0 {
		t.Fatalf("the worker's credentials received %d messages of other processes: %v", len(got), got)
	}

	js, err := jetstream.New(worker)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := js.Stream(ctx, "DBTSYNC_JOBS")
	if err != nil {
		t.Fatalf("the worker binds to the jobs stream: %v", err)
	}
	attempt := func(op func(context.Context) error) error {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		defer acancel()
		return op(actx)
	}
	if err := attempt(func(ctx context.Context) error { return js.DeleteStream(ctx, "DBTSYNC_JOBS") }); err == nil {
		t.Fatal("the worker's credentials deleted DBTSYNC_JOBS")
	}
	refused(`Publish to "$JS.API.STREAM.DELETE.DBTSYNC_JOBS"`)
	if err := attempt(func(ctx context.Context) error { return jobs.Purge(ctx) }); err == nil {
		t.Fatal("the worker's credentials purged DBTSYNC_JOBS")
	}
	refused(`Publish to "$JS.API.STREAM.PURGE.DBTSYNC_JOBS"`)
	cfg := jobs.CachedInfo().Config
	cfg.MaxMsgsPerSubject = 1
	if err := attempt(func(ctx context.Context) error { _, err := js.UpdateStream(ctx, cfg); return err }); err == nil {
		t.Fatal("the worker's credentials updated DBTSYNC_JOBS")
	}
	refused(`Publish to "$JS.API.STREAM.UPDATE.DBTSYNC_JOBS"`)
	info, err := jobs.Info(ctx)
	if err != nil || info.Config.MaxMsgsPerSubject == 1 {
		t.Fatalf("DBTSYNC_JOBS after the worker's attempts: %+v %v", info, err)
	}
	// Nor the manifest object store's stream, whole or filtered to one object's chunks
	// (the worker asks dbtsync-svc to remove an object).
	objects, err := js.Stream(ctx, "OBJ_dbtsync_manifests")
	if err != nil {
		t.Fatalf("the worker binds to the object store's stream: %v", err)
	}
	before, err := objects.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]jetstream.StreamPurgeOpt{nil, {jetstream.WithPurgeSubject("$O.dbtsync_manifests.C.x")}} {
		if err := attempt(func(ctx context.Context) error { return objects.Purge(ctx, opts...) }); err == nil {
			t.Fatalf("the worker's credentials purged OBJ_dbtsync_manifests (%d options)", len(opts))
		}
	}
	refused(`Publish to "$JS.API.STREAM.PURGE.OBJ_dbtsync_manifests"`)
	if after, err := objects.Info(ctx); err != nil || after.State.Msgs < before.State.Msgs {
		t.Fatalf("OBJ_dbtsync_manifests after the worker's purges: %+v %v, want its %d messages", after, err, before.State.Msgs)
	}
}
