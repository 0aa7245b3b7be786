package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The operations table: every workspace, dbt sync and embed operation through the
// gateway of the real platform (bin/devstack), against the cheapest request that takes
// the same path (gateway, authentication, a service), from one run.
func init() {
	registerTable(&Table{
		Name:     "operations",
		Title:    "operations through the gateway of the real platform (bin/devstack: FerretDB on PostgreSQL behind the proxy, NATS, redis-server, every service a process)",
		Baseline: "base",
		Scenarios: []Scenario{
			{Key: "healthz", Name: "gateway /healthz (own)", Setup: setupHealthz},
			{Key: "base", Name: "baseline: list 1 item", Setup: setupBaseline},
			{Key: "folder", Name: "create folder", Setup: setupCreateFolder},
			{Key: "move", Name: "single move", Setup: setupSingleMove},
			{Key: "bulk", Name: "bulk move of 100 mixed", Setup: setupBulkMove},
			{Key: "mint", Name: "generate-session", Setup: setupMint},
			{Key: "exchange", Name: "exchange", Setup: setupExchange},
			{Key: "revoke", Name: "revoke", Setup: setupRevoke},
			{Key: "embed", Name: "embed request (token)", Setup: setupEmbedRequest},
			{Key: "dryrun", Name: "generate-session dry run", Setup: setupDryRun},
			{Key: "sessions", Name: "list sessions (page of 20)", Setup: setupListSessions},
			{Key: "revokeuser", Name: "revoke by user (100)", Setup: setupRevokeByUser},
			{Key: "dbtsync", Name: "dbt-sync enqueue", Setup: setupDBTSyncEnqueue},
			{Key: "audit", Name: "audit trail (page of 20)", Setup: setupAuditList},
			{Key: "convert", Name: "convert manifest", Setup: setupConversion},
		},
		Notes:  operationsNotes,
		Legend: operationsLegend,
	})
}

// Worker counts of the rows whose writes meet on one record by design: every
// folder creation and folder move of a deployment is a compare-and-set on that
// deployment's tree version, so 64 concurrent writers to one deployment measure
// retries, not the operation. These are the concurrencies printed in the legend.
// Every other row runs opsWorkers: each write of a database-bound row waits in the
// serializing proxy's queue, so more workers add only latency (and, at 64, client
// timeouts on a loaded machine).
const (
	opsWorkers    = 16
	folderWorkers = 4
	bulkWorkers   = 1
)

// opsTarget is a Target charged to the whole platform, with every process's RSS.
func opsTarget(p platformInfo, tr vegeta.Targeter) *Target {
	return &Target{Targeter: tr, Proc: p.All, RSS: p.Procs, Workers: opsWorkers}
}

func setupHealthz(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	return opsTarget(p, getTargeter(p.Gateway+"/healthz")), nil
}

// setupBaseline is the cheapest authenticated request through the whole proxy
// path: Bearer verification (cached), the signed identity, workspace-svc's
// listing of one item of the root of acme's first deployment.
func setupBaseline(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	return opsTarget(p, vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodGet,
		URL:    fmt.Sprintf("%s/api/v1/deployments/%d/workspace?first=1", p.Gateway, acme.Deployments[0].ID),
		Header: http.Header{"Authorization": {"Bearer " + acme.Users["admin"].Bearer}},
	})), nil
}

// setupCreateFolder creates root folders in acme's second deployment, so the
// growing folder count does not touch the deployment the moves run in.
func setupCreateFolder(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	url := fmt.Sprintf("%s/api/v1/deployments/%d/folders", p.Gateway, acme.Deployments[1].ID)
	hdr := jsonHeader("Bearer " + acme.Users["admin"].Bearer)
	var n atomic.Int64
	t := opsTarget(p, func(tgt *vegeta.Target) error {
		*tgt = vegeta.Target{Method: http.MethodPost, URL: url, Header: hdr,
			Body: fmt.Appendf(nil, `{"name":"bench folder %d"}`, n.Add(1))}
		return nil
	})
	t.Workers = folderWorkers
	return t, nil
}

// alternatingMoves cycles through items; each lap over them moves every item to
// the other of two folders, so every request is a real move.
func alternatingMoves(n int, body func(i int, toB bool) []byte, url string, hdr http.Header) vegeta.Targeter {
	var seq atomic.Int64
	return func(tgt *vegeta.Target) error {
		i := int(seq.Add(1) - 1)
		lap := i / n
		*tgt = vegeta.Target{Method: http.MethodPost, URL: url, Header: hdr, Body: body(i%n, lap%2 == 0)}
		return nil
	}
}

