package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
)

var wantAccounts = map[string]struct {
	plan                   string
	embedding, creatorMode bool
	minDeployments         int
	users, apiKeys         []string
}{
	"acme":    {"enterprise", true, true, 2, []string{"admin", "developer", "aiBiUser", "viewer"}, []string{"admin", "adminScoped", "personal"}},
	"globex":  {"premium", true, false, 1, []string{"admin", "aiBiUser"}, []string{"admin"}},
	"initech": {"free", false, false, 1, []string{"admin"}, []string{"admin"}},
}

// TestStack builds the real binaries, runs the stack, seeds it twice with
// platformctl and stops it. It needs gateway, platformctl and the three
// services to exist; until they do it fails at the build step.
func TestStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildStack(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	a := freshAddrs(t)

	r := startRunner(t, filepath.Join(bin, "devstack"), bin, dataDir, a)
	r.waitReady(ctx)
	s := r.stack()
	stackFile := filepath.Join(dataDir, "stack.json")

	first := seed(ctx, t, filepath.Join(bin, "platformctl"), stackFile)
	checkSeedContract(t, first, s.Gateway)
	second := seed(ctx, t, filepath.Join(bin, "platformctl"), stackFile)
	checkSeedContract(t, second, s.Gateway)
	checkReseed(t, first, second)

	code, _, err := getStatus(ctx, s.Gateway+"/healthz")
	if err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz = %d, %v; want 200", code, err)
	}

	if code := r.stop(60 * time.Second); code != 0 {
		t.Errorf("devstack exit code after SIGTERM = %d, want 0", code)
	}
	assertGone(t, s.PIDs)
}

func seed(ctx context.Context, t *testing.T, platformctl, stackFile string) devstack.Seed {
	t.Helper()
	cmd := exec.CommandContext(ctx, platformctl, "seed", "--json")
	cmd.Env = append(os.Environ(), "PLATFORM_STACK_FILE="+stackFile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("platformctl seed --json: %v\nstderr:\n%s", err, stderr.String())
	}
	// Exactly one JSON object on stdout.
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	var out devstack.Seed
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("seed stdout is not a JSON object: %v\n%s", err, stdout.String())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("seed stdout has more than one JSON value:\n%s", stdout.String())
	}
	return out
}

func checkSeedContract(t *testing.T, got devstack.Seed, gateway string) {
	t.Helper()
	if got.Gateway != gateway {
		t.Errorf("seed gateway = %q, want %q", got.Gateway, gateway)
	}
	for name, want := range wantAccounts {
		acc, ok := got.Accounts[name]
		if !ok {
			t.Errorf("seed has no account %q", name)
			continue
		}
		if acc.ID == 0 {
			t.Errorf("%s: id is 0", name)
		}
		if acc.Plan != want.plan || acc.EmbeddingEnabled != want.embedding || acc.UseCreatorMode != want.creatorMode {
			t.Errorf("%s: plan %q embedding %v creatorMode %v, want %q %v %v",
				name, acc.Plan, acc.EmbeddingEnabled, acc.UseCreatorMode, want.plan, want.embedding, want.creatorMode)
		}
		if len(acc.Deployments) < want.minDeployments || (name == "acme" && len(acc.Deployments) != 2) {
			t.Errorf("%s: %d deployments, want %d", name, len(acc.Deployments), want.minDeployments)
		}
		for i, d := range acc.Deployments {
			if d.ID == 0 || d.ProductionBranch != "main" {
				t.Errorf("%s: deployment %d = %+v, want an id and productionBranch main", name, i, d)
			}
		}
		for _, role := range want.users {
			u, ok := acc.Users[role]
			if !ok {
				t.Errorf("%s: no user %q", name, role)
				continue
			}
			if u.ID == 0 || u.Username == "" || u.Email == "" || u.Bearer == "" {
				t.Errorf("%s: user %s = %+v, want id, username, email and bearer", name, role, u)
			}
		}
		for _, k := range want.apiKeys {
			if acc.APIKeys[k] == "" {
				t.Errorf("%s: no api key %q", name, k)
			}
		}
	}
}

// checkReseed: a second seed finds the same accounts, users and deployments
// but issues fresh credentials.
func checkReseed(t *testing.T, first, second devstack.Seed) {
	t.Helper()
	for name, a1 := range first.Accounts {
		a2 := second.Accounts[name]
		if a1.ID != a2.ID {
			t.Errorf("%s: id %d then %d, want stable", name, a1.ID, a2.ID)
		}
		if len(a1.Deployments) != len(a2.Deployments) {
			t.Errorf("%s: %d deployments then %d", name, len(a1.Deployments), len(a2.Deployments))
		} else {
			for i := range a1.Deployments {
				if a1.Deployments[i].ID != a2.Deployments[i].ID {
					t.Errorf("%s: deployment %d id %d then %d", name, i, a1.Deployments[i].ID, a2.Deployments[i].ID)
				}
			}
		}
		for role, u1 := range a1.Users {
			u2 := a2.Users[role]
			if u1.ID != u2.ID {
				t.Errorf("%s/%s: user id %d then %d", name, role, u1.ID, u2.ID)
			}
			if u1.Bearer == u2.Bearer {
				t.Errorf("%s/%s: same bearer token twice, want fresh credentials", name, role)
			}
		}
		for k, v1 := range a1.APIKeys {
			if v1 == a2.APIKeys[k] {
				t.Errorf("%s: api key %s issued twice, want fresh credentials", name, k)
			}
		}
	}
}
