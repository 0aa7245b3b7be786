package audit_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/embed-svc/internal/store/auditstore"
	libaudit "github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The service's rules against the in-memory store (the contract suite holds it to
// MongoDB's behaviour): who reads, what a scoped key sees, the answers' shape.

var t0 = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

func seeded(t testing.TB) *auditstore.Memory {
	st := auditstore.NewMemory()
	var evs []libaudit.Event
	for i := range 30 {
		at := t0.Add(time.Duration(i) * time.Second)
		evs = append(evs, libaudit.Event{ID: libaudit.NewID(at), Time: at, Service: "workspace-svc", AccountID: 1 + int64(i%3/2),
			DeploymentID: int64(i % 3), Action: "workspace.folder.create", Actor: libaudit.Actor{Type: "user", ID: "7", UserID: 7},
			Target: libaudit.Target{Type: "folder", ID: strconv.Itoa(i)}, Outcome: libaudit.Succeeded(200)})
	}
	if err := st.Insert(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	return st
}

func principal(cred, role string, scope ...int64) *identity.Principal {
	return &identity.Principal{Credential: cred, Account: identity.Account{ID: 1}, User: &identity.User{ID: 7, Role: role}, KeyScope: scope}
}

func serve(h http.Handler, p *identity.Principal, method, query string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, audit.Path, nil)
	r.URL.RawQuery = query // as sent, whatever it holds
	if p != nil {
		r = r.WithContext(identity.NewContext(r.Context(), p))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func handler(st audit.Store) http.Handler {
	r := httpx.NewRouter()
	audit.RegisterRoutes(r, audit.NewService(st), slog.New(slog.NewJSONHandler(io.Discard, nil)))
	return r
}

type page struct {
	Items []struct {
		ID           string `json:"id"`
		AccountID    int64  `json:"accountId"`
		DeploymentID *int64 `json:"deploymentId"`
		Time         string `json:"time"`
	} `json:"items"`
	PageInfo struct {
		HasNextPage bool    `json:"hasNextPage"`
		EndCursor   *string `json:"endCursor"`
	} `json:"pageInfo"`
}

func TestListRules(t *testing.T) {
	h := handler(seeded(t))
	cases := []struct {
		name  string
		p     *identity.Principal
		query string
		want  int
		items int
	}{
		{"list-200-admin-bearer", principal(identity.CredentialBearer, identity.RoleAdmin), "first=200", 200, 20},
		{"list-200-admin-api-key", principal(identity.CredentialAPIKey, identity.RoleAdmin), "first=200", 200, 20},
		{"list-403-developer", principal(identity.CredentialBearer, identity.RoleDeveloper), "", 403, 0},
		{"list-403-admin-embed-token", principal(identity.CredentialEmbed, identity.RoleAdmin), "", 403, 0},
		{"list-403-no-principal", nil, "", 403, 0},
		{"list-200-scoped-key-sees-its-deployment-only", principal(identity.CredentialAPIKey, identity.RoleAdmin, 1), "first=200", 200, 10},
		{"list-403-scoped-key-other-deployment", principal(identity.CredentialAPIKey, identity.RoleAdmin, 1), "deploymentId=2", 403, 0},
		{"list-200-deployment-filter", principal(identity.CredentialBearer, identity.RoleAdmin), "deploymentId=1&first=200", 200, 10},
		{"list-400-bad-from", principal(identity.CredentialBearer, identity.RoleAdmin), "from=now", 400, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := serve(h, c.p, "GET", c.query)
			if w.Code != c.want {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, c.want)
			}
			if c.want != 200 {
				var e errs.Body
				if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Status != c.want || e.Code == "" || e.Message == "" {
					t.Fatalf("error body %s", w.Body)
				}
				return
			}
			var pg page
			if err := json.Unmarshal(w.Body.Bytes(), &pg); err != nil {
				t.Fatal(err)
			}
			if len(pg.Items) != c.items {
				t.Fatalf("%d items, want %d", len(pg.Items), c.items)
			}
			for _, it := range pg.Items {
				if it.AccountID != 1 {
					t.Fatalf("an event of account %d", it.AccountID)
				}
				if _, err := time.Parse(httpx.TimeLayout, it.Time); err != nil {
					t.Fatalf("time %q is not in the API's layout", it.Time)
				}
			}
		})
	}
	t.Run("list-405-with-allow", func(t *testing.T) {
		w := serve(h, principal(identity.CredentialBearer, identity.RoleAdmin), "DELETE", "")
		if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
			t.Fatalf("%d Allow %q", w.Code, w.Header().Get("Allow"))
		}
	})
	t.Run("other-paths-404", func(t *testing.T) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/groups", nil))
		if w.Code != 404 || !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
}