// setupSingleMove moves 32 workbooks and reports, one per request, between
// two folders of acme's first deployment.
func setupSingleMove(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	dep, bearer := acme.Deployments[0].ID, acme.Users["admin"].Bearer
	c := newAPIClient(p.Gateway)
	a, err := c.createFolder(ctx, bearer, dep, "bench single A", 0)
	if err != nil {
		return nil, err
	}
	b, err := c.createFolder(ctx, bearer, dep, "bench single B", 0)
	if err != nil {
		return nil, err
	}
	type item struct {
		kind string
		id   int64
	}
	items := make([]item, 32)
	err = parallel(ctx, len(items), 8, func(ctx context.Context, i int) error {
		kind, typ := "workbooks", "WORKBOOK"
		if i%2 == 1 {
			kind, typ = "reports", "REPORT"
		}
		id, err := c.createItem(ctx, bearer, dep, kind, fmt.Sprintf("bench single %d", i), a)
		items[i] = item{typ, id}
		return err
	})
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("%s/api/v1/deployments/%d/workspace/move", p.Gateway, dep)
	return opsTarget(p, alternatingMoves(len(items), func(i int, toB bool) []byte {
		dest := a
		if toB {
			dest = b
		}
		return fmt.Appendf(nil, `{"type":%q,"id":%d,"folderId":%d}`, items[i].kind, items[i].id, dest)
	}, url, jsonHeader("Bearer "+bearer))), nil
}

// bulkSets is how many distinct sets of 100 items the bulk-move row cycles
// through: twice its workers, so no two requests in flight move the same items.
const bulkSets = 2 * bulkWorkers

// setupBulkMove creates bulkSets sets of 100 mixed items (34 folders, 33
// workbooks, 33 reports) in folder C of acme's first deployment; each request
// moves one whole set to the other of C and D.
func setupBulkMove(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	dep, bearer := acme.Deployments[0].ID, acme.Users["admin"].Bearer
	c := newAPIClient(p.Gateway)
	cFolder, err := c.createFolder(ctx, bearer, dep, "bench bulk C", 0)
	if err != nil {
		return nil, err
	}
	dFolder, err := c.createFolder(ctx, bearer, dep, "bench bulk D", 0)
	if err != nil {
		return nil, err
	}
	sets := make([][]byte, bulkSets) // the items array of each set, as JSON
	for s := range sets {
		refs, err := createMixedItems(ctx, c, bearer, dep, cFolder, fmt.Sprintf("bench bulk %d", s))
		if err != nil {
			return nil, err
		}
		if sets[s], err = json.Marshal(refs); err != nil {
			return nil, err
		}
	}
	url := fmt.Sprintf("%s/api/v1/deployments/%d/workspace/bulk-move", p.Gateway, dep)
	t := opsTarget(p, alternatingMoves(len(sets), func(i int, toB bool) []byte {
		dest := cFolder
		if toB {
			dest = dFolder
		}
		return fmt.Appendf(nil, `{"items":%s,"folderId":%d}`, sets[i], dest)
	}, url, jsonHeader("Bearer "+bearer)))
	t.Workers = bulkWorkers
	t.Check = wantAllMoved(100)
	countBulkMoveCommands(ctx, p, c, bearer, dep, sets[0], cFolder, dFolder)
	countWorkspaceReads(ctx, p, c, bearer, dep, cFolder, dFolder)
	return t, nil
}

type itemRef struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
}

// createMixedItems creates 34 folders, 33 workbooks and 33 reports in parent.
func createMixedItems(ctx context.Context, c *apiClient, bearer string, dep, parent int64, prefix string) ([]itemRef, error) {
	refs := make([]itemRef, 100)
	// Folder creations of one deployment meet on its tree version: few at a time.
	err := parallel(ctx, len(refs), 4, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("%s item %d", prefix, i)
		var err error
		switch i % 3 {
		case 0:
			refs[i].Type = "FOLDER"
			refs[i].ID, err = c.createFolder(ctx, bearer, dep, name, parent)
		case 1:
			refs[i].Type = "WORKBOOK"
			refs[i].ID, err = c.createItem(ctx, bearer, dep, "workbooks", name, parent)
		default:
			refs[i].Type = "REPORT"
			refs[i].ID, err = c.createItem(ctx, bearer, dep, "reports", name, parent)
		}
		return err
	})
	return refs, err
}

