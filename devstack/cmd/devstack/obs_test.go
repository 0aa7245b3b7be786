package main_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
)

// TestRunnerWithPrometheus: with DEVSTACK_OBS=1 (make run OBS=1) the runner starts
// Debian's prometheus with a generated config that promtool accepts, every process of
// the stack is a target that Prometheus scrapes successfully under the job names the
// rules use, the rules of deploy/prometheus/rules are loaded, and prometheus stops with
// the stack. It fails, never skips, without prometheus: that is a dependency of OBS=1.
func TestRunnerWithPrometheus(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (`sudo apt-get install -y prometheus`; .ci/run does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tools := platform.BinDir(t, platform.Devstack)
	dataDir := filepath.Join(t.TempDir(), "data")
	rules := filepath.Join(devstack.RepoRoot(t), "deploy", "prometheus", "rules")
	r := startRunner(t, filepath.Join(tools, "devstack"), platform.FakeBinDir(t), dataDir, freshAddrs(t), "DEVSTACK_FAKE_SERVICE=1",
		"DEVSTACK_OBS=1", "DEVSTACK_PROMETHEUS_ADDR=random", "DEVSTACK_PROMETHEUS_RULES="+rules)
	r.waitReady(ctx)
	s := r.stack()
	if !strings.HasPrefix(s.Prometheus, "http://127.0.0.1:") || s.PIDs["prometheus"] == 0 {
		t.Fatalf("stack.json: prometheus %q, pid %d", s.Prometheus, s.PIDs["prometheus"])
	}
	if !r.out.contains("[devstack] prometheus " + s.Prometheus) {
		t.Errorf("the runner did not print Prometheus's URL")
	}
	config := filepath.Join(dataDir, "prometheus", "prometheus.yml")
	if out, err := exec.Command(promtool, "check", "config", config).CombinedOutput(); err != nil {
		t.Errorf("promtool check config %s: %v\n%s", config, err, out)
	}

	// Every process is scraped, healthy, under its job name.
	want := []string{"dbtsync-svc", "dbtsync-worker", "embed-svc", "gateway", "workspace-svc"}
	var up []string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var targets struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					Health    string            `json:"health"`
					ScrapeURL string            `json:"scrapeUrl"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		code, body, err := getStatus(ctx, s.Prometheus+"/api/v1/targets")
		if err != nil || code != 200 || json.Unmarshal(body, &targets) != nil {
			continue
		}
		up = up[:0]
		for _, tg := range targets.Data.ActiveTargets {
			if tg.Health == "up" && tg.ScrapeURL == s.Metrics[tg.Labels["job"]] {
				up = append(up, tg.Labels["job"])
			}
		}
		slices.Sort(up)
		if slices.Equal(up, want) {
			break
		}
	}
	if !slices.Equal(up, want) {
		t.Errorf("targets up: %v, want %v (each at its stack.json metrics URL)", up, want)
	}

	// The platform's rules are loaded.
	code, body, err := getStatus(ctx, s.Prometheus+"/api/v1/rules")
	var rulesAnswer struct {
		Data struct {
			Groups []struct {
				Name string `json:"name"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err != nil || code != 200 || json.Unmarshal(body, &rulesAnswer) != nil {
		t.Fatalf("GET /api/v1/rules: %d %v %s", code, err, body)
	}
	var groups []string
	for _, g := range rulesAnswer.Data.Groups {
		groups = append(groups, g.Name)
	}
	for _, g := range []string{"http-gateway", "slo-gateway", "slo-gateway-alerts", "dbtsync-alerts"} {
		if !slices.Contains(groups, g) {
			t.Errorf("rule group %s not loaded (loaded: %v)", g, groups)
		}
	}

	if code := r.stop(60 * time.Second); code != 0 {
		t.Fatalf("devstack exit code after SIGTERM = %d, want 0", code)
	}
	assertGone(t, s.PIDs)
}
