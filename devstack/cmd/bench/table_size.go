package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"go.mongodb.org/mongo-driver/v2/mongo"
	mongooptions "go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
)

// The size tables (issue 28): the workspace's everyday requests on stacks that differ
// only in what another deployment stores (sizes, filled in bulk by
// devstack.FillWorkspace), so a ratio of the same row at two sizes says whether a
// request's cost follows the platform's size or its own. "size" runs the local stack as
// make run does; "engines" (only with -only engines) runs every candidate engine that way,
// every row of every stack interleaved round by round.
func init() {
	registerTable(&Table{
		Name:      "size",
		Title:     "the workspace's requests with 100 and with 50,000 items of another deployment stored (bin/devstack as make run starts it)",
		Scenarios: sizeScenarios(engineCandidates[:1]),
		Notes:     sizeNotes(engineCandidates[:1]),
		Legend:    sizeLegend,
	})
	registerTable(&Table{
		Name:      "engines",
		Title:     "the embedded MongoDB's candidates, each with 100 and with 50,000 items of another deployment stored",
		Scenarios: sizeScenarios(engineCandidates),
		Notes:     sizeNotes(engineCandidates),
		Legend:    sizeLegend,
		OptIn:     true,
	})
}

// engineCandidate is one way to run the embedded MongoDB: devstack's environment for it.
type engineCandidate struct {
	Key, Label string
	Env        []string
}

// engineCandidates: the default first.
var engineCandidates = []engineCandidate{
	{"pg", "PostgreSQL+GIN, all serialised", nil},
	{"pgwrites", "PostgreSQL+GIN, writes serialised", []string{"DEVSTACK_MONGO_SERIALIZE=writes"}},
	{"pgbtree", "PostgreSQL (FerretDB's btrees only), all serialised", []string{"DEVSTACK_MONGO_GIN=0"}},
	{"sqlite", "SQLite, all serialised (main before)", []string{"DEVSTACK_MONGO_ENGINE=sqlite"}},
	{"sqlitewrites", "SQLite, writes serialised", []string{"DEVSTACK_MONGO_ENGINE=sqlite", "DEVSTACK_MONGO_SERIALIZE=writes"}},
}

// platformSizes are the items another deployment holds on the compared stacks.
var platformSizes = []int{100, 50_000}

// sizeOps are the measured requests: key, row label, workers.
var sizeOps = []struct {
	key, label string
	workers    int
}{
	{"get", "folder GET", 4},
	{"list", "list page of 20", 4},
	{"bulk", "bulk move of 10", 1}, // moves of one deployment meet on its tree version
}

func sizeKey(c engineCandidate, op string, size int) string {
	return fmt.Sprintf("%s-%s-%d", c.Key, op, size)
}

func sizeScenarios(cands []engineCandidate) []Scenario {
	var out []Scenario
	for _, c := range cands {
		for _, op := range sizeOps {
			for _, size := range platformSizes {
				name := fmt.Sprintf("%s @%d", op.label, size)
				if len(cands) > 1 {
					name = fmt.Sprintf("%s: %s", c.Key, name)
				}
				out = append(out, Scenario{Key: sizeKey(c, op.key, size), Name: name, Setup: setupSized(c, op.key, op.workers, size)})
			}
		}
	}
	return out
}

// sizedStack is one stack of the comparison with its working set in acme's first
// deployment: folder A holding 40 workbooks (the folder read and listed), and two sets of
// 10 mixed items (4 folders, 3 workbooks, 3 reports) in folder C, moved between C and D.
type sizedStack struct {
	p          platformInfo
	dep        int64
	bearer     string
	a, c, d    int64
	sets       [][]byte
	filled     devstack.Filled
	fillTook   time.Duration
	candidate  engineCandidate
	otherItems int
}

func (e *Env) sizedStack(ctx context.Context, c engineCandidate, size int) (*sizedStack, error) {
	key := fmt.Sprintf("sized-%s-%d", c.Key, size) // the platform's key and data dir
	return memo(e, "workingset-"+key, func() (*sizedStack, error) {
		p, err := e.platformWith(ctx, key, c.Env...)
		if err != nil {
			return nil, err
		}
		s := &sizedStack{p: p, candidate: c, otherItems: size}
		// The working set first: on an engine that scans, creating it after the fill
		// would take minutes.
		if err := s.workingSet(ctx); err != nil {
			return nil, err
		}
		return s, s.fill(ctx, size)
	})
}

// fill writes size items into initech's deployment, through the stack's MongoDB.
func (s *sizedStack) fill(ctx context.Context, size int) error {
	initech := s.p.Seed.Accounts["initech"]
	if len(initech.Deployments) == 0 {
		return fmt.Errorf("platformctl seed: initech has no deployment to fill")
	}
	client, err := mongo.Connect(mongooptions.Client().ApplyURI(s.p.Mongo).SetTimeout(10 * time.Minute))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	logf("%s: filling initech's deployment with %d items", s.candidate.Key, size)
	start := time.Now()
	s.filled, err = devstack.FillWorkspace(ctx, client.Database("workspace"),
		devstack.Fill{Deployment: initech.Deployments[0].ID, By: initech.Users["admin"].ID, Items: size})
	s.fillTook = time.Since(start)
	return err
}

