package app_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/wireproxy"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/workspace-svc/internal/app"
)

// Linearizability of the workspace tree under MongoDB's interleavings. Two service
// instances share one database on FerretDB behind the proxy in Interleave mode, which
// runs each multi-document update of a folder move (ApplyTreeOp's statements) one
// document at a time with other clients' commands in between, as MongoDB does. Several
// clients create folders, move folders and workbooks alone and in bulk, and read where
// items are, at random; the history of what each call was asked and answered, with its
// start and end, is checked with porcupine against the contract's sequential model of the
// tree (treemodel_test.go). A history no order of the calls explains fails the test, and
// porcupine's visualization of it is written to $TEST_ARTIFACTS (or a temp dir) for reading.

const (
	linSeeds        = 3  // histories per run
	linClients      = 4  // concurrent clients, two per instance
	linOpsPerClient = 15 // calls per client per history
	linCheckTimeout = 30 * time.Second
	linDeployment   = 41
)

// linStack is the service instances of one history, each with a fresh deployment.
type linStack struct {
	urls     []string
	signer   *identity.Signer
	mongo    *devstack.Mongo
	database string
}

func startLinStack(t *testing.T) *linStack {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	signer, err := identity.NewSigner(base64.StdEncoding.EncodeToString(key))
	if err != nil {
		t.Fatal(err)
	}
	s := &linStack{signer: signer, mongo: devstack.MongoForTestSerializing(t, wireproxy.Interleave), database: devstack.UniqueName(t, "ws")}
	ctx := context.Background()
	for range 2 {
		client, err := mongox.Connect(ctx, s.mongo.URI, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
		a, err := app.New(ctx, app.Deps{Mongo: client, Database: s.database, Signer: signer,
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: obs.NewRegistry(), Audit: &audit.Memory{Service: app.ServiceName}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.Handler)
		t.Cleanup(srv.Close)
		s.urls = append(s.urls, srv.URL)
	}
	return s
}

// linClient calls one instance as the deployment's admin, past the gateway.
type linClient struct {
	api    *apitest.Client
	signer *identity.Signer
	dep    int64
}

func (c *linClient) call(method, path string, body any) apitest.Response {
	req, err := c.api.Request(method, fmt.Sprintf("/api/v1/deployments/%d%s", c.dep, path), "", body)
	if err != nil {
		return apitest.Response{Err: err}
	}
	v, err := c.signer.Sign(&identity.Principal{Credential: identity.CredentialBearer, Account: identity.Account{ID: 7, Plan: "enterprise"},
		User:       &identity.User{ID: 70, Username: "lin-admin", Email: "lin-admin@example.com", Role: identity.RoleAdmin},
		Deployment: &identity.Deployment{ID: c.dep, ProductionBranch: "main"}, Audience: app.ServiceName})
	if err != nil {
		return apitest.Response{Err: err}
	}
	req.Header.Set(identity.Header, v)
	return c.api.DoRequest(req)
}

// placed is the place an answer gives an item: its folder and that folder's path.
type placed struct {
	ID         int64  `json:"id"`
	Type       string `json:"type"`
	ParentID   *int64 `json:"parentId"`
	FolderID   *int64 `json:"folderId"`
	FolderPath []struct {
		ID int64 `json:"id"`
	} `json:"folderPath"`
}

func (p placed) parent() int64 {
	switch {
	case p.ParentID != nil:
		return *p.ParentID
	case p.FolderID != nil:
		return *p.FolderID
	}
	return 0
}

func (p placed) path() []int64 {
	out := []int64{}
	for _, e := range p.FolderPath {
		out = append(out, e.ID)
	}
	return out
}

type apiError struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
}

// outcome is the treeOutput of an answer: definite for a 2xx or 4xx, else unknown.
func outcome(r apitest.Response) treeOutput {
	if r.Err != nil {
		return treeOutput{}
	}
	if r.Status >= 500 {
		return treeOutput{Answered: true, Status: r.Status}
	}
	out := treeOutput{Known: true, Status: r.Status}
	if r.Status >= 400 {
		var e apiError
		_ = json.Unmarshal(r.Body, &e)
		out.Code = e.Code
		return out
	}
	var p placed
	_ = json.Unmarshal(r.Body, &p)
	out.ID, out.Parent, out.Path = p.ID, p.parent(), p.path()
	return out
}

// TestWorkspaceTreeIsLinearizableUnderInterleaving records linSeeds histories of
// linClients clients × linOpsPerClient calls, each on a fresh deployment, and checks
// each for linearizability within linCheckTimeout (a check that does not end is logged,
// not failed: porcupine found no violation in that time).
func TestWorkspaceTreeIsLinearizableUnderInterleaving(t *testing.T) {
	stack := startLinStack(t)
	start := time.Now()
	for seed := range linSeeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			checkLinearizable(t, stack, uint64(seed))
		})
	}
	t.Logf("%d histories of %d clients × %d calls in %s", linSeeds, linClients, linOpsPerClient, time.Since(start).Round(time.Millisecond))
}

