package dbtsync_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The HTTP transport over the fakes: what only the transport decides (cursors, body
// limits, the 503's header), with the caller in the request context as identity.Require
// puts it there.

// handler serves the fixture's service to p, with maxSyncBody as the start-sync limit.
func (f *fixture) handler(p *identity.Principal, maxSyncBody int64) http.Handler {
	return f.handlerWith(p, maxSyncBody, convert.ManifestLimits{})
}

// handlerWith is handler with the upload's manifest read within manifest.
func (f *fixture) handlerWith(p *identity.Principal, maxSyncBody int64, manifest convert.ManifestLimits) http.Handler {
	h := dbtsync.NewHTTPHandler(dbtsync.MakeEndpoints(f.svc), slog.New(slog.DiscardHandler), maxSyncBody, manifest, nil, nil, 0)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(identity.NewContext(r.Context(), p)))
	})
}

// call sends a request to h and returns the response and its JSON object body.
func call(t *testing.T, h http.Handler, method, path, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w, out
}

// pageOf reads a list answer: the items' values of key, and the next page's cursor ("" on
// the last page).
func pageOf(t *testing.T, body map[string]any, key string) (got []string, next string) {
	t.Helper()
	items, _ := body["items"].([]any)
	for _, it := range items {
		got = append(got, fmt.Sprint(it.(map[string]any)[key]))
	}
	info, _ := body["pageInfo"].(map[string]any)
	if info["hasNextPage"] == true {
		next, _ = info["endCursor"].(string)
	}
	return got, next
}

