package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/config"
	"github.com/analyticsco/platform/dbtsync-svc/internal/isolate"
)

// A convert child gets the configured limits, its memory lowered to its share of the
// worker's cgroup when they do not fit.
func TestChildLimitsFitTheWorkersCgroup(t *testing.T) {
	cfg := config.Config{ChildCPULimit: time.Minute, ChildMemoryLimit: 2 << 30, WorkerConcurrency: 2}
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name   string
		cgroup int64
		want   isolate.Limits
	}{
		{"no-cgroup-limit", 0, isolate.Limits{CPU: time.Minute, Memory: 2 << 30}},
		{"roomy-cgroup", 8 << 30, isolate.Limits{CPU: time.Minute, Memory: 2 << 30}},
		{"worker-of-1-GiB", 1 << 30, isolate.Limits{CPU: time.Minute, Memory: (1 << 30) / 100 * 80 / 2}},
	} {
		if got := childLimits(cfg, c.cgroup, log); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := childLimits(config.Config{}, 0, log); got != isolate.DefaultLimits {
		t.Errorf("unset: %+v, want the defaults %+v", got, isolate.DefaultLimits)
	}
}
