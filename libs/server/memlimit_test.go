package server

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// Every process gives the Go runtime 90% of its cgroup's memory limit as its soft
// limit, read from a v2 or v1 cgroup, unless GOMEMLIMIT is set; no limit sets none.
func TestSetMemoryLimitFromTheCgroup(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	write := func(t *testing.T, files map[string]string) string {
		root := t.TempDir()
		for name, content := range files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	noEnv := func(string) string { return "" }
	const none = int64(1<<63 - 1) // the runtime's "no limit"
	cases := []struct {
		name   string
		files  map[string]string
		env    func(string) string
		want   int64 // the limit SetMemoryLimit reports; 0: none
		runtim int64 // the runtime's limit after
		reason string
	}{
		{"v2", map[string]string{"memory.max": "1073741824\n"}, noEnv, 966367620, 966367620, "90% of"},
		{"v2-without-limit", map[string]string{"memory.max": "max\n"}, noEnv, 0, none, "sets no limit"},
		{"v1", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, noEnv, 483183810, 483183810, "memory.limit_in_bytes"},
		{"v1-unlimited", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, noEnv, 0, none, "sets no limit"},
		{"v2-wins-over-v1", map[string]string{"memory.max": "1000000000", "memory/memory.limit_in_bytes": "5"}, noEnv, 900000000, 900000000, "memory.max"},
		{"no-cgroup", map[string]string{}, noEnv, 0, none, "no cgroup memory limit file"},
		{"garbage", map[string]string{"memory.max": "lots"}, noEnv, 0, none, "not a limit in bytes"},
		{"environment-wins", map[string]string{"memory.max": "1073741824"}, func(k string) string {
			if k == "GOMEMLIMIT" {
				return "300MiB"
			}
			return ""
		}, none, none, "GOMEMLIMIT=300MiB set in the environment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(none)
			got := SetMemoryLimit(write(t, c.files), c.env)
			if got.Bytes != c.want || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("SetMemoryLimit = %+v, want %d (%q)", got, c.want, c.reason)
			}
			if now := debug.SetMemoryLimit(-1); now != c.runtim {
				t.Errorf("the runtime's limit is %d, want %d", now, c.runtim)
			}
		})
	}
}
