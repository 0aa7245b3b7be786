package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteBenchDocRecordsTheRunAndItsFigures: a table's run becomes <dir>/<name>.md
// with its date, machine, load at start and end, a markdown row per variant (ratios to
// the baseline, skipped and failed rows said so) and the output exactly as printed.
func TestWriteBenchDocRecordsTheRunAndItsFigures(t *testing.T) {
	dir := t.TempDir()
	printed := "# gateway table\nvariant  req/s\n(a) backend  9000\n"
	d := benchDoc{
		Name: "gateway", Title: "gateway table",
		Date:    time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
		Machine: "2 CPU cores, linux/amd64, go1.26", Args: []string{"-only", "gateway"},
		LoadStart: "3.10", LoadEnd: "4.20", Baseline: "c",
		Rows: []*Summary{
			{Key: "c", Name: "(c) nginx", RPS: 10000, P50: 2 * time.Millisecond, P99: 15 * time.Millisecond, CPUPerReq: 40},
			{Key: "f", Name: "(f) gateway | JWT", RPS: 8000, P50: 3 * time.Millisecond, P99: 20 * time.Millisecond, Errors: 1, CPUPerReq: 60},
			{Key: "d", Name: "(d) Caddy", Err: ErrSkip{Reason: "caddy not installed"}},
			{Key: "e", Name: "(e) HAProxy", Err: errors.New("did not start\nmore")},
		},
		Output: printed,
	}
	path, err := writeBenchDoc(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "gateway.md") {
		t.Fatalf("path %s", path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	for _, want := range []string{
		"# bench: gateway table\n",
		"`go run ./devstack/cmd/bench -only gateway`",
		"| date | 2025-03-04T05:06:07Z |\n",
		"| machine | 2 CPU cores, linux/amd64, go1.26 |\n",
		"| load average (1 min) | 3.10 at start, 4.20 at end |\n",
		"| flags | `-only gateway` |\n",
		"| variant | req/s | p50 | p99 | errors | cpu_us/req | rps vs c | cpu vs c |\n",
		"| (c) nginx | 10000 | 2.00ms | 15.0ms | 0 | 40.0 | 1.00x | 1.00x |\n",
		"| (f) gateway \\| JWT | 8000 | 3.00ms | 20.0ms | 1 | 60.0 | 0.80x | 1.50x |\n",
		"| (d) Caddy | skipped: caddy not installed |",
		"| (e) HAProxy | failed: did not start |",
		"```text\n" + strings.TrimRight(printed, "\n") + "\n```\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}

	// A run without rows (the soak) keeps its printed output only; "" writes nothing.
	d = benchDoc{Name: "soak", Date: d.Date, Output: "soak: ok\n"}
	if _, err := writeBenchDoc(dir, d); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile(filepath.Join(dir, "soak.md"))
	if strings.Contains(string(raw), "## Figures") || !strings.Contains(string(raw), "```text\nsoak: ok\n```") {
		t.Errorf("soak.md:\n%s", raw)
	}
	if path, err := writeBenchDoc("", d); path != "" || err != nil {
		t.Errorf("no dir: %q %v", path, err)
	}
	if _, err := writeBenchDoc(dir, benchDoc{Name: "../x"}); err == nil {
		t.Error("a name with a path was written")
	}
}

// TestDocsDirIsUnderTheRepositoryRoot: a relative -docs-dir does not depend on where
// the bench was started.
func TestDocsDirIsUnderTheRepositoryRoot(t *testing.T) {
	if got := docsDirFor("docs/bench", "/repo"); got != filepath.Join("/repo", "docs", "bench") {
		t.Errorf("relative: %s", got)
	}
	if got := docsDirFor("/tmp/x", "/repo"); got != "/tmp/x" {
		t.Errorf("absolute: %s", got)
	}
	if got := docsDirFor("", "/repo"); got != "" {
		t.Errorf("none: %s", got)
	}
}