// FuzzListQuery: whatever query a client sends is a 200 page of the caller's events
// within first, or a 4xx with the error body; never a 5xx or a panic.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"", "first=1", "first=0", "first=201", "after=YTowMUtBQkNERUZHSEpLTU5QUVJTVFZXWFla", "after=%%",
		"action=workspace.folder.*", "action=workspace..x", "from=2026-11-25T09:00:05Z&to=2026-11-25T09:00:10Z", "to=2026-11-25T09:00:00Z&from=2026-11-26T00:00:00Z",
		"deploymentId=2", "deploymentId=9223372036854775808", "targetType=folder&targetId=3", "actor=7", "actor=" + url.QueryEscape("\x00\xff")} {
		f.Add(s)
	}
	st := seeded(f)
	h := handler(st)
	admin := principal(identity.CredentialBearer, identity.RoleAdmin)
	f.Fuzz(func(t *testing.T, query string) {
		w := serve(h, admin, "GET", query)
		switch {
		case w.Code == 200:
			var pg page
			if err := json.Unmarshal(w.Body.Bytes(), &pg); err != nil || len(pg.Items) > httpx.MaxPage {
				t.Fatalf("query %q: 200 with %s (%v)", query, w.Body, err)
			}
			for _, it := range pg.Items {
				if it.AccountID != 1 {
					t.Fatalf("query %q read account %d's event", query, it.AccountID)
				}
			}
		case w.Code >= 400 && w.Code < 500:
			var e errs.Body
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Status != w.Code || e.Message == "" {
				t.Fatalf("query %q: %d with body %s", query, w.Code, w.Body)
			}
		default:
			t.Fatalf("query %q: %d %s", query, w.Code, w.Body)
		}
	})
}