func (s *sizedStack) workingSet(ctx context.Context) error {
	acme := s.p.Seed.Accounts["acme"]
	s.dep, s.bearer = acme.Deployments[0].ID, acme.Users["admin"].Bearer
	c := newAPIClient(s.p.Gateway)
	var err error
	for _, f := range []struct {
		id   *int64
		name string
	}{{&s.a, "size A"}, {&s.c, "size C"}, {&s.d, "size D"}} {
		if *f.id, err = c.createFolder(ctx, s.bearer, s.dep, f.name, 0); err != nil {
			return err
		}
	}
	if err := parallel(ctx, 40, 4, func(ctx context.Context, i int) error {
		_, err := c.createItem(ctx, s.bearer, s.dep, "workbooks", fmt.Sprintf("size workbook %d", i), s.a)
		return err
	}); err != nil {
		return err
	}
	for set := range 2 {
		refs := make([]itemRef, 10)
		for i := range refs {
			name := fmt.Sprintf("size set %d item %d", set, i)
			switch {
			case i < 4:
				refs[i].Type = "FOLDER"
				refs[i].ID, err = c.createFolder(ctx, s.bearer, s.dep, name, s.c)
			case i < 7:
				refs[i].Type = "WORKBOOK"
				refs[i].ID, err = c.createItem(ctx, s.bearer, s.dep, "workbooks", name, s.c)
			default:
				refs[i].Type = "REPORT"
				refs[i].ID, err = c.createItem(ctx, s.bearer, s.dep, "reports", name, s.c)
			}
			if err != nil {
				return err
			}
		}
		raw, err := json.Marshal(refs)
		if err != nil {
			return err
		}
		s.sets = append(s.sets, raw)
	}
	return nil
}

// request is the n-th request of op on the stack.
func (s *sizedStack) request(op string, n int) vegeta.Target {
	base := fmt.Sprintf("%s/api/v1/deployments/%d", s.p.Gateway, s.dep)
	hdr := jsonHeader("Bearer " + s.bearer)
	switch op {
	case "get":
		return vegeta.Target{Method: http.MethodGet, URL: fmt.Sprintf("%s/folders/%d", base, s.a), Header: hdr}
	case "list":
		return vegeta.Target{Method: http.MethodGet, URL: fmt.Sprintf("%s/workspace?folderId=%d&first=20", base, s.a), Header: hdr}
	}
	// Each lap over the sets moves every set to the other of C and D.
	set, lap := n%len(s.sets), n/len(s.sets)
	dest := s.d
	if lap%2 == 1 {
		dest = s.c
	}
	return vegeta.Target{Method: http.MethodPost, URL: base + "/workspace/bulk-move", Header: hdr,
		Body: fmt.Appendf(nil, `{"items":%s,"folderId":%d}`, s.sets[set], dest)}
}

func setupSized(c engineCandidate, op string, workers, size int) func(ctx context.Context, env *Env) (*Target, error) {
	return func(ctx context.Context, env *Env) (*Target, error) {
		s, err := env.sizedStack(ctx, c, size)
		if err != nil {
			return nil, err
		}
		var n int
		var mu sync.Mutex
		next := func() int {
			mu.Lock()
			defer mu.Unlock()
			n++
			return n - 1
		}
		if err := s.count(ctx, sizeKey(c, op, size), op, next); err != nil {
			return nil, err
		}
		t := &Target{Proc: s.p.All, RSS: s.p.Procs, Workers: workers, Targeter: func(tgt *vegeta.Target) error {
			*tgt = s.request(op, next())
			return nil
		}}
		if op == "bulk" {
			t.Check = wantAllMoved(10)
		}
		return t, nil
	}
}

// engineCounts are what one request of a row costs the database, counted around serial
// requests at set-up: commands the services sent (their command monitors) and, on
// PostgreSQL, statements, rows returned and shared buffers touched (pg_stat_statements).
type engineCounts struct {
	commands, statements, rows, buffers float64
	postgres                            bool
}

var sizeCounts = struct {
	sync.Mutex
	byKey map[string]engineCounts
	fills map[string]string
}{byKey: map[string]engineCounts{}, fills: map[string]string{}}

// countedRequests is how many serial requests a row's counts are taken over.
const countedRequests = 20

