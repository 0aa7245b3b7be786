package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// workingSet is what the size table's rows work on in the measured deployment, created
// through the gateway. The sizes differ in what else is stored; the working set is the
// same on every stack.
type workingSet struct {
	a int64 // folder A: 50 workbooks, read and listed (pages 1 and 3 of 20)
	// c and d are the folders two sets of 10 mixed items (4 folders, 3 workbooks, 3
	// reports) and folder moved (holding a folder) move between.
	c, d, moved int64
	sets        [][]byte
	parent      int64 // a root folder nested folders are created in
	holder      int64 // a root folder workbooks and reports are created in
	// folder, workbook and report are renamed; the folder's permissions are set, the
	// workbook is favorited and unfavorited; published has a dashboard draft and is
	// published and unpublished.
	folder, workbook, report, published int64
	page3                               string // the cursor after A's 40th item

	// pools are created items the delete rows delete, by route ("folders", "workbooks",
	// "reports"): the creates' rows add theirs, a delete row tops its pool up untimed.
	pools map[string]*idPool
}

func (w *workingSet) create(ctx context.Context, c *apiClient, bearer string, dep int64) error {
	w.pools = map[string]*idPool{"folders": {}, "workbooks": {}, "reports": {}}
	var err error
	for _, f := range []struct {
		id     *int64
		name   string
		parent int64
	}{{&w.a, "size A", 0}, {&w.c, "size C", 0}, {&w.d, "size D", 0}, {&w.parent, "size nested parent", 0},
		{&w.holder, "size holder", 0}, {&w.folder, "size renamed folder", 0}} {
		if *f.id, err = c.createFolder(ctx, bearer, dep, f.name, f.parent); err != nil {
			return err
		}
	}
	if w.moved, err = c.createFolder(ctx, bearer, dep, "size moved", w.c); err != nil {
		return err
	}
	if _, err = c.createFolder(ctx, bearer, dep, "size moved child", w.moved); err != nil {
		return err
	}
	if err := parallel(ctx, 50, 4, func(ctx context.Context, i int) error {
		_, err := c.createItem(ctx, bearer, dep, "workbooks", fmt.Sprintf("size workbook %02d", i), w.a)
		return err
	}); err != nil {
		return err
	}
	for _, it := range []struct {
		id         *int64
		kind, name string
	}{{&w.workbook, "workbooks", "size renamed workbook"}, {&w.report, "reports", "size renamed report"},
		{&w.published, "workbooks", "size published workbook"}} {
		if *it.id, err = c.createItem(ctx, bearer, dep, it.kind, it.name, w.holder); err != nil {
			return err
		}
	}
	draft := map[string]any{"dashboardDraft": map[string]any{"title": "size"}}
	if err := c.do(ctx, http.MethodPatch, fmt.Sprintf("/api/v1/deployments/%d/workbooks/%d", dep, w.published), "Bearer "+bearer, draft, http.StatusOK, nil); err != nil {
		return err
	}
	for set := range 2 {
		refs := make([]itemRef, 10)
		for i := range refs {
			name := fmt.Sprintf("size set %d item %d", set, i)
			switch {
			case i < 4:
				refs[i].Type = "FOLDER"
				refs[i].ID, err = c.createFolder(ctx, bearer, dep, name, w.c)
			case i < 7:
				refs[i].Type = "WORKBOOK"
				refs[i].ID, err = c.createItem(ctx, bearer, dep, "workbooks", name, w.c)
			default:
				refs[i].Type = "REPORT"
				refs[i].ID, err = c.createItem(ctx, bearer, dep, "reports", name, w.c)
			}
			if err != nil {
				return err
			}
		}
		raw, err := json.Marshal(refs)
		if err != nil {
			return err
		}
		w.sets = append(w.sets, raw)
	}
	// Page 3 of A: the cursor that ends page 2.
	after := ""
	for range 2 {
		var page struct {
			PageInfo struct {
				EndCursor *string `json:"endCursor"`
			} `json:"pageInfo"`
		}
		path := fmt.Sprintf("/api/v1/deployments/%d/workspace?folderId=%d&first=20", dep, w.a)
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if err := c.do(ctx, http.MethodGet, path, "Bearer "+bearer, nil, http.StatusOK, &page); err != nil {
			return err
		}
		if page.PageInfo.EndCursor == nil {
			return fmt.Errorf("listing folder %d: no page after %q", w.a, after)
		}
		after = *page.PageInfo.EndCursor
	}
	w.page3 = after
	return nil
}