// TestListFilters: each filter of GET /api/v1/audit narrows the page as its name says,
// through the transport (the query parameters, the action group, the time range, the
// cursor), and a filter out of its bounds is a 400.
func TestListFilters(t *testing.T) {
	st := auditstore.NewMemory()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	evs := []libaudit.Event{
		{Action: "workspace.folder.create", DeploymentID: 1, Actor: libaudit.Actor{Type: "user", ID: "7", UserID: 7}, Target: libaudit.Target{Type: "folder", ID: "1"}},
		{Action: "workspace.folder.move", DeploymentID: 1, Actor: libaudit.Actor{Type: "user", ID: "8", UserID: 8}, Target: libaudit.Target{Type: "folder", ID: "2"}},
		{Action: "embed.session.generate", DeploymentID: 2, Actor: libaudit.Actor{Type: "api_key", ID: "k1", APIKeyID: "k1", UserID: 7},
			Target: libaudit.Target{Type: "embed_session", ID: "s1"}},
		{Action: "embed.session.exchange", DeploymentID: 2, Actor: libaudit.Actor{Type: "embed_user", ExternalID: "ext-1"}, Target: libaudit.Target{Type: "embed_session", ID: "s1"}},
	}
	ids := make([]string, len(evs))
	for i := range evs {
		evs[i].ID, evs[i].Time, evs[i].AccountID, evs[i].Outcome = libaudit.NewID(at(i)), at(i), 1, libaudit.Succeeded(200)
		ids[i] = evs[i].ID
	}
	other := evs[0]
	other.ID, other.AccountID = libaudit.NewID(at(0)), 2
	if err := st.Insert(context.Background(), append(evs, other)); err != nil {
		t.Fatal(err)
	}
	h := handler(st)
	admin := principal(identity.CredentialBearer, identity.RoleAdmin)
	list := func(t *testing.T, query string) page {
		t.Helper()
		w := serve(h, admin, "GET", query)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", query, w.Code, w.Body)
		}
		var pg page
		if err := json.Unmarshal(w.Body.Bytes(), &pg); err != nil {
			t.Fatal(err)
		}
		return pg
	}
	rfc := func(s int) string { return url.QueryEscape(at(s).Format(time.RFC3339)) }
	for _, c := range []struct {
		name, query string
		want        []int // indexes into evs, newest first
	}{
		{"list-200-action", "action=workspace.folder.create", []int{0}},
		{"list-200-action-group", "action=workspace.folder.*", []int{1, 0}},
		{"list-200-action-wider-group", "action=embed.*", []int{3, 2}},
		{"list-200-actor-user", "actor=8", []int{1}},
		{"list-200-actor-key-owner", "actor=7", []int{2, 0}},
		{"list-200-actor-api-key", "actor=k1", []int{2}},
		{"list-200-actor-external-id", "actor=ext-1", []int{3}},
		{"list-200-target-type", "targetType=embed_session", []int{3, 2}},
		{"list-200-target", "targetType=folder&targetId=2", []int{1}},
		{"list-200-from-inclusive-to-exclusive", "from=" + rfc(1) + "&to=" + rfc(3), []int{2, 1}},
		{"list-200-deployment", "deploymentId=2", []int{3, 2}},
		{"list-200-combined", "action=embed.*&actor=7", []int{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pg := list(t, c.query)
			var got, want []string
			for _, it := range pg.Items {
				got = append(got, it.ID)
			}
			for _, i := range c.want {
				want = append(want, ids[i])
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("%s: got %v, want %v", c.query, got, want)
			}
		})
	}
	t.Run("list-200-cursor-walks-every-page-once", func(t *testing.T) {
		var got []string
		query := "first=1"
		for range len(evs) + 1 {
			pg := list(t, query)
			for _, it := range pg.Items {
				got = append(got, it.ID)
			}
			if !pg.PageInfo.HasNextPage {
				break
			}
			query = "first=1&after=" + url.QueryEscape(*pg.PageInfo.EndCursor)
		}
		if want := []string{ids[3], ids[2], ids[1], ids[0]}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("pages %v, want %v", got, want)
		}
	})
	for _, c := range []struct{ name, query string }{
		{"list-400-from-not-before-to", "from=" + rfc(3) + "&to=" + rfc(3)},
		{"list-400-action-too-long", "action=" + strings.Repeat("a", 65)},
		{"list-400-action-not-a-name", "action=workspace.Folder.create"},
		{"list-400-action-wildcard-inside", "action=workspace.*.create"},
		{"list-400-actor-too-long", "actor=" + strings.Repeat("7", 129)},
		{"list-400-target-type-not-a-type", "targetType=Folder"},
		{"list-400-target-id-too-long", "targetId=" + strings.Repeat("x", libaudit.MaxStringBytes+1)},
		{"list-400-deployment-zero", "deploymentId=0"},
		{"list-400-cursor-not-issued", "after=" + url.QueryEscape(ids[0])},
	} {
		t.Run(c.name, func(t *testing.T) {
			if w := serve(h, admin, "GET", c.query); w.Code != 400 {
				t.Fatalf("%s: %d %s, want 400", c.query, w.Code, w.Body)
			}
		})
	}
}