func (s *sizedStack) count(ctx context.Context, key, op string, next func() int) error {
	c := newAPIClient(s.p.Gateway)
	defer c.http.CloseIdleConnections()
	cmd0, _, err := platformMongoCounts(ctx, s.p)
	if err != nil {
		return err
	}
	pg0, err := pgStatements(ctx, s.p.Postgres)
	if err != nil {
		return err
	}
	for range countedRequests {
		tgt := s.request(op, next())
		var body any
		if tgt.Body != nil {
			body = rawJSON(tgt.Body)
		}
		path := strings.TrimPrefix(tgt.URL, s.p.Gateway)
		if err := c.do(ctx, tgt.Method, path, tgt.Header.Get("Authorization"), body, http.StatusOK, nil); err != nil {
			return err
		}
	}
	cmd1, _, err := platformMongoCounts(ctx, s.p)
	if err != nil {
		return err
	}
	pg1, err := pgStatements(ctx, s.p.Postgres)
	if err != nil {
		return err
	}
	ec := engineCounts{commands: (cmd1 - cmd0) / countedRequests, postgres: s.p.Postgres != ""}
	if ec.postgres {
		ec.statements = (pg1[0] - pg0[0]) / countedRequests
		ec.rows = (pg1[1] - pg0[1]) / countedRequests
		ec.buffers = (pg1[2] - pg0[2]) / countedRequests
	}
	sizeCounts.Lock()
	sizeCounts.byKey[key] = ec
	sizeCounts.fills[fmt.Sprintf("%s-%d", s.candidate.Key, s.otherItems)] = fmt.Sprintf("%s: %d items filled in %s (%.0f/s)",
		s.candidate.Key, s.otherItems, s.fillTook.Round(time.Millisecond), float64(s.otherItems)/s.fillTook.Seconds())
	sizeCounts.Unlock()
	return nil
}

// pgStatements sums pg_stat_statements over the database: calls, rows and shared
// buffers hit or read. Nothing ("" url: not PostgreSQL) is zeros.
func pgStatements(ctx context.Context, url string) ([3]float64, error) {
	var out [3]float64
	if url == "" {
		return out, nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return out, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(rows), 0)::float8,
		coalesce(sum(shared_blks_hit + shared_blks_read), 0)::float8
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&out[0], &out[1], &out[2])
	return out, err
}

// sizeNotes prints, per candidate and request, the large stack's figures over the small
// one's: latency, CPU and the engine's counts, judged against issue 28's bar of 1.5x.
func sizeNotes(cands []engineCandidate) func(res map[string]*Summary) []string {
	return func(res map[string]*Summary) []string {
		small, large := platformSizes[0], platformSizes[len(platformSizes)-1]
		lines := []string{fmt.Sprintf("cost at %d over cost at %d items of another deployment (bar: 1.5x), and per request: MongoDB commands, PostgreSQL statements/rows/buffers", large, small)}
		sizeCounts.Lock()
		defer sizeCounts.Unlock()
		for _, c := range cands {
			for _, op := range sizeOps {
				s, l := res[sizeKey(c, op.key, small)], res[sizeKey(c, op.key, large)]
				if s == nil || l == nil || s.Err != nil || l.Err != nil || s.P50 == 0 || s.CPUPerReq == 0 {
					lines = append(lines, fmt.Sprintf("  %-10s %-16s n/a", c.Key, op.label))
					continue
				}
				p50, cpu := float64(l.P50)/float64(s.P50), l.CPUPerReq/s.CPUPerReq
				cs, cl := sizeCounts.byKey[sizeKey(c, op.key, small)], sizeCounts.byKey[sizeKey(c, op.key, large)]
				engine := "no PostgreSQL counters (SQLite)"
				if cs.postgres {
					engine = fmt.Sprintf("stmts %.1f->%.1f rows %.0f->%.0f buffers %.0f->%.0f", cs.statements, cl.statements, cs.rows, cl.rows, cs.buffers, cl.buffers)
				}
				verdict := "PASS"
				if p50 > 1.5 || cpu > 1.5 {
					verdict = "FAIL"
				}
				lines = append(lines, fmt.Sprintf("  %-10s %-16s p50 %5.2fx cpu %5.2fx [%s]  commands %.1f->%.1f, %s",
					c.Key, op.label, p50, cpu, verdict, cs.commands, cl.commands, engine))
			}
		}
		for _, c := range cands {
			for _, size := range platformSizes {
				if f, ok := sizeCounts.fills[fmt.Sprintf("%s-%d", c.Key, size)]; ok {
					lines = append(lines, "fill: "+f)
				}
			}
		}
		return lines
	}
}

var sizeLegend = []string{
	"legend: each row's stack is bin/devstack with its own data; another deployment (initech's) holds @N items (a fifth",
	"        folders, 10 wide and 4 deep, the rest workbooks), written by devstack.FillWorkspace. The rows work in acme's first",
	"        deployment: GET a folder holding 40 workbooks, list a page of 20 of it, bulk-move a set of 10 (4 folders, 3",
	"        workbooks, 3 reports) between two folders. Workers: GET and list 4, bulk move 1. cpu_us/req is every process of",
	"        the stack, PostgreSQL's included. The counts under the table are per request, over 20 serial requests at",
	"        set-up: they do not depend on the machine's load; timings do (compare ratios within the run).",
}