// wantAllMoved fails a bulk move whose 200 answer has failures: the status alone
// says nothing about the items (spec rule 2).
func wantAllMoved(n int) func([]byte) error {
	return func(body []byte) error {
		var out struct {
			Moved  []json.RawMessage `json:"moved"`
			Failed []struct {
				Error struct {
					Status  int    `json:"status"`
					Message string `json:"message"`
				} `json:"error"`
			} `json:"failed"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("bulk move answer: %w", err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0].Error
			return fmt.Errorf("bulk move: %d of %d items failed, e.g. %d %s", len(out.Failed), n, f.Status, f.Message)
		}
		if len(out.Moved) != n {
			return fmt.Errorf("bulk move: %d items moved, want %d", len(out.Moved), n)
		}
		return nil
	}
}

func jsonHeader(auth string) http.Header {
	return http.Header{"Authorization": {auth}, "Content-Type": {"application/json"}}
}

// externalUsers is the pool of external ids sessions are minted for: every mint
// after the first lap is for a known user, and the account stays far below its
// limit of 10,000 external users.
const externalUsers = 500

func setupMint(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	url, hdr, dep := p.Gateway+"/api/v1/embed/generate-session", jsonHeader("Api-Key "+acme.APIKeys["admin"]), acme.Deployments[0].ID
	var n atomic.Int64
	t := opsTarget(p, func(tgt *vegeta.Target) error {
		*tgt = vegeta.Target{Method: http.MethodPost, URL: url, Header: hdr,
			Body: fmt.Appendf(nil, `{"deploymentId":%d,"externalId":"bench-user-%d"}`, dep, n.Add(1)%externalUsers)}
		return nil
	})
	countMintRoundTrips(ctx, p, newAPIClient(p.Gateway), acme.APIKeys["admin"], dep)
	return t, nil
}

// poolLimit caps how many sessions are minted (and exchanged) before one run of
// the exchange or revoke row; a pool that runs dry ends that run early.
const poolLimit = 600

// mintedSessions is a pool of fresh session ids of acme's first deployment.
func mintedSessions(p platformInfo, exchanged bool) (*sessionPool, func(ctx context.Context, d time.Duration) error) {
	acme := p.Seed.Accounts["acme"]
	c := newAPIClient(p.Gateway)
	pool := &sessionPool{}
	return pool, func(ctx context.Context, d time.Duration) error {
		return pool.fill(ctx, d, poolLimit, func(ctx context.Context, i int) (string, error) {
			sid, err := c.mint(ctx, acme.APIKeys["admin"], acme.Deployments[0].ID, fmt.Sprintf("bench-user-%d", i%externalUsers))
			if err == nil && exchanged {
				_, err = c.exchange(ctx, sid)
			}
			return sid, err
		})
	}
}

func setupExchange(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	return sessionIDTarget(p, false, "/api/v1/embed/session/exchange", http.Header{"Content-Type": {"application/json"}}), nil
}

// setupRevoke revokes sessions that were minted and exchanged: the case of a
// viewer whose embed is in use.
func setupRevoke(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	return sessionIDTarget(p, true, "/api/v1/embed/session/revoke", jsonHeader("Api-Key "+p.Seed.Accounts["acme"].APIKeys["admin"])), nil
}

// sessionIDTarget sends {"sessionId": …} to path, one pre-minted session (exchanged
// first when exchanged is set) per request, until the pool runs dry.
func sessionIDTarget(p platformInfo, exchanged bool, path string, hdr http.Header) *Target {
	pool, prepare := mintedSessions(p, exchanged)
	url := p.Gateway + path
	t := opsTarget(p, func(tgt *vegeta.Target) error {
		sid, ok := pool.take()
		if !ok {
			return vegeta.ErrNoTargets
		}
		*tgt = vegeta.Target{Method: http.MethodPost, URL: url, Header: hdr, Body: fmt.Appendf(nil, `{"sessionId":%q}`, sid)}
		return nil
	})
	t.Prepare = prepare
	return t
}

// setupEmbedRequest reads the session with its embed token: signature check,
// the uncached revocation check in Redis, embed-svc's session info.
func setupEmbedRequest(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	c := newAPIClient(p.Gateway)
	sid, err := c.mint(ctx, acme.APIKeys["admin"], acme.Deployments[0].ID, "bench-embed-viewer")
	if err != nil {
		return nil, err
	}
	token, err := c.exchange(ctx, sid)
	if err != nil {
		return nil, err
	}
	return opsTarget(p, vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodGet, URL: p.Gateway + "/api/v1/embed/session",
		Header: http.Header{"Authorization": {"Bearer " + token}},
	})), nil
}

// smallManifest is a dbt manifest of two models, one with a relationship test.
const smallManifest = `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","dbt_version":"1.10.0"},` +
	`"nodes":{` +
	`"model.bench.orders":{"resource_type":"model","name":"orders","database":"analytics","schema":"marts","alias":"orders","unique_id":"model.bench.orders","description":"Orders","config":{"enabled":true,"materialized":"table"},` +
	`"columns":{"id":{"name":"id","data_type":"bigint"},"customer_id":{"name":"customer_id","data_type":"bigint"},"amount":{"name":"amount","data_type":"numeric"},"ordered_at":{"name":"ordered_at","data_type":"timestamp"}}},` +
	`"model.bench.customers":{"resource_type":"model","name":"customers","database":"analytics","schema":"marts","alias":"customers","unique_id":"model.bench.customers","description":"Customers","config":{"enabled":true,"materialized":"table"},` +
	`"columns":{"id":{"name":"id","data_type":"bigint"},"name":{"name":"name","data_type":"varchar"}}}},` +
	`"metrics":{},"semantic_models":{}}`

// setupDBTSyncEnqueue uploads the small manifest; 202 means the job is durably
// queued. The worker is paused for the rest of the run (SIGSTOP): otherwise the
// thousands of queued jobs would convert during every later row; conversion is
// measured on its own by the next row.
func setupDBTSyncEnqueue(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	if pid, ok := p.PIDs["dbtsync-worker"]; ok {
		if err := pauseProcess(pid, true); err != nil {
			return nil, fmt.Errorf("pause the dbtsync worker: %w", err)
		}
		workerPaused.Store(true)
	}
	acme := p.Seed.Accounts["acme"]
	return opsTarget(p, vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodPost,
		URL:    fmt.Sprintf("%s/api/v1/deployments/%d/dbt-sync", p.Gateway, acme.Deployments[0].ID),
		Header: jsonHeader("Bearer " + acme.Users["admin"].Bearer),
		Body:   []byte(`{"source":"manifest","manifest":` + smallManifest + `}`),
	})), nil
}

// opsCounts are the per-operation database and Redis figures measured during set-up.
var opsCounts struct {
	sync.Mutex
	lines []string
}

func addCountLine(format string, args ...any) {
	opsCounts.Lock()
	opsCounts.lines = append(opsCounts.lines, fmt.Sprintf(format, args...))
	opsCounts.Unlock()
}

func operationsNotes(res map[string]*Summary) []string {
	var lines []string
	if h, b := res["healthz"], res["base"]; h != nil && b != nil && h.Err == nil && b.Err == nil && h.RPS > 0 {
		lines = append(lines, fmt.Sprintf("baseline: the proxied baseline serves %.2g of the requests/s of the gateway's own /healthz (1 in %.0f)", b.RPS/h.RPS, h.RPS/b.RPS))
	}
	if s := res["convert"]; s != nil && s.Err == nil {
		lines = append(lines, conversionLine())
	}
	opsCounts.Lock()
	lines = append(lines, opsCounts.lines...)
	opsCounts.Unlock()
	return lines
}

var operationsLegend = []string{
	"legend: req/s = successful responses/s, p50/p99 = latency, medians over the rounds; errors summed (a bulk move with any",
	"        failed item is an error). rps_vs_base divides by the baseline row: GET /api/v1/deployments/{id}/workspace?first=1",
	"        with a Bearer token, the cheapest request that takes the whole path gateway -> service -> database. The gateway's",
	"        own /healthz never leaves the gateway and is printed for reference. cpu_us/req = user+system CPU of every process",
	"        of the platform (devstack with FerretDB, the proxy and NATS; PostgreSQL; redis-server; the services; the gateway).",
	fmt.Sprintf("        Workers (not the header's): create folder %d, bulk move %d (their writes meet on the deployment's tree version by", folderWorkers, bulkWorkers),
	fmt.Sprintf("        design), every other row %d (database writes queue in the serializing proxy).", opsWorkers),
	fmt.Sprintf("        Exchange and revoke consume up to %d sessions minted (for revoke also exchanged) before each run, untimed;", poolLimit),
	"        a pool that runs dry ends the run early (req/s is over the time it ran). The dbtsync worker is paused from the dbt-sync row on, so queued jobs do",
	"        not convert during other rows. convert = bin dbtconvert on the generated manifest, one run per round: req/s is",
	"        conversions/s, p50/p99 its wall time, cpu its own CPU. The proxy serializes every write (see README): figures of",
	"        database-bound rows say nothing about MongoDB; the command counts do.",
}
