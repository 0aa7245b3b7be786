package app_test

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestConcurrentFolderMovesKeepTreeValid runs 200 random folder moves from 4 goroutines
// against two service instances on one database, then checks the stored tree: no cycle,
// no folder deeper than 8 levels, every folder present exactly once.
func TestConcurrentFolderMovesKeepTreeValid(t *testing.T) {
	e := newEnv(t, 2)
	acme := e.acme()
	dep := acme.Deployments[0].ID
	admin := acme.Users["admin"]
	const folders, moves, workers = 24, 200, 4
	ids := make([]int64, folders)
	for i := range ids {
		parent := int64(0)
		if i > 0 && i%3 != 0 {
			parent = ids[i-1] // some initial nesting, so moves meet deep subtrees
		}
		ids[i] = e.mkFolder(t, dep, admin.Bearer, fmt.Sprintf("c-%d", i), parent)
	}
	principal := func() string {
		p := &identity.Principal{Credential: identity.CredentialBearer, Account: identity.Account{ID: acme.ID, Plan: acme.Plan},
			User:       &identity.User{ID: admin.ID, Username: admin.Username, Email: admin.Email, Role: admin.Role},
			Deployment: &identity.Deployment{ID: dep, ProductionBranch: acme.Deployments[0].ProductionBranch}, Audience: "workspace-svc"}
		v, err := e.stack.Signer.Sign(p)
		if err != nil {
			t.Error(err)
		}
		return v
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			c := apitest.New(e.direct[w%2]) // past the gateway: the principal is signed here
			for i := 0; i < moves/workers; i++ {
				item := ids[rng.Intn(folders)]
				var dest any
				if rng.Intn(5) > 0 {
					dest = ids[rng.Intn(folders)]
				}
				req, err := c.Request("POST", depPath(dep, "/workspace/move"), "", map[string]any{"type": "FOLDER", "id": item, "folderId": dest})
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set(identity.Header, principal())
				resp := c.DoRequest(req)
				if resp.Err != nil {
					t.Error(resp.Err)
					return
				}
				mu.Lock()
				statuses[resp.Status]++
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	t.Logf("200 concurrent folder moves on 2 instances: statuses %v", statuses)
	if statuses[200] == 0 || statuses[200]+statuses[400] != moves {
		t.Fatalf("every move must answer 200 or 400 (cycle/depth), got %v", statuses)
	}

	client, err := mongox.Connect(context.Background(), e.mongoURI, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	cur, err := client.Database(e.database).Collection("items").Find(context.Background(), bson.D{{Key: "dep", Value: dep}, {Key: "type", Value: "FOLDER"}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID     int64   `bson:"_id"`
		Parent int64   `bson:"parent"`
		Anc    []int64 `bson:"anc"`
		Depth  int     `bson:"depth"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	parent := map[int64]int64{}
	for _, d := range docs {
		if _, dup := parent[d.ID]; dup {
			t.Fatalf("folder %d stored twice", d.ID)
		}
		parent[d.ID] = d.Parent
	}
	if len(parent) != folders {
		t.Fatalf("%d folders stored, want %d", len(parent), folders)
	}
	stored := map[int64][]int64{}
	depth := map[int64]int{}
	for _, d := range docs {
		stored[d.ID], depth[d.ID] = d.Anc, d.Depth
	}
	for _, id := range ids {
		level := 0
		var chain []int64
		for cur := id; cur != 0; cur = parent[cur] {
			if _, ok := parent[cur]; !ok {
				t.Fatalf("folder %d has a missing ancestor %d", id, cur)
			}
			if cur != id {
				chain = append(chain, cur)
			}
			level++
			if level > 8 {
				t.Fatalf("folder %d is deeper than 8 levels or on a cycle", id)
			}
		}
		// The ancestors and depth each folder keeps (what every read relies on) are
		// exactly those of its parent chain after all the concurrent moves.
		got := append([]int64{}, stored[id]...)
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		sort.Slice(chain, func(i, j int) bool { return chain[i] < chain[j] })
		if depth[id] != level || fmt.Sprint(got) != fmt.Sprint(chain) {
			t.Fatalf("folder %d keeps ancestors %v at depth %d; its parent chain is %v at depth %d", id, got, depth[id], chain, level)
		}
	}
}

// TestBulkMoveRoundTrips counts the database commands of bulk moves of mixed items.
func TestBulkMoveRoundTrips(t *testing.T) {
	// Hundreds of moves of folders: FerretDB outside the race detector, and time for it.
	e := newEnvWithOptions(t, 1, workspace.Limits{}, 10*time.Minute)
	dep := e.dep("acme", 0)
	admin := e.bearer("acme", "admin")
	for _, n := range []int{10, 100} {
		t.Run(fmt.Sprintf("bulk-move-%d-mixed", n), func(t *testing.T) {
			dest := e.mkFolder(t, dep, admin, "dest", 0)
			items := make([]any, 0, n)
			for i := 0; i < n; i++ {
				switch i % 3 {
				case 0:
					items = append(items, ref("FOLDER", e.mkFolder(t, dep, admin, fmt.Sprintf("f%d", i), 0)))
				case 1:
					items = append(items, ref("WORKBOOK", e.mkItem(t, dep, admin, "workbooks", fmt.Sprintf("w%d", i), 0)))
				default:
					items = append(items, ref("REPORT", e.mkItem(t, dep, admin, "reports", fmt.Sprintf("r%d", i), 0)))
				}
			}
			e.counter.Reset()
			r := e.do(t, "POST", depPath(dep, "/workspace/bulk-move"), admin, map[string]any{"items": items, "folderId": dest})
			total := e.counter.Total()
			if r.Status != 200 || len(r.Object(t)["moved"].([]any)) != n {
				t.Fatalf("bulk move: %d %s", r.Status, r.Body)
			}
			t.Logf("bulk move of %d mixed items: %d commands (%.2f per item) %v", n, total, float64(total)/float64(n), e.counter.ByName())
			if limit := int64(2*n + 10); total > limit {
				t.Fatalf("%d commands, want at most 2N+10 = %d", total, limit)
			}
		})
	}
	// The worst case: every item a folder with a subfolder (each move also rewrites the
	// ancestors below it), out of a nested folder into another.
	t.Run("bulk-move-100-folders-with-subfolders", func(t *testing.T) {
		const n = 100
		src := e.mkFolder(t, dep, admin, "src", e.mkFolder(t, dep, admin, "src-parent", 0))
		dest := e.mkFolder(t, dep, admin, "dest", e.mkFolder(t, dep, admin, "dest-parent", 0))
		items := make([]any, 0, n)
		for i := 0; i < n; i++ {
			f := e.mkFolder(t, dep, admin, fmt.Sprintf("f%d", i), src)
			e.mkFolder(t, dep, admin, "child", f)
			items = append(items, ref("FOLDER", f))
		}
		e.counter.Reset()
		r := e.do(t, "POST", depPath(dep, "/workspace/bulk-move"), admin, map[string]any{"items": items, "folderId": dest})
		total := e.counter.Total()
		if r.Status != 200 || len(r.Object(t)["moved"].([]any)) != n {
			t.Fatalf("bulk move: %d %s", r.Status, r.Body)
		}
		t.Logf("bulk move of %d folders with subfolders: %d commands (%.2f per item) %v", n, total, float64(total)/float64(n), e.counter.ByName())
		if limit := int64(2*n + 10); total > limit {
			t.Fatalf("%d commands, want at most 2N+10 = %d", total, limit)
		}
	})
}
