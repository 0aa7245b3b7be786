// Package neighbour is the noisy-neighbour run, shared by the attack suite
// (which asserts function) and make bench (which prints latencies): one account, the
// flooder (acme), uses every share the platform's tenants have in common at once, while
// another, the neighbour (globex), runs a fixed workload through the same gateway.
//
// The flood: acme's viewer bulk-moves 100 workbooks of the maximum size that it may not
// move; acme's admin key mints sessions with maximal attribute sets; its two deployments'
// dbt-sync queues are kept at their caps, one with a repository whose one file is a
// compressed bomb, the other with concurrent uploads at the storage quota; anonymous
// exchanges of replayed and unknown session ids. The neighbour's workload: a folder GET,
// a listing, a mint and its exchange, two bulk moves of its own workbooks, and a dbt sync
// of a real (jaffle_shop) manifest. Each account sends from an address of its own
// (X-Forwarded-For through the trusted local proxy), as two customers would.
package neighbour

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/gitrepo"
)

// The caps the run's stack is configured with: small, so the flood reaches each of them
// within seconds; the code that enforces them is the same as at the defaults.
const (
	// ItemCap is each of a workbook's meta, calculated fields and draft at its maximum:
	// 1 KiB. The local stack's FerretDB reads every item of a deployment whole for each
	// create and each move of the flooder's (a filter it cannot push down), so preparing
	// 100 items reads about 5,000 items' worth: minutes under -race at 8 KiB.
	ItemCap = 1 << 10
	// QueuedJobs is DBT_SYNC_MAX_QUEUED_JOBS: a deployment's queue is full at this many.
	QueuedJobs = 4
	// DeploymentUploadBytes is DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES; the flood's uploads are
	// UploadBytes each, so a few at once pass it.
	DeploymentUploadBytes = 8 << 20
	UploadBytes           = 3 << 20
	// RepoBytes is DBT_SYNC_MAX_REPO_BYTES; the bomb inflates to BombBytes (written, and
	// compressed, once per run: small, so the writing is quick under -race).
	RepoBytes = 8 << 20
	BombBytes = 4 * RepoBytes
)

// StackEnv is the run's configuration of every process of the stack, besides
// EMBED_MAX_LIVE_SESSIONS_PER_ACCOUNT, which the caller sets (the attack suite low, so the
// flooder reaches it; the bench above what the neighbour mints in its rounds). Rate
// limits and the failed-authentication limit are at their defaults: they are per key and
// per client address, and the two accounts send from addresses of their own.
var StackEnv = []string{
	"GATEWAY_TRUSTED_PROXIES=127.0.0.1",
	"RATE_LIMIT_GENERATE_SESSION=600/1m", "RATE_LIMIT_EXCHANGE=300/1m", "AUTH_FAILURE_LIMIT=60/1m",
	"WORKSPACE_MAX_META_BYTES=" + strconv.Itoa(ItemCap), "WORKSPACE_MAX_CALCULATED_FIELDS_BYTES=" + strconv.Itoa(ItemCap),
	"WORKSPACE_MAX_DRAFT_BYTES=" + strconv.Itoa(ItemCap),
	"DBT_SYNC_MAX_QUEUED_JOBS=" + strconv.Itoa(QueuedJobs),
	"DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES=" + strconv.Itoa(DeploymentUploadBytes),
	"DBT_SYNC_MAX_ACCOUNT_UPLOAD_BYTES=" + strconv.Itoa(2*DeploymentUploadBytes),
	// The store every account writes to is small too: the account quota keeps room in it.
	"DBT_SYNC_OBJECT_MAX_BYTES=" + strconv.Itoa(64<<20),
	"DBT_SYNC_MAX_REPO_BYTES=" + strconv.Itoa(RepoBytes),
}

// The client addresses of the two accounts (documentation ranges, RFC 5737).
const (
	flooderAddr   = "203.0.113.66"
	neighbourAddr = "198.51.100.7"
)

