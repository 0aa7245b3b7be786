package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// readCost is what one request cost workspace-svc in MongoDB: commands sent and
// documents the server returned.
type readCost struct{ commands, documents int64 }

func (e *env) measure(t *testing.T, want int, method, path string, body any) readCost {
	t.Helper()
	e.counter.Reset()
	r := e.do(t, method, path, e.bearer("acme", "admin"), body)
	c := readCost{e.counter.Total(), e.counter.Documents()}
	if r.Status != want {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	if method == "POST" && path[len(path)-9:] == "bulk-move" {
		if failed := r.Object(t)["failed"].([]any); len(failed) > 0 {
			t.Fatalf("bulk move failed items: %v", failed)
		}
	}
	return c
}

// measureWrite is measure for a write that allocates an id, made twice (body names the
// second "… again"): the lower cost of the two, since one in IDBlock allocations also
// reserves a new block of ids (one more command), whatever the deployment holds.
func (e *env) measureWrite(t *testing.T, path string, body map[string]any) readCost {
	t.Helper()
	first := e.measure(t, 200, "POST", path, body)
	again := map[string]any{}
	for k, v := range body {
		again[k] = v
	}
	again["name"] = fmt.Sprint(body["name"], " again")
	second := e.measure(t, 200, "POST", path, again)
	if second.commands < first.commands {
		return second
	}
	return first
}

// fillFolders inserts folders straight into the items collection until the deployment
// holds total folders: chains of eight levels under the root, written the way the
// service writes them (ancestors and depth included), ids far above the allocator's.
func (e *env) fillFolders(t *testing.T, dep int64, total int) {
	t.Helper()
	ctx := context.Background()
	client, err := mongox.Connect(ctx, e.mongoURI, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(ctx) }()
	items := client.Database(e.database).Collection("items")
	have, err := items.CountDocuments(ctx, bson.D{{Key: "dep", Value: dep}, {Key: "type", Value: "FOLDER"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var docs []any
	next := int64(1_000_000_000_000) + dep*10_000_000
	var anc []int64
	for n := have; n < int64(total); n++ {
		if n%8 == 0 {
			anc = []int64{}
		}
		id := next + n
		parent := int64(0)
		if len(anc) > 0 {
			parent = anc[len(anc)-1]
		}
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "dep", Value: dep}, {Key: "type", Value: "FOLDER"},
			{Key: "name", Value: fmt.Sprintf("filler %d", n)}, {Key: "position", Value: float64(n)}, {Key: "parent", Value: parent},
			{Key: "createdBy", Value: int64(1)}, {Key: "updatedBy", Value: int64(1)}, {Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now},
			{Key: "treeV", Value: int64(0)}, {Key: "anc", Value: append([]int64{}, anc...)}, {Key: "depth", Value: len(anc) + 1}})
		anc = append(anc, id)
	}
	for len(docs) > 0 {
		k := min(1000, len(docs))
		if _, err := items.InsertMany(ctx, docs[:k]); err != nil {
			t.Fatal(err)
		}
		docs = docs[k:]
	}
	if n, _ := items.CountDocuments(ctx, bson.D{{Key: "dep", Value: dep}, {Key: "type", Value: "FOLDER"}}); n != int64(total) {
		t.Fatalf("deployment holds %d folders, want %d", n, total)
	}
}

// TestReadsFollowTheRequest measures what each request reads at 100 and at 10,000
// folders (chains of eight levels): the figures must not grow with the deployment and
// must stay within the bounds below. The region the requests touch is the same in
// both deployments: a chain of eight folders, the seventh holding 30 workbooks and three
// folders, a folder with a subtree of three folders, and a destination. Creates are
// measured too: neither counts the deployment's items nor reads a folder's siblings.
func TestReadsFollowTheRequest(t *testing.T) {
	e := newEnvWithOptions(t, 1, workspace.Limits{}, 10*time.Minute)
	admin := e.bearer("acme", "admin")
	type figures struct{ get, list, move, bulk, createRoot, createNested, createWorkbook readCost }
	const bulkItems = 23 // 20 workbooks, 3 folders
	run := func(t *testing.T, dep int64, folders int) figures {
		chain := make([]int64, 9)
		for i := 1; i <= 8; i++ {
			chain[i] = e.mkFolder(t, dep, admin, fmt.Sprintf("level %d", i), chain[i-1])
		}
		src := chain[7]
		var items []any
		for i := 0; i < 30; i++ {
			wb := e.mkItem(t, dep, admin, "workbooks", fmt.Sprintf("wb %02d", i), src)
			if i < 20 {
				items = append(items, ref("WORKBOOK", wb))
			}
		}
		for i := 0; i < 3; i++ {
			items = append(items, ref("FOLDER", e.mkFolder(t, dep, admin, fmt.Sprintf("sub %d", i), src)))
		}
		moved := e.mkFolder(t, dep, admin, "moved", chain[3])
		m1 := e.mkFolder(t, dep, admin, "m1", moved)
		e.mkFolder(t, dep, admin, "m2", moved)
		e.mkFolder(t, dep, admin, "m11", m1)
		dest := e.mkFolder(t, dep, admin, "dest", chain[3])
		e.fillFolders(t, dep, folders)

		var f figures
		f.get = e.measure(t, 200, "GET", depPath(dep, fmt.Sprintf("/folders/%d", chain[8])), nil)
		f.list = e.measure(t, 200, "GET", depPath(dep, fmt.Sprintf("/workspace?folderId=%d&first=20", src)), nil)
		f.move = e.measure(t, 200, "POST", depPath(dep, "/workspace/move"), map[string]any{"type": "FOLDER", "id": moved, "folderId": dest})
		f.bulk = e.measure(t, 200, "POST", depPath(dep, "/workspace/bulk-move"), map[string]any{"items": items, "folderId": dest})
		f.createRoot = e.measureWrite(t, depPath(dep, "/folders"), map[string]any{"name": "new at the root"})
		f.createNested = e.measureWrite(t, depPath(dep, "/folders"), map[string]any{"name": "new at level 8", "parentId": chain[7]})
		f.createWorkbook = e.measureWrite(t, depPath(dep, "/workbooks"), map[string]any{"name": "new workbook"})
		// The moves landed where they should, with the ancestors the reads rely on.
		got := e.do(t, "GET", depPath(dep, fmt.Sprintf("/folders/%d", m1)), admin, nil).Object(t)
		if path := got["folderPath"].([]any); len(path) != 5 || path[3].(map[string]any)["id"] != float64(dest) {
			t.Fatalf("folder m1 after the move: folderPath %v, want level 1..3, dest, moved", path)
		}
		return f
	}
	small := run(t, e.dep("acme", 0), 100)
	large := run(t, e.dep("acme", 1), 10_000)
	const subtree = 3
	for _, c := range []struct {
		name         string
		small, large readCost
		maxDocs      int64
		maxCommands  int64
	}{
		{"folder GET (level 8)", small.get, large.get, 20, 4}, // the folder, its ancestors, its creator, favorites
		{"listing page of 20", small.list, large.list, 60, 0},
		{"single move of a folder with 3 below it", small.move, large.move, 60 + subtree, 0},
		{"bulk move of 23 items", small.bulk, large.bulk, 6*bulkItems + 60, 2*bulkItems + 10},
		// The slot counter, the tree version, its compare-and-set, the insert, the creator.
		{"folder create at the root", small.createRoot, large.createRoot, 3, 5},
		// And the parent with its ancestors (two queries), its lease and its release.
		{"folder create at level 8", small.createNested, large.createNested, 12, 9},
		// The slot counter, the insert, the creator.
		{"workbook create at the root", small.createWorkbook, large.createWorkbook, 3, 3},
	} {
		t.Logf("%-42s 100 folders: %2d commands %3d documents | 10,000 folders: %2d commands %3d documents (bound %d documents)",
			c.name, c.small.commands, c.small.documents, c.large.commands, c.large.documents, c.maxDocs)
		for _, got := range []readCost{c.small, c.large} {
			if got.documents > c.maxDocs {
				t.Errorf("%s: %d documents read, bound %d", c.name, got.documents, c.maxDocs)
			}
			if c.maxCommands > 0 && got.commands > c.maxCommands {
				t.Errorf("%s: %d commands, bound %d", c.name, got.commands, c.maxCommands)
			}
		}
		if c.large.documents != c.small.documents || c.large.commands != c.small.commands {
			t.Errorf("%s: cost grew with the deployment: %+v at 100 folders, %+v at 10,000", c.name, c.small, c.large)
		}
	}
}
