package dbtsync_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/memqueue"
	"github.com/analyticsco/platform/dbtsync-svc/internal/store/memstore"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The service's rules, unit-tested over the in-memory fakes of its ports (whose
// behaviour the contract suites of internal/store and internal/queue pin to the real
// adapters'): no server, no HTTP.

const (
	dep  = 11
	prod = "main"
)

// fakeGit is a repository host: refs are the branches and tags of every repository,
// refused the URLs the policy refuses, down makes listing references fail.
type fakeGit struct {
	refs    map[string]bool
	refused map[string]string
	down    bool
}

func (g *fakeGit) CheckRepository(_ context.Context, url string) error {
	if reason, ok := g.refused[url]; ok {
		return &dbtsync.RepositoryRefusedError{Reason: reason}
	}
	return nil
}

func (g *fakeGit) HasRef(_ context.Context, _ dbtsync.Integration, ref string) (bool, error) {
	if g.down {
		return false, errors.New("git server example.test cannot be reached (network error)")
	}
	return g.refs[ref], nil
}

func (g *fakeGit) Load(context.Context, dbtsync.Integration, string, string) (*convert.Project, error) {
	return nil, errors.New("the service never clones")
}

// sealer marks what it seals, so a test can tell sealed from plain.
type sealer struct{}

func (sealer) Seal(plain []byte, dep int64) []byte {
	return []byte(fmt.Sprintf("sealed:%d:%x", dep, plain))
}

func (sealer) Open(sealed []byte, dep int64) ([]byte, error) {
	var plain []byte
	if _, err := fmt.Sscanf(string(sealed), "sealed:"+strconv.FormatInt(dep, 10)+":%x", &plain); err != nil {
		return nil, err
	}
	return plain, nil
}

// clock is the service's time, moved by the tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fixture struct {
	svc   dbtsync.Service
	store *memstore.Store
	queue *memqueue.Queue
	git   *fakeGit
	clock *clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, dbtsync.Options{Quotas: dbtsync.StorageQuotas{Deployment: 4096, Account: 1 << 20}})
}

// newFixtureWith is newFixture with options o (its clock set); the queue's limit is o's.
func newFixtureWith(t *testing.T, o dbtsync.Options) *fixture {
	t.Helper()
	f := &fixture{store: memstore.New(), queue: memqueue.NewWithLimits(memqueue.Limits{MaxQueued: o.MaxQueuedJobs}),
		git: &fakeGit{refs: map[string]bool{}, refused: map[string]string{}}, clock: &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}}
	o.Now = f.clock.Now
	f.svc = dbtsync.NewService(dbtsync.Ports{Branches: f.store, Integrations: f.store, Jobs: f.queue, Manifests: f.queue, Ledgers: f.queue,
		Git: f.git, Sealer: sealer{}, Pushes: f.store}, o)
	return f
}

// used is what the ledger of key holds now.
func (f *fixture) used(t *testing.T, key dbtsync.LedgerKey) int64 {
	t.Helper()
	var n int64
	if err := f.queue.UpdateLedger(context.Background(), key, func(l *dbtsync.Ledger) error {
		n = l.Used(f.clock.Now())
		return errors.New("read only")
	}); err == nil {
		t.Fatal("the ledger read was stored")
	}
	return n
}

const depLedger = dbtsync.LedgerKey("deployment.11")

func principal(role string) *identity.Principal {
	return &identity.Principal{Account: identity.Account{ID: 1}, User: &identity.User{ID: 100 + int64(identity.RoleRank(role)), Role: role},
		Deployment: &identity.Deployment{ID: dep, ProductionBranch: prod}}
}

var (
	viewer    = principal(identity.RoleViewer)
	developer = principal(identity.RoleDeveloper)
	admin     = principal(identity.RoleAdmin)
)

// integration saves a dbt git integration on branch.
func (f *fixture) integration(t *testing.T, branch string) {
	t.Helper()
	if err := f.store.SaveIntegration(context.Background(), dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/acme/dbt.git", Branch: branch}); err != nil {
		t.Fatal(err)
	}
}

const manifest = `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{}}`

// wantErr fails unless err is answered with status and a message holding msg.
func wantErr(t *testing.T, err error, status int, msg string) {
	t.Helper()
	got, _, gotMsg, _ := errs.Answer(err)
	if err == nil || got != status || !strings.Contains(gotMsg, msg) {
		t.Fatalf("error %v (answered %d %q), want %d with %q", err, got, gotMsg, status, msg)
	}
	// A client is told the limit and its value, never the operator's setting.
	if strings.Contains(gotMsg, "DBT_SYNC_") {
		t.Fatalf("answered %q: names an environment variable", gotMsg)
	}
}

