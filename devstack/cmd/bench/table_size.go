package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	mongooptions "go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// The size tables: every request of the workspace, reads and every write
// route, on stacks that differ only in what is stored: the measured deployment holding
// 100 items or 50,000 (filled in bulk by devstack.FillWorkspace), or holding 100 beside
// another deployment of 50,000. A ratio of the same row at two sizes says whether a
// request's cost follows what the deployment holds, what the platform holds, or neither.
// Beside the timings, per request: the MongoDB commands the services sent, and what
// MongoDB would read for them (the wire proxy's planner model, wireproxy's
// ExamineCommand), which FerretDB's timings cannot show. "size" runs the local stack as
// make run does; "engines" (only with -only engines) runs every candidate engine that
// way, the requests that need no write route of their own, every row of every stack
// interleaved round by round.
func init() {
	registerTable(&Table{
		Name:      "size",
		Title:     "the workspace's requests in a deployment of 100 and of 50,000 items, and beside another deployment of 50,000 (bin/devstack as make run starts it)",
		Scenarios: sizeScenarios(engineCandidates[:1], sizeVariants),
		Notes:     sizeNotes(engineCandidates[:1], sizeVariants),
		Legend:    sizeLegend,
	})
	registerTable(&Table{
		Name:      "engines",
		Title:     "the embedded MongoDB's candidates, each with 100 items and beside another deployment of 50,000",
		Scenarios: sizeScenarios(engineCandidates, engineVariants),
		Notes:     sizeNotes(engineCandidates, engineVariants),
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

// sizeVariant is one stack of the comparison: Own items filled into the measured
// deployment (acme's first) before its working set, Other into another (initech's) after.
type sizeVariant struct {
	Key, Label string
	Own, Other int
	// AllOps: every request runs on it; otherwise only the core ones.
	AllOps bool
}

// sizeVariants are the size table's stacks; the first is what the others are divided by.
var sizeVariants = []sizeVariant{
	{Key: "100", Label: "@100", Own: 100, AllOps: true},
	{Key: "own", Label: "@50k own", Own: 50_000, AllOps: true},
	{Key: "other", Label: "@50k other", Own: 100, Other: 50_000},
}

// engineVariants are the engines table's stacks.
var engineVariants = []sizeVariant{sizeVariants[0], sizeVariants[2]}

// sizeOp is one measured request.
type sizeOp struct {
	key, label string
	workers    int
	// core ops also run beside another deployment's 50,000 and in the engines table.
	core bool
	// capped ops send at most sizeRunCap requests a run: each adds an item to the
	// deployment (a create) or consumes one (a delete).
	capped bool
	status int // the success status
}

// sizeOps are the measured requests. Writes run one at a time: a deployment's folder
// creates, moves and deletes meet on its tree version by design.
var sizeOps = []sizeOp{
	{key: "get", label: "folder GET", workers: 4, core: true, status: http.StatusOK},
	{key: "list", label: "list page 1", workers: 4, core: true, status: http.StatusOK},
	{key: "list3", label: "list page 3", workers: 4, core: true, status: http.StatusOK},
	{key: "mkroot", label: "mkfolder root", workers: 1, core: true, capped: true, status: http.StatusOK},
	{key: "mkfolder", label: "mkfolder nested", workers: 1, capped: true, status: http.StatusOK},
	{key: "mkwb", label: "create workbook", workers: 1, core: true, capped: true, status: http.StatusOK},
	{key: "mkrep", label: "create report", workers: 1, capped: true, status: http.StatusOK},
	{key: "renf", label: "rename folder", workers: 1, status: http.StatusOK},
	{key: "renwb", label: "rename workbook", workers: 1, status: http.StatusOK},
	{key: "renrep", label: "rename report", workers: 1, status: http.StatusOK},
	{key: "move", label: "move folder", workers: 1, core: true, status: http.StatusOK},
	{key: "bulk", label: "bulk move 10", workers: 1, core: true, status: http.StatusOK},
	{key: "delwb", label: "delete workbook", workers: 1, capped: true, status: http.StatusNoContent},
	{key: "delrep", label: "delete report", workers: 1, capped: true, status: http.StatusNoContent},
	{key: "delf", label: "delete folder", workers: 1, capped: true, status: http.StatusNoContent},
	{key: "fav", label: "favorite on/off", workers: 1, status: http.StatusNoContent},
	{key: "perm", label: "set permissions", workers: 1, status: http.StatusOK},
	{key: "pub", label: "publish/unpub", workers: 1, status: http.StatusOK},
}

// sizeRunCap bounds the requests of a capped op in one run (warm-up and rounds alike),
// so creates grow the deployment by hundreds over the table, not thousands.
const sizeRunCap = 40

func sizeKey(c engineCandidate, v sizeVariant, op string) string {
	return fmt.Sprintf("%s-%s-%s", c.Key, op, v.Key)
}

func sizeScenarios(cands []engineCandidate, variants []sizeVariant) []Scenario {
	var out []Scenario
	for _, c := range cands {
		for _, op := range sizeOps {
			if len(cands) > 1 && !op.core {
				continue
			}
			for _, v := range variants {
				if !v.AllOps && !op.core {
					continue
				}
				name := fmt.Sprintf("%s %s", op.label, v.Label)
				if len(cands) > 1 {
					name = fmt.Sprintf("%s: %s", c.Key, name)
				}
				out = append(out, Scenario{Key: sizeKey(c, v, op.key), Name: name, Setup: setupSized(c, v, op)})
			}
		}
	}
	return out
}

// sizedStack is one stack of the comparison with its working set in acme's first
// deployment (sizeset.go).
type sizedStack struct {
	p         platformInfo
	candidate engineCandidate
	variant   sizeVariant
	dep       int64
	bearer    string
	set       workingSet
	// client is a connection to the stack's MongoDB (the proxy), for its examination
	// totals and the item count at the end.
	client *mongo.Client
	fills  []string
}

func (e *Env) sizedStack(ctx context.Context, c engineCandidate, v sizeVariant) (*sizedStack, error) {
	key := fmt.Sprintf("sized-%s-%s", c.Key, v.Key) // the platform's key and data dir
	return memo(e, "workingset-"+key, func() (*sizedStack, error) {
		p, err := e.platformWith(ctx, key, c.Env...)
		if err != nil {
			return nil, err
		}
		s := &sizedStack{p: p, candidate: c, variant: v}
		if s.client, err = mongo.Connect(mongooptions.Client().ApplyURI(p.Mongo).SetTimeout(10 * time.Minute)); err != nil {
			return nil, err
		}
		e.beforeStop(func() { _ = s.client.Disconnect(context.Background()) })
		acme := p.Seed.Accounts["acme"]
		s.dep, s.bearer = acme.Deployments[0].ID, acme.Users["admin"].Bearer
		// The measured deployment's own items first, while workspace-svc has stored
		// nothing in it (FillWorkspace fills only a fresh deployment).
		if err := s.fill(ctx, "acme", s.dep, acme.Users["admin"].ID, v.Own); err != nil {
			return nil, err
		}
		// Then the working set, before another deployment's fill: on an engine that scans,
		// creating it after the fill would take minutes.
		if err := s.set.create(ctx, newAPIClient(p.Gateway), s.bearer, s.dep); err != nil {
			return nil, err
		}
		if v.Other > 0 {
			initech := p.Seed.Accounts["initech"]
			if len(initech.Deployments) == 0 {
				return nil, fmt.Errorf("platformctl seed: initech has no deployment to fill")
			}
			if err := s.fill(ctx, "initech", initech.Deployments[0].ID, initech.Users["admin"].ID, v.Other); err != nil {
				return nil, err
			}
		}
		sizeCounts.Lock()
		sizeCounts.stacks = append(sizeCounts.stacks, s)
		sizeCounts.Unlock()
		return s, nil
	})
}

// fill writes items into deployment dep of account, through the stack's MongoDB.
func (s *sizedStack) fill(ctx context.Context, account string, dep, by int64, items int) error {
	logf("%s %s: filling %s's deployment with %d items", s.candidate.Key, s.variant.Label, account, items)
	start := time.Now()
	_, err := devstack.FillWorkspace(ctx, s.client.Database("workspace"), devstack.Fill{Deployment: dep, By: by, Items: items})
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("fill %s's deployment: %w", account, err)
	}
	s.fills = append(s.fills, fmt.Sprintf("%s's %d in %s (%.0f/s)", account, items, took.Round(time.Millisecond), float64(items)/took.Seconds()))
	return nil
}

func setupSized(c engineCandidate, v sizeVariant, op sizeOp) func(ctx context.Context, env *Env) (*Target, error) {
	return func(ctx context.Context, env *Env) (*Target, error) {
		s, err := env.sizedStack(ctx, c, v)
		if err != nil {
			return nil, err
		}
		r := s.set.requests(s.p.Gateway, s.bearer, s.dep, op)
		if err := s.count(ctx, sizeKey(c, v, op.key), r); err != nil {
			return nil, err
		}
		t := &Target{Proc: s.p.All, RSS: s.p.Procs, Workers: op.workers, Check: r.check,
			Targeter: func(tgt *vegeta.Target) error {
				next, ok := r.next(true)
				if !ok {
					return vegeta.ErrNoTargets
				}
				*tgt = next
				return nil
			},
			Prepare: func(ctx context.Context, _ time.Duration) error { return r.prepare(ctx) },
		}
		return t, nil
	}
}

// engineCounts are what one request of a row costs the database, counted around serial
// requests at set-up: commands the services sent (their command monitors); what MongoDB
// would read for them (the proxy's examination: statements judged, documents admitted by
// the chosen indexes' bounds, collection scans, and the statement kind that admitted the
// most); and, on PostgreSQL, rows returned (pg_stat_statements).
type engineCounts struct {
	commands                     float64
	examined                     bool
	statements, documents, scans float64
	heaviest                     string
	rows                         float64
	postgres                     bool
}

var sizeCounts = struct {
	sync.Mutex
	byKey  map[string]engineCounts
	stacks []*sizedStack
}{byKey: map[string]engineCounts{}}

// countedRequests is how many serial requests a row's counts are taken over.
const countedRequests = 20

func (s *sizedStack) count(ctx context.Context, key string, r *sizeRequests) error {
	c := newAPIClient(s.p.Gateway)
	defer c.http.CloseIdleConnections()
	if err := r.fillPool(ctx, countedRequests); err != nil {
		return err
	}
	ex0, exErr := s.examined(ctx, true)
	// Examination delays every command: it is off again however the count ends.
	examining := true
	defer func() {
		if examining {
			_, _ = s.examined(context.WithoutCancel(ctx), false)
		}
	}()
	cmd0, _, err := platformMongoCounts(ctx, s.p)
	if err != nil {
		return err
	}
	pg0, err := pgStatements(ctx, s.p.Postgres)
	if err != nil {
		return err
	}
	for range countedRequests {
		tgt, ok := r.next(false)
		if !ok {
			return fmt.Errorf("%s: no target left to count", key)
		}
		var body any
		if tgt.Body != nil {
			body = rawJSON(tgt.Body)
		}
		path := strings.TrimPrefix(tgt.URL, s.p.Gateway)
		if err := c.do(ctx, tgt.Method, path, tgt.Header.Get("Authorization"), body, r.op.status, nil); err != nil {
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
	ex1, exErr1 := s.examined(ctx, false)
	examining = exErr1 != nil
	ec := engineCounts{commands: (cmd1 - cmd0) / countedRequests, postgres: s.p.Postgres != ""}
	if ec.postgres {
		ec.rows = (pg1[1] - pg0[1]) / countedRequests
	}
	if exErr == nil && exErr1 == nil {
		ec.examined = true
		var most int64
		for k, a := range ex1 {
			b := ex0[k]
			ec.statements += float64(a.Statements-b.Statements) / countedRequests
			ec.documents += float64(a.Documents-b.Documents) / countedRequests
			ec.scans += float64(a.Scans-b.Scans) / countedRequests
			if d := a.Documents - b.Documents; d > most {
				most, ec.heaviest = d, fmt.Sprintf("%s %.0f", k, float64(d)/countedRequests)
				if a.Scans > b.Scans {
					ec.heaviest += " (scan)"
				}
			}
		}
	} else {
		logf("%s: no examination: %v", key, errors.Join(exErr, exErr1))
	}
	sizeCounts.Lock()
	sizeCounts.byKey[key] = ec
	sizeCounts.Unlock()
	return nil
}

// examinedTotals are one "command db.collection" key of the proxy's ExamineCommand reply.
type examinedTotals struct {
	Statements int64 `bson:"statements"`
	Documents  int64 `bson:"documents"`
	Scans      int64 `bson:"scans"`
}

// examined reads the stack's proxy's examination totals and has it examine the commands
// that follow (record) or not: on only around the serial requests, since examining a
// command delays it.
func (s *sizedStack) examined(ctx context.Context, record bool) (map[string]examinedTotals, error) {
	var out struct {
		Commands map[string]examinedTotals `bson:"commands"`
	}
	err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: wireproxy.ExamineCommand, Value: 1}, {Key: "record", Value: record}}).Decode(&out)
	return out.Commands, err
}

// itemsStored is what the measured deployment holds (deleted items included: a delete
// marks them).
func (s *sizedStack) itemsStored(ctx context.Context) (int64, error) {
	return s.client.Database("workspace").Collection("items").CountDocuments(ctx, bson.D{{Key: "dep", Value: s.dep}})
}