// idPool is a queue of created items' ids to delete.
type idPool struct {
	mu  sync.Mutex
	ids []int64
}

func (p *idPool) add(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, id)
}

func (p *idPool) take() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ids) == 0 {
		return 0, false
	}
	id := p.ids[0]
	p.ids = p.ids[1:]
	return id, true
}

func (p *idPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids)
}

// sizeRequests are one row's requests on one stack.
type sizeRequests struct {
	op      sizeOp
	set     *workingSet
	gateway string
	base    string // the deployment's path
	bearer  string
	dep     int64

	mu       sync.Mutex
	n, inRun int // requests so far (alternating routes follow n), and in this run
}

func (w *workingSet) requests(gateway, bearer string, dep int64, op sizeOp) *sizeRequests {
	return &sizeRequests{op: op, set: w, gateway: gateway, base: fmt.Sprintf("/api/v1/deployments/%d", dep), bearer: bearer, dep: dep}
}

// deleted is the route a delete row deletes from, "" for other rows.
func (r *sizeRequests) deleted() string {
	switch r.op.key {
	case "delwb":
		return "workbooks"
	case "delrep":
		return "reports"
	case "delf":
		return "folders"
	}
	return ""
}

// created is the route a create row creates on, "" for other rows.
func (r *sizeRequests) created() string {
	switch r.op.key {
	case "mkroot", "mkfolder":
		return "folders"
	case "mkwb":
		return "workbooks"
	case "mkrep":
		return "reports"
	}
	return ""
}

// prepare starts a run: its count of requests anew, a delete row's pool topped up.
func (r *sizeRequests) prepare(ctx context.Context) error {
	r.mu.Lock()
	r.inRun = 0
	r.mu.Unlock()
	return r.fillPool(ctx, sizeRunCap)
}

// fillPool creates items until a delete row's pool holds n (untimed): empty folders at
// the root, workbooks and reports in the holder.
func (r *sizeRequests) fillPool(ctx context.Context, n int) error {
	route := r.deleted()
	if route == "" {
		return nil
	}
	pool := r.set.pools[route]
	missing := n - pool.len()
	if missing <= 0 {
		return nil
	}
	c := newAPIClient(r.gateway)
	defer c.http.CloseIdleConnections()
	return parallel(ctx, missing, 4, func(ctx context.Context, i int) error {
		var id int64
		var err error
		name := fmt.Sprintf("size pool %s %d", route, i)
		if route == "folders" {
			id, err = c.createFolder(ctx, r.bearer, r.dep, name, 0)
		} else {
			id, err = c.createItem(ctx, r.bearer, r.dep, route, name, r.set.holder)
		}
		if err == nil {
			pool.add(id)
		}
		return err
	})
}

// check judges a timed request's answer: a bulk move moved all 10, a create's id goes
// to its route's pool for the delete rows.
func (r *sizeRequests) check(body []byte) error {
	if r.op.key == "bulk" {
		return wantAllMoved(10)(body)
	}
	if route := r.created(); route != "" {
		var out idResponse
		if err := json.Unmarshal(body, &out); err != nil || out.ID == 0 {
			return fmt.Errorf("create answer without an id: %.200s", body)
		}
		r.set.pools[route].add(out.ID)
	}
	return nil
}