func (f *fixture) jobs(t *testing.T) []dbtsync.Job {
	t.Helper()
	ids, _, _, err := f.queue.JobPage(context.Background(), dep, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []dbtsync.Job
	for _, id := range ids {
		j, _ := f.queue.Job(context.Background(), dep, id)
		out = append(out, j)
	}
	return out
}

func TestStartSync(t *testing.T) {
	cases := []struct {
		name        string
		caller      *identity.Principal
		body        string
		integration string          // the saved integration's branch ("": none)
		refs        map[string]bool // the repository's branches and tags
		gitDown     bool
		status      int    // 0: accepted
		want        string // accepted: the branch; refused: in the message
		wantRef     *string
	}{
		{name: "dbt-sync-400-git-by-default-needs-an-integration", caller: developer, body: `{}`, status: 400, want: "dbt git integration"},
		{name: "git-by-default-writes-dbt-integration-branch", caller: developer, body: `{}`, integration: "main", want: "dbt/main"},
		{name: "ref-names-the-branch-and-is-cloned", caller: developer, body: `{"ref":"release/1.2"}`, integration: "main", want: "dbt/release/1.2", wantRef: ptr("release/1.2")},
		{name: "ref-is-sanitized-into-the-branch-name", caller: developer, body: `{"ref":"feat+x"}`, integration: "main", want: "dbt/feat-x", wantRef: ptr("feat+x")},
		{name: "branch-name-overrides-the-ref", caller: developer, body: `{"ref":"v1","branchName":"custom/x"}`, integration: "main", want: "custom/x", wantRef: ptr("v1")},
		{name: "dbt-sync-400-sha-that-is-no-branch-or-tag", caller: developer, body: `{"ref":"abc1234"}`, integration: "main", status: 400,
			want: `"abc1234" is neither a branch nor a tag of the repository at example.test (a commit SHA is not accepted)`},
		{name: "hex-ref-that-is-a-tag-is-a-ref", caller: developer, body: `{"ref":"20240601"}`, integration: "main", refs: map[string]bool{"20240601": true},
			want: "dbt/20240601", wantRef: ptr("20240601")},
		{name: "hex-ref-when-the-repository-cannot-be-asked-is-left-to-the-job", caller: developer, body: `{"ref":"abc1234"}`, integration: "main", gitDown: true,
			want: "dbt/abc1234", wantRef: ptr("abc1234")},
		{name: "manifest-source-writes-dbt-manifest", caller: developer, body: `{"source":"manifest","manifest":` + manifest + `}`, want: "dbt/manifest"},
		{name: "manifest-source-ref-only-names-the-branch", caller: developer, body: `{"source":"manifest","ref":"abc1234","manifest":` + manifest + `}`, want: "dbt/abc1234"},
		{name: "dbt-sync-400-manifest-required", caller: developer, body: `{"source":"manifest"}`, status: 400, want: `"manifest" is required`},
		{name: "dbt-sync-400-empty-ref", caller: developer, body: `{"ref":""}`, status: 400, want: `"ref" must not be empty`},
		{name: "dbt-sync-400-bad-ref", caller: developer, body: `{"ref":"-x"}`, status: 400, want: `"ref" is not a valid git branch or tag name`},
		{name: "dbt-sync-400-bad-branch-name", caller: developer, body: `{"branchName":"a//b"}`, status: 400, want: `"branchName" must be 1 to 200 characters`},
		{name: "dbt-sync-400-no-schema-version", caller: developer, body: `{"source":"manifest","manifest":{"nodes":{}}}`, status: 400, want: "no metadata.dbt_schema_version"},
		{name: "dbt-sync-403-viewer", caller: viewer, body: `{"source":"manifest","manifest":` + manifest + `}`, status: 403, want: "requires the developer role or higher"},
		{name: "dbt-sync-403-production-branch-developer", caller: developer, body: `{"source":"manifest","branchName":"main","manifest":` + manifest + `}`, status: 403,
			want: `only admins may sync into the production branch "main"`},
		{name: "production-branch-admin", caller: admin, body: `{"source":"manifest","branchName":"main","manifest":` + manifest + `}`, want: "main"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			if c.integration != "" {
				f.integration(t, c.integration)
			}
			f.git.refs, f.git.down = c.refs, c.gitDown
			res, err := f.svc.StartSync(context.Background(), c.caller, dep, dbtsync.BodyOf(c.body))
			if c.status != 0 {
				wantErr(t, err, c.status, c.want)
				if js := f.jobs(t); len(js) != 0 {
					t.Errorf("a refused sync queued %v", js)
				}
				if n := f.used(t, depLedger); n != 0 {
					t.Errorf("a refused sync left %d bytes of manifest charged", n)
				}
				return
			}
			if err != nil || res.Accepted.BranchName != c.want || res.Accepted.WorkflowID != "dbt-sync-"+res.Accepted.SyncJobID {
				t.Fatalf("StartSync = %+v %v, want branch %q", res, err, c.want)
			}
			js := f.jobs(t)
			if len(js) != 1 || js[0].SyncJobID != res.Accepted.SyncJobID || js[0].Status != dbtsync.StatusQueued || js[0].BranchName != c.want ||
				js[0].ProductionBranch != prod || js[0].StartedBy != c.caller.User.ID || fmt.Sprint(deref(js[0].Ref)) != fmt.Sprint(deref(c.wantRef)) {
				t.Errorf("queued %+v", js)
			}
			if head, _ := f.queue.LineHead(context.Background(), dep, c.want); head != res.Accepted.SyncJobID {
				t.Errorf("the job is not at the head of its branch's line: %q", head)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A caller without the role is refused before its body is read: it never reaches the
// manifest store, and the refusal is the role's (the audit trail leaves it out).
func TestStartSyncRefusesBeforeReadingTheBody(t *testing.T) {
	f := newFixture(t)
	read := false
	_, err := f.svc.StartSync(context.Background(), viewer, dep, func(w io.Writer) (dbtsync.StartSyncInput, error) {
		read = true
		_, _ = io.WriteString(w, manifest)
		return dbtsync.StartSyncInput{Source: dbtsync.SourceManifest, Output: dbtsync.OutputBranch, HasManifest: true, SchemaVersion: 12}, nil
	})
	wantErr(t, err, 403, "developer")
	if !errors.Is(err, dbtsync.ErrRoleRequired) || read {
		t.Errorf("err %v (role refusal: %v), body read: %v", err, errors.Is(err, dbtsync.ErrRoleRequired), read)
	}
}

func TestStartSyncKeepsTheUploadOnlyForAQueuedJob(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	res, err := f.svc.StartSync(ctx, developer, dep, dbtsync.BodyOf(`{"source":"manifest","manifest":`+manifest+`}`))
	if err != nil || res.Source != dbtsync.SourceManifest || res.ManifestBytes < int64(len(manifest)) {
		t.Fatalf("StartSync = %+v %v", res, err)
	}
	size := res.ManifestBytes
	if ok, _ := f.queue.HasManifest(ctx, res.Accepted.SyncJobID); !ok {
		t.Error("the queued job's manifest is not stored")
	}
	// Refused after the upload (the production branch): the upload goes, its bytes are counted.
	res, err = f.svc.StartSync(ctx, developer, dep, dbtsync.BodyOf(`{"source":"manifest","branchName":"main","manifest":`+manifest+`}`))
	wantErr(t, err, 403, "production")
	if res.ManifestBytes != size {
		t.Errorf("refused after its upload: ManifestBytes %d, want %d", res.ManifestBytes, size)
	}
	if n := f.used(t, depLedger); n != size {
		t.Errorf("uploads charged %d bytes, want only the queued job's %d", n, size)
	}
	// A git sync's manifest is ignored, never stored.
	f.integration(t, "main")
	res, err = f.svc.StartSync(ctx, developer, dep, dbtsync.BodyOf(`{"manifest":`+manifest+`}`))
	if err != nil || res.Source != dbtsync.SourceGit || res.ManifestBytes != 0 {
		t.Fatalf("git sync with a manifest = %+v %v", res, err)
	}
	if n := f.used(t, depLedger); n != size {
		t.Errorf("uploads charged %d bytes after a git sync", n)
	}
}

func TestStartSyncUploadQuotaAndOutage(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t) // quota 4096 bytes
	big := `{"source":"manifest","manifest":{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{"x":"` +
		strings.Repeat("x", 5000) + `"}}}`
	_, err := f.svc.StartSync(ctx, developer, dep, dbtsync.BodyOf(big))
	wantErr(t, err, 413, "deployment 11 would pass its limit of 4096 bytes in the dbt sync object store")
	if n := f.used(t, depLedger); n != 0 || len(f.jobs(t)) != 0 {
		t.Errorf("a refused upload left %d bytes charged, %d jobs", n, len(f.jobs(t)))
	}
	f.queue.SetUnavailable(true)
	_, err = f.svc.StartSync(ctx, developer, dep, dbtsync.BodyOf(`{"source":"manifest","manifest":`+manifest+`}`))
	wantErr(t, err, 503, "the dbt sync job queue (NATS) is unavailable; retry shortly")
	if !errors.Is(err, dbtsync.ErrQueueUnavailable) || !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("outage error %v", err)
	}
}

// queue starts a manifest sync into branch and returns its job id.
func (f *fixture) queueSync(t *testing.T, branch string) string {
	t.Helper()
	res, err := f.svc.StartSync(context.Background(), developer, dep, dbtsync.BodyOf(`{"source":"manifest","branchName":"`+branch+`","manifest":`+manifest+`}`))
	if err != nil {
		t.Fatal(err)
	}
	return res.Accepted.SyncJobID
}

// set changes a job as a worker would.
func (f *fixture) set(t *testing.T, id string, fn func(*dbtsync.Job)) {
	t.Helper()
	if _, err := f.queue.UpdateJob(context.Background(), dep, id, func(j *dbtsync.Job) error { fn(j); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestCancelJob(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	queued, next := f.queueSync(t, "b"), f.queueSync(t, "b")
	job, err := f.svc.CancelJob(ctx, developer, dep, queued)
	if err != nil || job.Status != dbtsync.StatusCanceled || job.FinishedAt == nil || job.CancelRequested || job.Progress.Phase != "done" {
		t.Fatalf("cancel queued = %+v %v", job, err)
	}
	if head, _ := f.queue.LineHead(ctx, dep, "b"); head != next {
		t.Errorf("the canceled job still holds its branch's line (head %q)", head)
	}
	f.set(t, next, func(j *dbtsync.Job) { j.Status = dbtsync.StatusRunning })
	job, err = f.svc.CancelJob(ctx, developer, dep, next)
	if err != nil || job.Status != dbtsync.StatusRunning || !job.CancelRequested {
		t.Fatalf("cancel running = %+v %v", job, err)
	}
	if head, _ := f.queue.LineHead(ctx, dep, "b"); head != next {
		t.Errorf("a running job left its line on a cancel request (head %q)", head)
	}
	_, err = f.svc.CancelJob(ctx, developer, dep, queued)
	wantErr(t, err, 409, "sync job "+queued+" is already canceled")
	_, err = f.svc.CancelJob(ctx, developer, dep, "sj0000000000000000000000000000")
	wantErr(t, err, 404, "not found")
	_, err = f.svc.CancelJob(ctx, developer, dep, "../x")
	wantErr(t, err, 404, `sync job "../x" not found`)
	_, err = f.svc.CancelJob(ctx, viewer, dep, next)
	wantErr(t, err, 403, "developer")
}

func TestRetryJob(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	first := f.queueSync(t, "b")
	_, err := f.svc.RetryJob(ctx, developer, dep, first)
	wantErr(t, err, 409, "sync job "+first+" is still queued: wait for it to finish, or cancel it, before retrying")

	f.set(t, first, func(j *dbtsync.Job) { j.Status = dbtsync.StatusFailed })
	again, err := f.svc.RetryJob(ctx, developer, dep, first)
	if err != nil || again.BranchName != "b" || again.SyncJobID == first {
		t.Fatalf("retry of a failed job = %+v %v", again, err)
	}
	j, _ := f.queue.Job(ctx, dep, again.SyncJobID)
	if j.RetryOf != first || j.ManifestOf != first || !j.HasManifest || j.Status != dbtsync.StatusQueued {
		t.Errorf("retry job %+v", j)
	}
	// A retry of the retry still converts the first upload.
	f.set(t, again.SyncJobID, func(j *dbtsync.Job) { j.Status = dbtsync.StatusCanceled })
	third, err := f.svc.RetryJob(ctx, developer, dep, again.SyncJobID)
	if j, _ := f.queue.Job(ctx, dep, third.SyncJobID); err != nil || j.ManifestOf != first || j.RetryOf != again.SyncJobID {
		t.Errorf("retry of the retry %+v %v", j, err)
	}
	// Once the upload is gone, there is nothing to retry.
	if deleted, err := f.queue.DeleteManifest(ctx, first); err != nil || !deleted {
		t.Fatal(deleted, err)
	}
	_, err = f.svc.RetryJob(ctx, developer, dep, first)
	wantErr(t, err, 409, "the manifest of sync job "+first+" is no longer stored (a manifest is kept for 168h0m0s after a failed")

	// The production branch's rule holds for retries too.
	res, err := f.svc.StartSync(ctx, admin, dep, dbtsync.BodyOf(`{"source":"manifest","branchName":"main","manifest":`+manifest+`}`))
	if err != nil {
		t.Fatal(err)
	}
	f.set(t, res.Accepted.SyncJobID, func(j *dbtsync.Job) { j.Status = dbtsync.StatusFailed })
	_, err = f.svc.RetryJob(ctx, developer, dep, res.Accepted.SyncJobID)
	wantErr(t, err, 403, "only admins may sync into the production branch")
	if _, err := f.svc.RetryJob(ctx, admin, dep, res.Accepted.SyncJobID); err != nil {
		t.Errorf("admin retry into production: %v", err)
	}
}

func TestJobView(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	id := f.queueSync(t, "b")
	msg := "attempt 1 failed"
	f.set(t, id, func(j *dbtsync.Job) { j.Status, j.Error, j.CancelRequested = dbtsync.StatusQueued, &msg, true })
	job, err := f.svc.GetJob(ctx, developer, dep, id)
	if err != nil || job.Error != nil || !job.CancelRequested || job.Warnings == nil {
		t.Errorf("a queued job shows %+v %v, want no error, its cancel request, warnings []", job, err)
	}
	f.set(t, id, func(j *dbtsync.Job) { j.Status = dbtsync.StatusFailed })
	if job, _ := f.svc.GetJob(ctx, developer, dep, id); job.Error == nil || *job.Error != msg || job.CancelRequested {
		t.Errorf("a failed job shows %+v, want its error and no cancel request", job)
	}
	page, err := f.svc.ListJobs(ctx, developer, dep, httpx.PageQuery{First: 1})
	if err != nil || len(page.Items) != 1 || page.PageInfo.HasNextPage || page.PageInfo.EndCursor == nil {
		t.Errorf("ListJobs = %+v %v", page, err)
	}
	_, err = f.svc.ListJobs(ctx, developer, dep, httpx.PageQuery{First: 1, After: httpx.EncodeCursor("sj-unknown")})
	wantErr(t, err, 400, "after is not a cursor returned by this list")
	_, err = f.svc.ListJobs(ctx, developer, dep, httpx.PageQuery{First: 1, After: "sj-unknown"})
	wantErr(t, err, 400, "after is not a cursor returned by this list")
}

// write gives branch name a version, as a finished sync does.
func (f *fixture) write(t *testing.T, name string) {
	t.Helper()
	if _, _, err := f.store.WriteVersion(context.Background(), dep, name, "sj-"+name, []convert.File{{Path: "model/cubes/a.yml", Content: "a"}}, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestServedRule: a branch is served while someone has it open, or permanently once its
// staging is enabled; the production branch always exists and is served. The API's
// branches and the resolver embed-svc asks answer alike.
func TestServedRule(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	resolver := dbtsync.NewResolver(f.store, f.clock.Now)
	f.write(t, "dbt/x")
	served := func(name string) bool {
		t.Helper()
		b, err := f.svc.GetBranch(ctx, developer, dep, name)
		if err != nil {
			t.Fatal(err)
		}
		st, err := resolver.Resolve(ctx, dep, name, prod)
		if err != nil || !st.Exists || st.Served != b.Served || st.Production != b.Production {
			t.Fatalf("resolver %+v %v, branch %+v", st, err, b)
		}
		return b.Served
	}
	if served("dbt/x") {
		t.Error("a branch nobody opened is served")
	}
	b, err := f.svc.OpenBranch(ctx, developer, dep, "dbt/x")
	if err != nil || !b.Served || b.LeaseExpiresAt == nil || !b.LeaseExpiresAt.Equal(f.clock.Now().Add(dbtsync.LeaseDuration)) {
		t.Fatalf("open = %+v %v", b, err)
	}
	f.clock.Add(dbtsync.LeaseDuration - time.Second)
	if !served("dbt/x") {
		t.Error("not served before its lease ends")
	}
	f.clock.Add(2 * time.Second)
	if served("dbt/x") {
		t.Error("served after its lease ended")
	}
	if b, _ := f.svc.GetBranch(ctx, developer, dep, "dbt/x"); b.LeaseExpiresAt != nil {
		t.Errorf("an expired lease is shown: %+v", b)
	}
	if b, err := f.svc.SetStaging(ctx, developer, dep, "dbt/x", true); err != nil || !b.Served || !b.StagingEnabled {
		t.Fatalf("staging = %+v %v", b, err)
	}
	f.clock.Add(365 * 24 * time.Hour)
	if !served("dbt/x") {
		t.Error("a branch with staging enabled is not served")
	}
	// Production: never written, still there and served; it keeps no lease.
	if !served(prod) {
		t.Error("production is not served")
	}
	if b, err := f.svc.OpenBranch(ctx, developer, dep, prod); err != nil || !b.Production || !b.Served || b.LeaseExpiresAt != nil {
		t.Errorf("open production = %+v %v", b, err)
	}
	_, err = f.svc.SetStaging(ctx, developer, dep, prod, false)
	wantErr(t, err, 400, `branch "main" is the production branch, which is always served`)
	if st, err := resolver.Resolve(ctx, dep, "nope", prod); err != nil || st.Exists {
		t.Errorf("resolve unknown = %+v %v", st, err)
	}
	_, err = f.svc.OpenBranch(ctx, developer, dep, "nope")
	wantErr(t, err, 404, `branch "nope" not found`)
}

func TestBranchLists(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for _, n := range []string{"zeta", "alpha"} {
		f.write(t, n)
	}
	page, err := f.svc.ListBranches(ctx, developer, dep, httpx.PageQuery{First: 2})
	if err != nil || len(page.Items) != 2 || page.Items[0].Name != prod || page.Items[1].Name != "alpha" || !page.PageInfo.HasNextPage {
		t.Fatalf("first page %+v %v", page, err)
	}
	page, err = f.svc.ListBranches(ctx, developer, dep, httpx.PageQuery{First: 2, After: *page.PageInfo.EndCursor})
	if err != nil || len(page.Items) != 1 || page.Items[0].Name != "zeta" || page.PageInfo.HasNextPage {
		t.Fatalf("second page %+v %v", page, err)
	}
	f.write(t, prod) // once synced, production is listed once, first
	if page, _ := f.svc.ListBranches(ctx, developer, dep, httpx.PageQuery{First: 10}); len(page.Items) != 3 || page.Items[0].Name != prod ||
		page.Items[0].LatestVersion == nil {
		t.Errorf("with a synced production %+v", page)
	}
	_, err = f.svc.GetFile(ctx, developer, dep, "alpha", "model/../x.yml", 0)
	wantErr(t, err, 400, `file path "model/../x.yml" must be relative`)
	_, err = f.svc.GetFile(ctx, developer, dep, "alpha", "model/cubes/none.yml", 0)
	wantErr(t, err, 404, `file "model/cubes/none.yml" not found in branch "alpha"`)
	if fc, err := f.svc.GetFile(ctx, developer, dep, "alpha", "model/cubes/a.yml", 0); err != nil || fc.Content != "a" || fc.Version != 1 {
		t.Errorf("GetFile = %+v %v", fc, err)
	}
	_, err = f.svc.ListFiles(ctx, developer, dep, "alpha", 2)
	wantErr(t, err, 404, `branch "alpha" not found`)
	_, err = f.svc.ListBranches(ctx, viewer, dep, httpx.PageQuery{First: 10})
	wantErr(t, err, 403, "developer")
}

func TestPutIntegration(t *testing.T) {
	ctx := context.Background()
	valid := func() dbtsync.IntegrationInput {
		return dbtsync.IntegrationInput{RepoURL: "https://example.test/acme/dbt.git", Branch: "main", ProjectPath: ptr("analytics")}
	}
	cases := []struct {
		name   string
		caller *identity.Principal
		edit   func(*dbtsync.IntegrationInput)
		status int
		msg    string
	}{
		{"integration-403-developer", developer, nil, 403, "requires the admin role or higher"},
		{"integration-400-repo-url-required", admin, func(in *dbtsync.IntegrationInput) { in.RepoURL = "" }, 400, `field "repoUrl" is required`},
		{"integration-400-ssh-url", admin, func(in *dbtsync.IntegrationInput) { in.RepoURL = "git@x:y.git" }, 400, `must be an https:// or file:// URL`},
		{"integration-400-credentials-in-url", admin, func(in *dbtsync.IntegrationInput) { in.RepoURL = "https://tok@example.test/r.git" }, 400, `must not carry credentials`},
		{"integration-400-branch-required", admin, func(in *dbtsync.IntegrationInput) { in.Branch = "" }, 400, `field "branch" is required`},
		{"integration-400-bad-branch", admin, func(in *dbtsync.IntegrationInput) { in.Branch = "a..b" }, 400, `field "branch" must be a branch name`},
		{"integration-400-project-path-required", admin, func(in *dbtsync.IntegrationInput) { in.ProjectPath = nil }, 400, `field "projectPath" is required`},
		{"integration-400-project-path-outside", admin, func(in *dbtsync.IntegrationInput) { in.ProjectPath = ptr("../x") }, 400, `"projectPath" must stay inside`},
		{"integration-400-manifest-path-outside", admin, func(in *dbtsync.IntegrationInput) { in.ManifestPath = ptr("../m.json") }, 400, `"manifestPath" must stay inside`},
		{"integration-400-empty-token", admin, func(in *dbtsync.IntegrationInput) { in.Credentials = &dbtsync.GitCredentials{} }, 400, `"credentials.token" is required`},
		{"integration-400-refused-host", admin, func(in *dbtsync.IntegrationInput) { in.RepoURL = "https://10.0.0.1/x.git" }, 400, `field "repoUrl": host 10.0.0.1 is private`},
		{"integration-400-sha-branch", admin, func(in *dbtsync.IntegrationInput) { in.Branch = "cafe1234" }, 400, `field "branch": "cafe1234" is neither a branch nor a tag`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.git.refused["https://10.0.0.1/x.git"] = "host 10.0.0.1 is private"
			in := valid()
			if c.edit != nil {
				c.edit(&in)
			}
			_, err := f.svc.PutIntegration(ctx, c.caller, dep, in)
			wantErr(t, err, c.status, c.msg)
			if _, err := f.store.Integration(ctx, dep); !errors.Is(err, dbtsync.ErrNotFound) {
				t.Errorf("a refused integration was saved (%v)", err)
			}
		})
	}
	t.Run("integration-200-credentials-sealed-never-returned", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		in := valid()
		in.Credentials = &dbtsync.GitCredentials{Token: "s3cret"}
		out, err := f.svc.PutIntegration(ctx, admin, dep, in)
		if err != nil || !out.HasCredentials || out.ProjectPath != "analytics" || out.ManifestPath != nil {
			t.Fatalf("PutIntegration = %+v %v", out, err)
		}
		saved, _ := f.store.Integration(ctx, dep)
		if !strings.HasPrefix(string(saved.Credentials), fmt.Sprintf("sealed:%d:", dep)) || strings.Contains(string(saved.Credentials), "s3cret") {
			t.Errorf("stored credentials %q, want them sealed for the deployment", saved.Credentials)
		}
		if got, err := f.svc.GetIntegration(ctx, admin, dep); err != nil || got != out {
			t.Errorf("GetIntegration = %+v %v, want %+v", got, err, out)
		}
	})
}

// A files job's result removed by the object store's age limit: the job is still answered,
// with filesExpired, never a 503 that a client would retry forever.
func TestFilesResultExpired(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	kept, expired := f.queueSync(t, "b"), f.queueSync(t, "c")
	for _, id := range []string{kept, expired} {
		f.set(t, id, func(j *dbtsync.Job) { j.Status, j.Output = dbtsync.StatusSucceeded, dbtsync.OutputFiles })
	}
	if err := f.queue.PutResult(ctx, kept, []convert.File{{Path: "model/cubes/a.yml", Content: "cubes: []\n"}}); err != nil {
		t.Fatal(err)
	}
	job, err := f.svc.GetJob(ctx, developer, dep, kept)
	if err != nil || job.Files == nil || job.FilesExpired {
		t.Fatalf("a kept result: %+v %v", job, err)
	}
	if b, _ := io.ReadAll(job.Files); string(b) != `[{"path":"model/cubes/a.yml","content":"cubes: []\n"}]` {
		t.Errorf("the result streams %s", b)
	}
	job, err = f.svc.GetJob(ctx, developer, dep, expired)
	if err != nil || job.Files != nil || !job.FilesExpired || job.Status != dbtsync.StatusSucceeded {
		t.Fatalf("an expired result: %+v %v, want the job with filesExpired", job, err)
	}
}

func TestRedactRepoURLDropsCredentials(t *testing.T) {
	cases := map[string]string{
		"https://bob:ghp_SECRET@github.com/acme/dbt.git":            "https://github.com/acme/dbt.git",
		"https://ghp_SECRET@github.com/acme/dbt.git":                "https://github.com/acme/dbt.git",
		"https://github.com/acme/dbt.git?private_token=SECRET#frag": "https://github.com/acme/dbt.git",
		"https://bob:ghp_SE CRET@github.com/acme/dbt.git":           "https://github.com/acme/dbt.git",
		"https://bob:%zzSECRET@git.example.com/x.git?t=SECRET":      "https://git.example.com/x.git",
		"file://user:SECRET@/srv/repo":                              "file:///srv/repo",
		"https://github.com/acme/dbt.git":                           "https://github.com/acme/dbt.git",
	}
	for in, want := range cases {
		if got := dbtsync.RedactRepoURL(in); got != want || strings.Contains(got, "SECRET") {
			t.Errorf("RedactRepoURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A repoUrl carrying credentials is refused (400), and the audit event of the refused
// request keeps the URL without them.
func TestIntegrationAuditNeverKeepsCredentialsOfTheURL(t *testing.T) {
	f := newFixture(t)
	rec := &audit.Memory{}
	svc := dbtsync.AuditingMiddleware(rec)(f.svc)
	project := "."
	_, err := svc.PutIntegration(context.Background(), admin, dep, dbtsync.IntegrationInput{RepoURL: "https://bob:ghp_SECRET@github.com/acme/dbt.git", Branch: "main", ProjectPath: &project})
	wantErr(t, err, 400, "must not carry credentials")
	evs := rec.Events()
	if len(evs) != 1 || evs[0].Details["repoUrl"] != "https://github.com/acme/dbt.git" || strings.Contains(fmt.Sprint(evs[0]), "SECRET") {
		t.Fatalf("events %+v", evs)
	}
}

// sizedManifest is a start-sync body whose manifest is about size bytes.
func sizedManifest(branch string, size int) string {
	return `{"source":"manifest","branchName":"` + branch + `","manifest":{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{"x":"` +
		strings.Repeat("x", size) + `"}}}`
}

// Uploads running at once are charged to the deployment's quota as they stream, each
// charge atomic: however many run together, what is accepted fits the quota, and the
// rest is 413 naming it. Before, each upload compared the quota with what was already
// stored when it started, and 20 concurrent uploads all passed.
func TestConcurrentUploadsNeverPassTheQuotaTogether(t *testing.T) {
	const size, quota, uploads = 5000, 3*5000 + 2000, 20
	f := newFixtureWith(t, dbtsync.Options{Quotas: dbtsync.StorageQuotas{Deployment: quota, Account: 1 << 30}, MaxQueuedJobs: 100})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[int]int{}
	for i := range uploads {
		wg.Go(func() {
			_, err := f.svc.StartSync(context.Background(), developer, dep, dbtsync.BodyOf(sizedManifest(fmt.Sprintf("b%d", i), size)))
			status, code, msg, _ := errs.Answer(err)
			if err == nil {
				status = 202
			} else if status != 413 || code != "storage_quota" || !strings.Contains(msg, fmt.Sprintf("would pass its limit of %d bytes", quota)) || strings.Contains(msg, "DBT_SYNC_") {
				t.Errorf("upload %d: %d %s %q", i, status, code, msg)
			}
			mu.Lock()
			answers[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if answers[202] < 1 || answers[202] > quota/size || answers[202]+answers[413] != uploads {
		t.Errorf("answers %v: want at most %d accepted, the rest 413", answers, quota/size)
	}
	if n := f.used(t, depLedger); n > quota || len(f.jobs(t)) != answers[202] {
		t.Errorf("charged %d bytes (quota %d) for %d jobs", n, quota, len(f.jobs(t)))
	}
}

// An account's deployments share its quota: one deployment cannot fill what the store
// keeps for every tenant, nor can an account through many deployments.
func TestAccountQuotaBoundsItsDeploymentsTogether(t *testing.T) {
	const size = 5000
	f := newFixtureWith(t, dbtsync.Options{Quotas: dbtsync.StorageQuotas{Deployment: 1 << 20, Account: 3 * size / 2}})
	other := principal(identity.RoleDeveloper)
	other.Deployment = &identity.Deployment{ID: dep + 1, ProductionBranch: prod}
	if _, err := f.svc.StartSync(context.Background(), developer, dep, dbtsync.BodyOf(sizedManifest("a", size))); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.StartSync(context.Background(), other, dep+1, dbtsync.BodyOf(sizedManifest("b", size)))
	wantErr(t, err, 413, "account 1 would pass its limit of 7500 bytes in the dbt sync object store (its uploaded manifests")
	if n := f.used(t, dbtsync.LedgerKey("deployment.12")); n != 0 {
		t.Errorf("the refused deployment's ledger holds %d bytes", n)
	}
}

// A deployment has at most DBT_SYNC_MAX_QUEUED_JOBS jobs queued or running: a sync or a
// retry past it is 429 naming the limit, while other deployments still queue.
func TestQueueLimitIs429ForSyncsAndRetries(t *testing.T) {
	f := newFixtureWith(t, dbtsync.Options{Quotas: dbtsync.StorageQuotas{Deployment: 1 << 20}, MaxQueuedJobs: 2})
	first, _ := f.queueSync(t, "a"), f.queueSync(t, "b")
	_, err := f.svc.StartSync(context.Background(), developer, dep, dbtsync.BodyOf(`{"source":"manifest","branchName":"c","manifest":`+manifest+`}`))
	wantErr(t, err, 429, "deployment 11 has 2 sync jobs queued or running, the most it may have; retry")
	if _, code, _, _ := errs.Answer(err); code != "job_limit" {
		t.Errorf("code %q", code)
	}
	f.set(t, first, func(j *dbtsync.Job) { j.Status = dbtsync.StatusFailed })
	_, err = f.svc.RetryJob(context.Background(), developer, dep, first)
	wantErr(t, err, 429, "has 2 sync jobs queued or running")
	if js := f.jobs(t); len(js) != 2 {
		t.Errorf("jobs past the limit were queued: %d", len(js))
	}
	other := principal(identity.RoleDeveloper)
	other.Deployment = &identity.Deployment{ID: dep + 1, ProductionBranch: prod}
	if _, err := f.svc.StartSync(context.Background(), other, dep+1, dbtsync.BodyOf(`{"source":"manifest","manifest":`+manifest+`}`)); err != nil {
		t.Errorf("another deployment's sync: %v", err)
	}
}
