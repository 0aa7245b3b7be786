package attack_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// itemCap is the size limit of each of an item's meta, calculated fields and draft in this
// suite's stack: small, so a hundred items of the maximum size are cheap to make, and the
// same code as at the defaults.
const itemCap = 8 << 10

// listScan is the listing's scan limit in this suite's stack, for the same reason.
const listScan = 300

// itemBytes is about what one item of the maximum size holds here: meta, calculated
// fields, draft, and the published dashboard (the draft, whose title it repeats).
const itemBytes = 5 * itemCap

// itemsMetric sums the series of one of the MongoDB client metrics workspace-svc exports
// (mongodb_client_* on its internal listener) that concern its items collection, and,
// when commands are named, those commands only.
func itemsMetric(t *testing.T, s *stacktest.Stack, name string, commands ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.Process("workspace-svc-1").InternalAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	sum := 0.0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `collection="items"`) {
			continue
		}
		if len(commands) > 0 && !slices.ContainsFunc(commands, func(c string) bool { return strings.Contains(line, `command="`+c+`"`) }) {
			continue
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		sum += v
	}
	return sum
}

// storeReads is what workspace-svc has read from its items collection so far: the
// documents the server returned and the bytes of its replies.
func storeReads(t *testing.T, s *stacktest.Stack) (docs, bytes float64) {
	t.Helper()
	return itemsMetric(t, s, "mongodb_client_documents_returned_total"), itemsMetric(t, s, "mongodb_client_reply_bytes_total")
}

// itemFinds is how many find and getMore commands workspace-svc has sent to its items
// collection so far.
func itemFinds(t *testing.T, s *stacktest.Stack) float64 {
	t.Helper()
	return itemsMetric(t, s, "mongodb_client_commands_total", "find", "getMore")
}

// patiently is call for making a test's data, which is not the attack: a request the
// loaded test store could not serve in time (503, 504) is sent again, a few times.
func (a *api) patiently(method, path, authz string, body any) reply {
	r := a.call(method, path, authz, body)
	for try := 0; try < 3 && (r.status == http.StatusServiceUnavailable || r.status == http.StatusGatewayTimeout); try++ {
		r = a.call(method, path, authz, body)
	}
	return r
}