// checkLinearizable records one history on a fresh deployment and checks it.
func checkLinearizable(t *testing.T, stack *linStack, seed uint64) {
	dep := int64(linDeployment + seed)
	setup := &linClient{api: apitest.New(stack.urls[0]), signer: stack.signer, dep: dep}
	initial := treeState{}
	workbooks := map[int64]bool{}
	var folders []int64
	mk := func(kind, name string, parent int64, body map[string]any) int64 {
		if parent != 0 {
			body[map[string]string{"folders": "parentId", "workbooks": "folderId"}[kind]] = parent
		}
		body["name"] = name
		r := setup.call("POST", "/"+kind, body)
		if r.Err != nil || r.Status != 200 {
			t.Fatalf("create %s %q: %d %s %v", kind, name, r.Status, r.Body, r.Err)
		}
		var p placed
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		initial[p.ID] = parent
		return p.ID
	}
	// Two chains, 5 and 4 deep, and a folder at the root: moves meet cycles and the depth
	// limit.
	for i := range 10 {
		parent := int64(0)
		if i != 0 && i != 5 && i != 9 {
			parent = folders[i-1]
		}
		folders = append(folders, mk("folders", fmt.Sprintf("f%d", i), parent, map[string]any{}))
	}
	var wbs []int64
	for i := range 3 {
		id := mk("workbooks", fmt.Sprintf("w%d", i), folders[i*4], map[string]any{})
		workbooks[id] = true
		wbs = append(wbs, id)
	}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		pending []pendingCreate // creates without a definite answer, resolved at the end
		wg      sync.WaitGroup
	)
	t0 := time.Now()
	now := func() int64 { return time.Since(t0).Nanoseconds() }
	record := func(in treeInput, call int64, out treeOutput) {
		ret := now()
		if !out.Known && !out.Answered {
			ret = math.MaxInt64 // may take effect at any point after its start
		}
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: in.Client, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
	}
	for cl := range linClients {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(seed, uint64(cl)))
			c := &linClient{api: apitest.New(stack.urls[cl%2]), signer: stack.signer, dep: dep}
			mine := append([]int64(nil), folders...)
			pick := func() int64 { return mine[rng.IntN(len(mine))] }
			dest := func() int64 {
				if rng.IntN(6) == 0 {
					return 0
				}
				return pick()
			}
			for i := range linOpsPerClient {
				call := now()
				switch x := rng.IntN(100); {
				case x < 12: // create a folder
					parent := dest()
					name := fmt.Sprintf("s%d-c%d-%d", seed, cl, i)
					body := map[string]any{"name": name}
					if parent != 0 {
						body["parentId"] = parent
					}
					out := outcome(c.call("POST", "/folders", body))
					in := treeInput{Kind: "create", Item: parent, Client: cl}
					if !out.Known {
						ret := int64(math.MaxInt64)
						if out.Answered {
							ret = now()
						}
						mu.Lock()
						pending = append(pending, pendingCreate{in: in, call: call, ret: ret, name: name})
						mu.Unlock()
						continue
					}
					out.CheckPth = true
					record(in, call, out)
					if out.Status == 200 {
						mine = append(mine, out.ID)
					}
				case x < 45: // move a folder
					in := treeInput{Kind: "move", Item: pick(), Dest: dest(), Client: cl}
					out := outcome(c.call("POST", "/workspace/move", map[string]any{"type": "FOLDER", "id": in.Item, "folderId": nullable(in.Dest)}))
					out.CheckPth = true
					record(in, call, out)
				case x < 55: // move a workbook
					in := treeInput{Kind: "move", Item: wbs[rng.IntN(len(wbs))], Dest: dest(), Workbook: true, Client: cl}
					out := outcome(c.call("POST", "/workspace/move", map[string]any{"type": "WORKBOOK", "id": in.Item, "folderId": nullable(in.Dest)}))
					out.CheckPth = true
					record(in, call, out)
				case x < 70: // bulk move
					to := dest()
					var items []map[string]any
					var ins []treeInput
					seen := map[int64]bool{}
					for range 2 + rng.IntN(2) {
						in := treeInput{Kind: "move", Item: pick(), Dest: to, Bulk: true, Client: cl}
						if rng.IntN(3) == 0 {
							in.Item, in.Workbook = wbs[rng.IntN(len(wbs))], true
						}
						if seen[in.Item] {
							continue
						}
						seen[in.Item] = true
						typ := "FOLDER"
						if in.Workbook {
							typ = "WORKBOOK"
						}
						items = append(items, map[string]any{"type": typ, "id": in.Item})
						ins = append(ins, in)
					}
					r := c.call("POST", "/workspace/bulk-move", map[string]any{"folderId": nullable(to), "items": items})
					for _, in := range ins {
						record(in, call, bulkOutcome(r, in.Item))
					}
				default: // read where an item is
					in := treeInput{Kind: "read", Client: cl}
					path := ""
					if rng.IntN(4) == 0 {
						in.Item, in.Workbook = wbs[rng.IntN(len(wbs))], true
						path = fmt.Sprintf("/workbooks/%d", in.Item)
					} else {
						in.Item = pick()
						path = fmt.Sprintf("/folders/%d", in.Item)
					}
					out := outcome(c.call("GET", path, nil))
					if !out.Known {
						continue // a read that failed shows nothing
					}
					out.CheckPth = true
					record(in, call, out)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(t0)

	// The stored tree, and the creates without an answer that were stored.
	call := now()
	stored := storedTree(t, stack, dep)
	for _, pc := range pending {
		out := treeOutput{Answered: pc.ret != math.MaxInt64}
		for id, name := range stored.names {
			if name == pc.name {
				out.ID = id
			}
		}
		history = append(history, porcupine.Operation{ClientId: pc.in.Client, Input: pc.in, Call: pc.call, Output: out, Return: pc.ret})
	}
	history = append(history, porcupine.Operation{ClientId: linClients, Input: treeInput{Kind: "final", Client: linClients},
		Call: call, Output: treeOutput{Known: true, Final: stored.parents}, Return: now()})

	statuses := map[string]int{}
	for _, op := range history {
		out := op.Output.(treeOutput)
		key := op.Input.(treeInput).Kind + " "
		if out.Known {
			key += fmt.Sprint(out.Status, " ", out.Code)
		} else {
			key += "unknown"
		}
		statuses[key]++
	}
	checkStart := time.Now()
	model := treeModel(workbooks, initial)
	res, info := porcupine.CheckOperationsVerbose(model, history, linCheckTimeout)
	t.Logf("seed %d: %d operations in %s, checked in %s: %s; %v", seed, len(history), took.Round(time.Millisecond), time.Since(checkStart).Round(time.Millisecond), res, statuses)
	switch res {
	case porcupine.Illegal:
		dir := os.Getenv("TEST_ARTIFACTS")
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "workspace-linearizability-"); err != nil {
				t.Fatal(err)
			}
		}
		file := filepath.Join(dir, fmt.Sprintf("workspace-tree-seed%d.html", seed))
		if err := porcupine.VisualizePath(model, info, file); err != nil {
			t.Errorf("write the visualization: %v", err)
		}
		if err := os.WriteFile(strings.TrimSuffix(file, ".html")+".txt", []byte(describeHistory(model, history)), 0o644); err != nil {
			t.Errorf("write the history: %v", err)
		}
		explainIllegal(t, model, info, history)
		t.Fatalf("seed %d: no order of the %d calls explains their answers (stored tree %s); the history: %s", seed, len(history), describeTree(stored.parents), file)
	case porcupine.Unknown:
		t.Logf("seed %d: the check did not end within %s", seed, linCheckTimeout)
	}
}