// Every list walks page by page with the endCursor it answered (newest job first;
// production, then branches by name; newest version first), and an after that is no
// cursor of the list is 400.
func TestListsPageWithTheirCursors(t *testing.T) {
	f := newFixture(t)
	var jobs []string
	for _, b := range []string{"a", "b", "c"} {
		jobs = append(jobs, f.queueSync(t, b))
		f.clock.Add(time.Second) // job ids are time-ordered
	}
	for i := range 3 {
		files := []convert.File{{Path: "model/cubes/a.yml", Content: fmt.Sprint(i)}}
		if _, _, err := f.store.WriteVersion(context.Background(), dep, "dbt/x", fmt.Sprint("sj-v", i), files, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	f.write(t, "dbt/a")
	h := f.handler(developer, dbtsync.DefaultMaxSyncBodyBytes)
	base := fmt.Sprintf("/api/v1/deployments/%d", dep)
	build := fmt.Sprintf("/build/api/v1/deployments/%d/branches", dep)
	for _, c := range []struct {
		name, path, key string
		want            [][]string
	}{
		{"dbt-sync-list-newest-first", base + "/dbt-sync?first=2", "syncJobId", [][]string{{jobs[2], jobs[1]}, {jobs[0]}}},
		{"branches-list-production-first", build + "?first=2", "name", [][]string{{prod, "dbt/a"}, {"dbt/x"}}},
		{"versions-list-newest-first", build + "/dbt%2Fx/versions?first=2", "version", [][]string{{"3", "2"}, {"1"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			for i, want := range c.want {
				w, body := call(t, h, "GET", path, "")
				got, next := pageOf(t, body, c.key)
				if w.Code != 200 || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("page %d: %d %v, want %v", i+1, w.Code, got, want)
				}
				if last := i == len(c.want)-1; last != (next == "") {
					t.Fatalf("page %d: next cursor %q, want one unless it is the last page", i+1, next)
				}
				path = c.path + "&after=" + url.QueryEscape(next)
			}
		})
	}
	for _, c := range []struct{ path, after string }{
		{base + "/dbt-sync", "not base64!"},
		{base + "/dbt-sync", base64.RawURLEncoding.EncodeToString([]byte("sj-no-such-job"))},
		{base + "/dbt-sync", httpx.EncodeCursor("sj-no-such-job")},
		{build, httpx.EncodeCursor("..bad name")},
		{build, httpx.EncodeCursor(7)},
		{build + "/dbt%2Fx/versions", httpx.EncodeCursor(int64(99))},
		{build + "/dbt%2Fx/versions", httpx.EncodeCursor("2")},
	} {
		w, body := call(t, h, "GET", c.path+"?after="+url.QueryEscape(c.after), "")
		if w.Code != 400 || body["message"] != "after is not a cursor returned by this list" {
			t.Errorf("list-400-after %s %q: %d %v", c.path, c.after, w.Code, body)
		}
	}
}

// A body over its route's limit is 413 naming the limit: a start-sync body stops being
// read there, queues nothing and leaves no part of its manifest in the store; the small
// bodies (integration, staging) have a limit of their own.
func TestBodiesOverTheirLimitAre413(t *testing.T) {
	const limit = 1024
	f := newFixture(t) // upload quota 4096: the limit, not the quota, refuses the body
	big := `{"source":"manifest","manifest":{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{"x":"` +
		strings.Repeat("x", 2*limit) + `"}}}`
	w, body := call(t, f.handler(developer, limit), "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), big)
	if w.Code != 413 || body["message"] != fmt.Sprintf("request body is larger than %d bytes", limit) {
		t.Fatalf("dbt-sync-413-over-the-body-limit: %d %v", w.Code, body)
	}
	if n := f.used(t, depLedger); n != 0 || len(f.jobs(t)) != 0 {
		t.Errorf("a body over the limit left %d bytes of manifest and %d jobs", n, len(f.jobs(t)))
	}
	huge := `{"enabled":true,"x":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, c := range []struct{ name, method, path string }{
		{"dbt-git-integration-413", "PUT", fmt.Sprintf("/api/v1/deployments/%d/dbt-git-integration", dep)},
		{"branch-staging-413", "PUT", fmt.Sprintf("/build/api/v1/deployments/%d/branches/dbt%%2Fx/staging", dep)},
	} {
		if w, body := call(t, f.handler(admin, limit), c.method, c.path, huge); w.Code != 413 || body["message"] != fmt.Sprintf("request body is larger than %d bytes", 1<<20) {
			t.Errorf("%s: %d %v", c.name, w.Code, body)
		}
	}
}

// MongoDB unreachable: the branch and integration routes are 503 with the domain's
// words and Retry-After, a git sync queues nothing, and the resolver embed-svc asks
// answers an error, never "no such branch" (which generate-session would turn into 404).
func TestBranchStoreOutage(t *testing.T) {
	f := newFixture(t)
	f.write(t, "dbt/x")
	f.store.SetUnavailable(true)
	const msg = "a dependency of dbtsync-svc is unavailable; retry shortly"
	for _, c := range []struct{ name, method, path, body string }{
		{"branches-503", "GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches", dep), ""},
		{"branch-503", "GET", fmt.Sprintf("/build/api/v1/deployments/%d/branches/dbt%%2Fx", dep), ""},
		{"branch-open-503", "POST", fmt.Sprintf("/build/api/v1/deployments/%d/branches/dbt%%2Fx/open", dep), ""},
		{"dbt-sync-git-503", "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), `{}`},
	} {
		w, body := call(t, f.handler(developer, dbtsync.DefaultMaxSyncBodyBytes), c.method, c.path, c.body)
		if w.Code != 503 || body["message"] != msg || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s: %d %v (Retry-After %q)", c.name, w.Code, body, w.Header().Get("Retry-After"))
		}
	}
	if js := f.jobs(t); len(js) != 0 {
		t.Errorf("a git sync queued %v while its integration could not be read", js)
	}
	st, err := dbtsync.NewResolver(f.store, f.clock.Now).Resolve(context.Background(), dep, "dbt/x", prod)
	if err == nil || !errors.Is(err, dbtsync.ErrStoreUnavailable) {
		t.Errorf("resolve during the outage = %+v %v, want the store's unavailability", st, err)
	}
}