// inParallel runs do(i) for i in [0, n) on a few goroutines, failing on the first error.
func inParallel(t *testing.T, n int, do func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// Workspace requests that one tenant (or one low-role user) could use to take what all
// tenants share: memory and database reads of the shared workspace-svc, the audit trail;
// and what a low-role user must not learn. Against the real stack, through the gateway.
func TestWorkspaceSharesStayBounded(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: []string{
		fmt.Sprint("WORKSPACE_MAX_META_BYTES=", itemCap), fmt.Sprint("WORKSPACE_MAX_CALCULATED_FIELDS_BYTES=", itemCap),
		fmt.Sprint("WORKSPACE_MAX_DRAFT_BYTES=", itemCap), fmt.Sprint("WORKSPACE_MAX_LIST_SCAN=", listScan),
		fmt.Sprint("WORKSPACE_MAX_BULK_MOVE_BYTES=", 7*itemBytes/2),
	}})
	a := newAPI(s)
	// Making the data is not the attack: its requests may take longer on a loaded machine.
	setup := newAPI(s)
	setup.c.HTTP.Timeout = 2 * time.Minute
	acme := s.Seed.Accounts["acme"]
	users := acme.Users
	admin, ai := apitest.Bearer(users["admin"].Bearer), apitest.Bearer(users["aiBiUser"].Bearer)
	dev, viewer := apitest.Bearer(users["developer"].Bearer), apitest.Bearer(users["viewer"].Bearer)
	ws := func(dep int64, rest string) string { return fmt.Sprintf("/api/v1/deployments/%d%s", dep, rest) }
	dep := acme.Deployments[0].ID

	// A viewer's root listing over thousands of folders private to someone else examines
	// at most WORKSPACE_MAX_LIST_SCAN of them per page, in a bounded number of finds, and
	// answers with a cursor that goes on until it has listed exactly what the viewer can
	// view. It runs first, while the items collection is small: the test store reads a
	// whole collection per command, so what this asserts is the number of finds, and the
	// pages are read with the patient client.
	t.Run("TestRootListingOverThousandsOfPrivateFoldersIsBounded", func(t *testing.T) {
		dep := acme.Deployments[1].ID
		const private = 1500
		insertPrivateFolders(t, s, dep, users["aiBiUser"].ID, private)
		pos := float64(private / 2)
		granted := setup.call("POST", ws(dep, "/folders"), admin, map[string]any{"name": "for the viewer", "position": pos})
		root := setup.call("POST", ws(dep, "/workbooks"), admin, map[string]any{"name": "at the root"})
		grant := setup.call("PUT", ws(dep, fmt.Sprintf("/folders/%v/permissions", granted.body["id"])), admin,
			map[string]any{"grants": []any{map[string]any{"userId": users["viewer"].ID, "level": "view"}}})
		if granted.status != 200 || root.status != 200 || grant.status != 200 {
			t.Fatalf("setup: %s %s %s", granted, root, grant)
		}
		var got []any
		after, pages := "", 0
		for pages < 10 {
			pages++
			before := itemFinds(t, s)
			r := setup.call("GET", ws(dep, "/workspace?first=10"+after), viewer, nil)
			finds := itemFinds(t, s) - before
			if r.status != 200 {
				t.Fatalf("page %d: %s", pages, r)
			}
			t.Logf("page %d: %.0f finds on items, %d items", pages, finds, len(r.body["items"].([]any)))
			if bound := float64(2 + listScan/100 + 2); finds > bound {
				t.Fatalf("page %d cost %.0f finds on items, want at most %.0f (%d children in batches of at least 100)", pages, finds, bound, listScan)
			}
			for _, it := range r.body["items"].([]any) {
				got = append(got, it.(map[string]any)["id"])
			}
			pi := r.body["pageInfo"].(map[string]any)
			if pi["hasNextPage"] != true {
				break
			}
			c, _ := pi["endCursor"].(string)
			raw, _ := base64.RawURLEncoding.DecodeString(c)
			if strings.Contains(string(raw), "private") {
				t.Fatalf("page %d's cursor names a folder the viewer cannot view: %s", pages, raw)
			}
			after = "&after=" + c
		}
		want := []any{granted.body["id"], root.body["id"]}
		if fmt.Sprint(got) != fmt.Sprint(want) || pages < private/listScan {
			t.Fatalf("%d pages listed %v, want %v (the granted folder, then the root workbook) over several pages", pages, got, want)
		}
	})

	// Search text that is not text (invalid UTF-8, NUL, control characters) is the
	// client's error, not the database's: 400 with a stable code, for any viewer.
	t.Run("TestSearchTextThatIsNotTextIs400", func(t *testing.T) {
		for _, q := range []string{"%ff%fe", "%00", "a%0Ab", "x%C3"} {
			r := a.call("GET", ws(dep, "/workspace?q="+q), viewer, nil)
			if r.status != 400 || r.body["code"] != "invalid_request" || !strings.Contains(r.message(), "UTF-8") {
				t.Fatalf("q=%s: want 400 invalid_request naming UTF-8, got %s", q, r)
			}
		}
		if r := a.call("GET", ws(dep, "/workspace?q=%C3%A9t%C3%A9"), viewer, nil); r.status != 200 {
			t.Fatalf("q=été: %s", r)
		}
	})

	// A viewer granted a subfolder of a private folder never sees the private folder's
	// name or id: its paths start at the granted folder.
	t.Run("TestFolderPathLeavesOutFoldersTheCallerCannotView", func(t *testing.T) {
		top := setup.call("POST", ws(dep, "/folders"), admin, map[string]any{"name": "board-only secret"})
		sub := setup.call("POST", ws(dep, "/folders"), admin, map[string]any{"name": "shared", "parentId": top.body["id"]})
		inner := setup.call("POST", ws(dep, "/folders"), admin, map[string]any{"name": "inner", "parentId": sub.body["id"]})
		wb := setup.call("POST", ws(dep, "/workbooks"), admin, map[string]any{"name": "report card", "folderId": inner.body["id"]})
		grant := setup.call("PUT", ws(dep, fmt.Sprintf("/folders/%v/permissions", sub.body["id"])), admin,
			map[string]any{"grants": []any{map[string]any{"userId": users["viewer"].ID, "level": "view"}}})
		if top.status != 200 || sub.status != 200 || inner.status != 200 || wb.status != 200 || grant.status != 200 {
			t.Fatalf("setup: %s %s %s %s %s", top, sub, inner, wb, grant)
		}
		secretID := fmt.Sprint(top.body["id"])
		for _, c := range []struct {
			path string
			want int // folderPath entries
		}{
			{fmt.Sprintf("/folders/%v", sub.body["id"]), 0},
			{fmt.Sprintf("/folders/%v", inner.body["id"]), 1},
			{fmt.Sprintf("/workbooks/%v", wb.body["id"]), 2},
		} {
			r := a.call("GET", ws(dep, c.path), viewer, nil)
			path, _ := r.body["folderPath"].([]any)
			if r.status != 200 || len(path) != c.want || strings.Contains(r.raw, "board-only secret") || strings.Contains(fmt.Sprint(path), secretID) {
				t.Fatalf("GET %s as the viewer: %s; want a folderPath of %d entries without the private folder", c.path, r, c.want)
			}
		}
		r := a.call("GET", ws(dep, "/workspace?q=report+card"), viewer, nil)
		if r.status != 200 || !strings.Contains(r.raw, "report card") || strings.Contains(r.raw, "board-only secret") {
			t.Fatalf("search as the viewer: %s", r)
		}
	})

	// A hundred workbooks of the maximum size (meta, calculated fields and draft at the
	// limit, then published), in a folder private to the ai_bi_user who made them.
	private := setup.call("POST", ws(dep, "/folders"), ai, map[string]any{"name": "ai private"})
	if private.status != 200 {
		t.Fatalf("create folder: %s", private)
	}
	blob := map[string]any{"m": strings.Repeat("A", itemCap-16)}
	draft := map[string]any{"title": strings.Repeat("T", itemCap-32)}
	items := make([]any, 100)
	inParallel(t, len(items), func(i int) error {
		w := setup.patiently("POST", ws(dep, "/workbooks"), ai, map[string]any{"name": fmt.Sprint("max ", i), "folderId": private.body["id"],
			"meta": blob, "calculatedFields": blob, "dashboardDraft": draft})
		if w.status != 200 {
			return fmt.Errorf("create workbook %d: %s", i, w)
		}
		if p := setup.patiently("POST", ws(dep, fmt.Sprintf("/workbooks/%v/publish", w.body["id"])), ai, nil); p.status != 200 {
			return fmt.Errorf("publish workbook %d: %s", i, p)
		}
		items[i] = map[string]any{"type": "WORKBOOK", "id": w.body["id"]}
		return nil
	})
	bulk := map[string]any{"folderId": nil, "items": items}

	// A bulk move of items the caller may not move reads no item's content: a viewer's
	// reads none at all (it can move nothing), a developer's reads their heads only.
	t.Run("TestBulkMoveOfMaximumItemsReadsOnlyWhatAccessNeeds", func(t *testing.T) {
		for _, c := range []struct {
			who, authz         string
			maxDocs, maxBytes  float64
			refusedWithMessage string
		}{
			{"viewer", viewer, 0, 0, "ai_bi_user"},
			{"developer", dev, 100 + 10, 100 * 1024, "edit access"},
		} {
			docs0, bytes0 := storeReads(t, s)
			r := a.call("POST", ws(dep, "/workspace/bulk-move"), c.authz, bulk)
			docs1, bytes1 := storeReads(t, s)
			docs, bytes := docs1-docs0, bytes1-bytes0
			t.Logf("%s's bulk move of 100 items of ~%d KiB each: the store returned %.0f documents, %.0f bytes", c.who, itemBytes>>10, docs, bytes)
			failed, _ := r.body["failed"].([]any)
			if r.status != 200 || len(failed) != 100 {
				t.Fatalf("%s: want 200 with every item refused, got %s", c.who, r)
			}
			for _, f := range failed {
				e := f.(map[string]any)["error"].(map[string]any)
				if e["status"] != float64(403) || !strings.Contains(e["message"].(string), c.refusedWithMessage) {
					t.Fatalf("%s: failed entry %v, want 403 (%s)", c.who, f, c.refusedWithMessage)
				}
			}
			if docs > c.maxDocs || bytes > c.maxBytes {
				t.Fatalf("%s: the store returned %.0f documents and %.0f bytes for a refused bulk move, want at most %.0f and %.0f (the items hold about %d)",
					c.who, docs, bytes, c.maxDocs, c.maxBytes, 100*itemBytes)
			}
		}
	})

	// Its owner's bulk move is allowed and answers its items in full, as far as the
	// answer's limit (WORKSPACE_MAX_BULK_MOVE_BYTES, 3.5 items' worth here): the items past
	// it are not moved, 413 naming the limit.
	t.Run("TestOwnersBulkMoveAnswersInFullWithinItsLimit", func(t *testing.T) {
		r := setup.call("POST", ws(dep, "/workspace/bulk-move"), ai, map[string]any{"folderId": nil, "items": items[:5]})
		moved, _ := r.body["moved"].([]any)
		failed, _ := r.body["failed"].([]any)
		if r.status != 200 || len(moved) != 3 || len(failed) != 2 {
			t.Fatalf("owner's bulk move of 5 items: want 3 moved and 2 refused, got %.600s", r)
		}
		if m := moved[2].(map[string]any); !strings.Contains(fmt.Sprint(m["meta"]), "AAAA") || m["publishedDashboard"] == nil {
			t.Fatalf("a moved item answered without its content: %.300v", m)
		}
		for _, f := range failed {
			e := f.(map[string]any)["error"].(map[string]any)
			if e["status"] != float64(413) || !strings.Contains(e["message"].(string), "over the limit of") || strings.Contains(e["message"].(string), "WORKSPACE_") {
				t.Fatalf("failed entry %v, want 413 naming the limit", f)
			}
		}
	})

	// One bulk move is one audit event, whatever the number of items: the viewer's and the
	// developer's refused moves above recorded one each, listing their items.
	t.Run("TestBulkMoveIsOneAuditEvent", func(t *testing.T) {
		for _, who := range []string{"viewer", "developer"} {
			q := url.Values{"action": {"workspace.items.move"}, "actor": {fmt.Sprint(users[who].ID)}}
			var evs []any
			apitest.Eventually(t, 20*time.Second, who+"'s move event", func() (bool, string) {
				r := a.call("GET", "/api/v1/audit?"+q.Encode(), admin, nil)
				evs, _ = r.body["items"].([]any)
				return len(evs) > 0, r.String()
			})
			if len(evs) != 1 {
				t.Fatalf("%s's one bulk move of 100 items recorded %d move events, want 1", who, len(evs))
			}
			d := evs[0].(map[string]any)["details"].(map[string]any)
			listed, _ := d["items"].([]any)
			unlisted, _ := d["unlisted"].(float64)
			if d["failed"] != float64(100) || len(listed) == 0 || float64(len(listed))+unlisted != 100 {
				t.Fatalf("%s's event details %v: want 100 failed items, listed or counted", who, d)
			}
		}
		for _, action := range []string{"workspace.workbook.move", "workspace.folder.move", "workspace.report.move"} {
			r := a.call("GET", "/api/v1/audit?"+url.Values{"action": {action}}.Encode(), admin, nil)
			if evs, _ := r.body["items"].([]any); r.status != 200 || len(evs) != 0 {
				t.Fatalf("per-item move events %s: %s", action, r)
			}
		}
	})
}