type pendingCreate struct {
	in        treeInput
	call, ret int64
	name      string
}

func nullable(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// bulkOutcome is the answer of a bulk move for item: its moved entry or its failed one.
func bulkOutcome(r apitest.Response, item int64) treeOutput {
	if r.Err != nil || r.Status != 200 {
		out := outcome(r)
		return out
	}
	var body struct {
		Moved  []placed `json:"moved"`
		Failed []struct {
			ID    int64    `json:"id"`
			Error apiError `json:"error"`
		} `json:"failed"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return treeOutput{Known: true, Status: 200, Code: "unreadable answer"}
	}
	for _, m := range body.Moved {
		if m.ID == item {
			return treeOutput{Known: true, Status: 200, Parent: m.parent(), Path: m.path(), CheckPth: true}
		}
	}
	for _, f := range body.Failed {
		if f.ID == item {
			if f.Error.Status >= 500 {
				return treeOutput{Answered: true, Status: f.Error.Status}
			}
			return treeOutput{Known: true, Status: f.Error.Status, Code: f.Error.Code}
		}
	}
	return treeOutput{Known: true, Status: 200, Code: "item missing from the answer"}
}

type stored struct {
	parents map[int64]int64
	names   map[int64]string
}

// storedTree reads the deployment's items from the database.
func storedTree(t *testing.T, stack *linStack, dep int64) stored {
	t.Helper()
	ctx := context.Background()
	client, err := mongox.Connect(ctx, stack.mongo.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(ctx) }()
	cur, err := client.Database(stack.database).Collection("items").Find(ctx, bson.D{{Key: "dep", Value: dep}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID     int64  `bson:"_id"`
		Parent int64  `bson:"parent"`
		Name   string `bson:"name"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	s := stored{parents: map[int64]int64{}, names: map[int64]string{}}
	for _, d := range docs {
		s.parents[d.ID], s.names[d.ID] = d.Parent, d.Name
	}
	return s
}

// explainIllegal logs the longest order porcupine found that explains a prefix of the
// history, the state it reaches, and the calls of which one had to come next.
func explainIllegal(t *testing.T, model porcupine.Model, info porcupine.LinearizationInfo, history []porcupine.Operation) {
	t.Helper()
	var longest []porcupine.Operation
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, l := range partition {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	state := model.Init()
	for _, op := range longest {
		_, state = model.Step(state, op.Input, op.Output)
	}
	from := max(0, len(longest)-8)
	for i, op := range longest[from:] {
		t.Logf("explained %d: %s", from+i, model.DescribeOperation(op.Input, op.Output))
	}
	t.Logf("state then: %s", model.DescribeState(state))
	done := map[int64]bool{}
	for _, op := range longest {
		done[op.Call*1000+int64(op.ClientId)] = true
	}
	next := int64(math.MaxInt64)
	for _, op := range history {
		if !done[op.Call*1000+int64(op.ClientId)] {
			next = min(next, op.Return)
		}
	}
	for _, op := range history {
		if !done[op.Call*1000+int64(op.ClientId)] && op.Call <= next {
			ok, _ := model.Step(state, op.Input, op.Output)
			t.Logf("could come next: %s (possible there: %v)", model.DescribeOperation(op.Input, op.Output), ok)
		}
	}
}

// describeHistory is the history, a call a line in the order they started, with their
// start and end in milliseconds.
func describeHistory(model porcupine.Model, history []porcupine.Operation) string {
	ops := slices.Clone(history)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	var b strings.Builder
	for _, op := range ops {
		end := "open"
		if op.Return != math.MaxInt64 {
			end = fmt.Sprintf("%.1f", float64(op.Return)/1e6)
		}
		fmt.Fprintf(&b, "%9.1f %9s  %s\n", float64(op.Call)/1e6, end, model.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}