// Run is a prepared noisy-neighbour run on one stack.
type Run struct {
	gateway            string
	flooder, neighbour devstack.SeedAccount
	fc, nc             *client // the flooder's and the neighbour's

	// The flooder's: the workbooks its viewer moves, its deployments (the bomb's, the
	// uploads').
	floodItems         []itemRef
	bombDep, uploadDep int64
	usedSession        string // exchanged once; the flood replays it
	upload             []byte // a manifest sync padded to UploadBytes
	// The neighbour's: its deployment, folders A and B, the workbooks moved between them,
	// and the manifest it syncs.
	dep      int64
	a, b     int64
	items    []itemRef
	manifest json.RawMessage
	laps     int // laps run, for the external ids the mints rotate through
}

// BombDeployment is the flooder's deployment whose git integration is the bomb.
func (r *Run) BombDeployment() int64 { return r.bombDep }

type itemRef struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
}

// Options are what Prepare needs besides the stack.
type Options struct {
	Gateway string
	Seed    devstack.Seed
	// Manifest is the neighbour's dbt manifest (a file of ../shared/fixtures/dbt).
	Manifest []byte
	// Dir is where the bomb repository is written (a temporary directory).
	Dir string
}

// Prepare makes what the run needs through the gateway: the flooder's 100 workbooks of
// the maximum size, published, in a folder private to its ai_bi_user; its first
// deployment's git integration on the bomb; the neighbour's folders and 20 workbooks.
func Prepare(ctx context.Context, o Options) (*Run, error) {
	acme, globex := o.Seed.Accounts["acme"], o.Seed.Accounts["globex"]
	if len(acme.Deployments) < 2 || len(globex.Deployments) < 1 || !json.Valid(o.Manifest) {
		return nil, fmt.Errorf("neighbour: need acme's two deployments, globex's one and a JSON manifest")
	}
	r := &Run{gateway: o.Gateway, flooder: acme, neighbour: globex, fc: newClient(o.Gateway, flooderAddr), nc: newClient(o.Gateway, neighbourAddr),
		bombDep: acme.Deployments[0].ID, uploadDep: acme.Deployments[1].ID, dep: globex.Deployments[0].ID, manifest: o.Manifest}
	if err := r.prepareFlooderItems(ctx); err != nil {
		return nil, err
	}
	bomb := filepath.Join(o.Dir, "bomb")
	if err := gitrepo.WriteZeroModel(bomb, BombBytes); err != nil {
		return nil, err
	}
	integration := map[string]any{"repoUrl": "file://" + bomb, "branch": "main", "projectPath": ""}
	if err := r.fc.want(ctx, "PUT", depPath(r.bombDep, "/dbt-git-integration"), bearer(acme, "admin"), integration, 200, nil); err != nil {
		return nil, err
	}
	var minted struct{ SessionID string }
	key := "Api-Key " + acme.APIKeys["admin"]
	if err := r.fc.want(ctx, "POST", "/api/v1/embed/generate-session", key, map[string]any{"deploymentId": r.bombDep, "externalId": "flood-replayed"}, 200, &minted); err != nil {
		return nil, err
	}
	if err := r.fc.want(ctx, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": minted.SessionID}, 200, nil); err != nil {
		return nil, err
	}
	r.usedSession = minted.SessionID
	upload, err := json.Marshal(UploadSync("flood/upload", UploadBytes))
	if err != nil {
		return nil, err
	}
	r.upload = upload
	return r, r.prepareNeighbourItems(ctx)
}

// prepareFlooderItems creates the workbooks the flooder's viewer bulk-moves: each with
// meta, calculated fields and draft at ItemCap, published.
func (r *Run) prepareFlooderItems(ctx context.Context) error {
	ai, dep := bearer(r.flooder, "aiBiUser"), r.bombDep
	var folder idOnly
	if err := r.fc.want(ctx, "POST", depPath(dep, "/folders"), ai, map[string]any{"name": "ai private"}, 200, &folder); err != nil {
		return err
	}
	blob := map[string]any{"m": string(bytes.Repeat([]byte("A"), ItemCap-16))}
	draft := map[string]any{"title": string(bytes.Repeat([]byte("T"), ItemCap-32))}
	r.floodItems = make([]itemRef, 100)
	return parallel(ctx, len(r.floodItems), 2, func(ctx context.Context, i int) error {
		var w idOnly
		body := map[string]any{"name": fmt.Sprint("max ", i), "folderId": folder.ID, "meta": blob, "calculatedFields": blob, "dashboardDraft": draft}
		if err := r.fc.want(ctx, "POST", depPath(dep, "/workbooks"), ai, body, 200, &w); err != nil {
			return err
		}
		r.floodItems[i] = itemRef{"WORKBOOK", w.ID}
		return r.fc.want(ctx, "POST", depPath(dep, fmt.Sprintf("/workbooks/%d/publish", w.ID)), ai, nil, 200, nil)
	})
}