// insertPrivateFolders writes n root folders of dep created by owner straight into
// workspace-svc's database, as the service writes them (making thousands through the API
// would take minutes on the test store): a deployment with more folders than any listing
// page may examine.
func insertPrivateFolders(t *testing.T, s *stacktest.Stack, dep, owner int64, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(s.Mongo.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	now := time.Now().UTC().Truncate(time.Millisecond)
	zero := bson.D{{Key: "meta", Value: 0}, {Key: "calculatedFields", Value: 0}, {Key: "draft", Value: 0}, {Key: "published", Value: 0}}
	docs := make([]any, 0, n)
	for i := range n {
		docs = append(docs, bson.D{{Key: "_id", Value: int64(2_000_000_000_000) + dep*10_000_000 + int64(i)}, {Key: "dep", Value: dep},
			{Key: "type", Value: "FOLDER"}, {Key: "name", Value: fmt.Sprintf("private %04d", i)}, {Key: "position", Value: float64(i)},
			{Key: "parent", Value: int64(0)}, {Key: "createdBy", Value: owner}, {Key: "updatedBy", Value: owner},
			{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "treeV", Value: int64(0)},
			{Key: "anc", Value: bson.A{}}, {Key: "depth", Value: 1}, {Key: "sizes", Value: zero}})
	}
	items := client.Database("workspace").Collection("items")
	for len(docs) > 0 {
		k := min(500, len(docs))
		if _, err := items.InsertMany(ctx, docs[:k]); err != nil {
			t.Fatal(err)
		}
		docs = docs[k:]
	}
}
