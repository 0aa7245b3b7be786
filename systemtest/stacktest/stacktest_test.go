package stacktest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// TestStackStartsSeedsAndServes: the stack comes up as processes, the seed reaches the
// services through the gateway, and a killed service answers 503 for its routes only.
func TestStackStartsSeedsAndServes(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	acme := s.Seed.Accounts["acme"]
	if acme.ID == 0 || len(acme.Deployments) != 2 || acme.APIKeys["admin"] == "" {
		t.Fatalf("seed: %+v", acme)
	}
	api := apitest.New(s.Gateway)
	get := func(path, authz string) int { return api.Call(t, "GET", path, authz, nil).Status }
	ws := fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID)
	if code := get(ws, "Bearer "+acme.Users["admin"].Bearer); code != 200 {
		t.Fatalf("workspace: %d", code)
	}
	if code := get("/api/v1/groups", "Api-Key "+acme.APIKeys["admin"]); code != 200 {
		t.Fatalf("groups: %d", code)
	}
	// Every service exports its MongoDB client's commands and the documents returned, by
	// command and collection, on its internal listener.
	for _, c := range []struct{ proc, series string }{
		{"workspace-svc-1", `mongodb_client_commands_total{collection="items",command="find"}`},
		{"embed-svc-1", `mongodb_client_commands_total{collection="definitions",command="find"}`},
		{"gateway", `mongodb_client_documents_returned_total{collection="users",command="find"}`},
	} {
		resp, err := http.Get("http://" + s.Process(c.proc).InternalAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), c.series) {
			var have []string
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, "mongodb_client") {
					have = append(have, line)
				}
			}
			t.Errorf("%s exports no %s; it has:\n%s", c.proc, c.series, strings.Join(have, "\n"))
		}
	}
	s.Kill("workspace-svc-1")
	if code := get(ws, "Bearer "+acme.Users["admin"].Bearer); code != 503 {
		t.Fatalf("workspace with its service killed: %d, want 503", code)
	}
	if code := get("/api/v1/groups", "Api-Key "+acme.APIKeys["admin"]); code != 200 {
		t.Fatalf("groups while workspace-svc is down: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.Restart(ctx, "workspace-svc-1")
	if code := get(ws, "Bearer "+acme.Users["admin"].Bearer); code != 200 {
		t.Fatalf("workspace after restart: %d", code)
	}
}

func TestTokens(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	acme := s.Seed.Accounts["acme"]
	api := apitest.New(s.Gateway)
	ws := fmt.Sprintf("/api/v1/deployments/%d/workspace", acme.Deployments[0].ID)
	for _, c := range []struct {
		name string
		ttl  time.Duration
		want int
	}{{"fresh-200", time.Hour, 200}, {"expired-401", -time.Minute, 401}} {
		if r := api.Call(t, "GET", ws, "Bearer "+s.Token(acme.Users["viewer"].ID, c.ttl), nil); r.Status != c.want {
			t.Errorf("%s: %d", c.name, r.Status)
		}
	}
	if len(s.Secrets()) != 6 {
		t.Fatalf("secrets: %d", len(s.Secrets()))
	}
}