// prepareNeighbourItems creates the neighbour's folders A and B and 20 workbooks in A.
func (r *Run) prepareNeighbourItems(ctx context.Context) error {
	admin := bearer(r.neighbour, "admin")
	var a, b idOnly
	if err := r.nc.want(ctx, "POST", depPath(r.dep, "/folders"), admin, map[string]any{"name": "neighbour A"}, 200, &a); err != nil {
		return err
	}
	if err := r.nc.want(ctx, "POST", depPath(r.dep, "/folders"), admin, map[string]any{"name": "neighbour B"}, 200, &b); err != nil {
		return err
	}
	r.a, r.b = a.ID, b.ID
	r.items = make([]itemRef, 20)
	return parallel(ctx, len(r.items), 2, func(ctx context.Context, i int) error {
		var w idOnly
		err := r.nc.want(ctx, "POST", depPath(r.dep, "/workbooks"), admin, map[string]any{"name": fmt.Sprint("neighbour ", i), "folderId": r.a}, 200, &w)
		r.items[i] = itemRef{"WORKBOOK", w.ID}
		return err
	})
}

// UploadSync is the body of a manifest sync into branch of one model, padded with pad
// bytes: an upload of about pad bytes that converts in no time.
func UploadSync(branch string, pad int) map[string]any {
	return map[string]any{"source": "manifest", "branchName": branch, "manifest": map[string]any{
		"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"},
		"nodes": map[string]any{"model.p.m": map[string]any{"resource_type": "model", "name": "m", "alias": "m", "database": "d", "schema": "s",
			"config": map[string]any{"materialized": "table"}, "columns": map[string]any{}}},
		"pad": strings.Repeat("x", pad)}}
}

type idOnly struct {
	ID int64 `json:"id"`
}

func depPath(dep int64, rest string) string {
	return fmt.Sprintf("/api/v1/deployments/%d%s", dep, rest)
}

func bearer(a devstack.SeedAccount, user string) string { return "Bearer " + a.Users[user].Bearer }

// client sends the run's requests from one client address.
type client struct {
	api  *apitest.Client
	addr string
}

func newClient(base, addr string) *client {
	c := apitest.New(base)
	c.HTTP.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}
	return &client{api: c, addr: addr}
}

// answer is one answered request, or the transport error that stood for it.
type answer struct {
	apitest.Response
	code      string // the error body's code
	requestID string // the gateway's X-Request-Id
	took      time.Duration
}

// do sends body (see apitest.Client.Request) with authz, from the client's address.
func (c *client) do(ctx context.Context, method, path, authz string, body any) answer {
	req, err := c.api.Request(method, path, authz, body)
	if err != nil {
		return answer{Response: apitest.Response{Err: err}}
	}
	req.Header.Set("X-Forwarded-For", c.addr)
	start := time.Now()
	a := answer{Response: c.api.DoRequest(req.WithContext(ctx))}
	a.took = time.Since(start)
	if a.Header != nil {
		a.requestID = a.Header.Get("X-Request-Id")
	}
	if a.Status >= 400 {
		var e apitest.ErrorBody
		_ = json.Unmarshal(a.Body, &e)
		a.code = e.Code
	}
	return a
}

// want sends a set-up request and wants status; out, when set, receives the JSON answer.
func (c *client) want(ctx context.Context, method, path, authz string, body any, status int, out any) error {
	a := c.do(ctx, method, path, authz, body)
	if a.Err != nil || a.Status != status {
		return fmt.Errorf("%s %s: want %d, got %s", method, path, status, a)
	}
	if out != nil {
		return json.Unmarshal(a.Body, out)
	}
	return nil
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	next, errs := make(chan int), make(chan error, workers)
	for range workers {
		go func() {
			var first error
			for i := range next {
				if err := f(ctx, i); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