// next is the row's next request; false when a capped row's run has sent sizeRunCap
// (capped) or a delete row's pool is empty.
func (r *sizeRequests) next(capped bool) (vegeta.Target, bool) {
	r.mu.Lock()
	if capped && r.op.capped && r.inRun >= sizeRunCap {
		r.mu.Unlock()
		return vegeta.Target{}, false
	}
	n := r.n
	r.n++
	r.inRun++
	r.mu.Unlock()

	w := r.set
	hdr := jsonHeader("Bearer " + r.bearer)
	at := func(method, path string, body []byte) (vegeta.Target, bool) {
		return vegeta.Target{Method: method, URL: r.gateway + r.base + path, Header: hdr, Body: body}, true
	}
	// flip alternates two states: false on even requests.
	flip := n%2 == 1
	switch r.op.key {
	case "get":
		return at(http.MethodGet, fmt.Sprintf("/folders/%d", w.a), nil)
	case "list":
		return at(http.MethodGet, fmt.Sprintf("/workspace?folderId=%d&first=20", w.a), nil)
	case "list3":
		return at(http.MethodGet, fmt.Sprintf("/workspace?folderId=%d&first=20&after=%s", w.a, url.QueryEscape(w.page3)), nil)
	case "mkroot":
		return at(http.MethodPost, "/folders", fmt.Appendf(nil, `{"name":"size root %d"}`, n))
	case "mkfolder":
		return at(http.MethodPost, "/folders", fmt.Appendf(nil, `{"name":"size nested %d","parentId":%d}`, n, w.parent))
	case "mkwb":
		return at(http.MethodPost, "/workbooks", fmt.Appendf(nil, `{"name":"size new workbook %d","folderId":%d}`, n, w.holder))
	case "mkrep":
		return at(http.MethodPost, "/reports", fmt.Appendf(nil, `{"name":"size new report %d","folderId":%d}`, n, w.holder))
	case "renf":
		return at(http.MethodPatch, fmt.Sprintf("/folders/%d", w.folder), fmt.Appendf(nil, `{"name":"size renamed folder %d"}`, n))
	case "renwb":
		return at(http.MethodPatch, fmt.Sprintf("/workbooks/%d", w.workbook), fmt.Appendf(nil, `{"name":"size renamed workbook %d"}`, n))
	case "renrep":
		return at(http.MethodPatch, fmt.Sprintf("/reports/%d", w.report), fmt.Appendf(nil, `{"name":"size renamed report %d"}`, n))
	case "move":
		dest := w.d
		if flip {
			dest = w.c
		}
		return at(http.MethodPost, "/workspace/move", fmt.Appendf(nil, `{"type":"FOLDER","id":%d,"folderId":%d}`, w.moved, dest))
	case "bulk":
		// Each lap over the sets moves every set to the other of C and D.
		set, lap := n%len(w.sets), n/len(w.sets)
		dest := w.d
		if lap%2 == 1 {
			dest = w.c
		}
		return at(http.MethodPost, "/workspace/bulk-move", fmt.Appendf(nil, `{"items":%s,"folderId":%d}`, w.sets[set], dest))
	case "delwb", "delrep", "delf":
		id, ok := w.pools[r.deleted()].take()
		if !ok {
			return vegeta.Target{}, false
		}
		return at(http.MethodDelete, fmt.Sprintf("/%s/%d", r.deleted(), id), nil)
	case "fav":
		method := http.MethodPut
		if flip {
			method = http.MethodDelete
		}
		return at(method, fmt.Sprintf("/workspace/favorites/WORKBOOK/%d", w.workbook), nil)
	case "perm":
		return at(http.MethodPut, fmt.Sprintf("/folders/%d/permissions", w.folder), []byte(`{"grants":[]}`))
	case "pub":
		action := "publish"
		if flip {
			action = "unpublish"
		}
		return at(http.MethodPost, fmt.Sprintf("/workbooks/%d/%s", w.published, action), []byte(`{}`))
	}
	panic("size table: unknown op " + r.op.key)
}
