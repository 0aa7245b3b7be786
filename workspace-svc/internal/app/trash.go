package app

import (
	"context"
	"sync"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TrashSweep is the retention sweep of the trash: every Interval, each replica purges
// what has been in the trash longer than Retention, in bounded batches
// (workspace.TrashSweeper; several replicas may sweep at once).
type TrashSweep struct {
	Retention time.Duration // 0: no sweep
	Interval  time.Duration // 0: an hour
}

// sweepRun is a running sweep: stop ends it and waits for the pass in progress to stop
// at its next item.
type sweepRun struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startTrashSweep(ctx context.Context, d Deps, ports workspace.Ports, m *workspace.Metrics, rec audit.Recorder) *sweepRun {
	if d.Trash.Retention <= 0 {
		return nil
	}
	every := d.Trash.Interval
	if every <= 0 {
		every = time.Hour
	}
	w := workspace.NewTrashSweeper(ports, workspace.Options{Limits: d.Limits},
		workspace.SweepOptions{Retention: d.Trash.Retention, Logger: d.Logger, Metrics: m, Audit: rec})
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &sweepRun{cancel: cancel}
	run.wg.Add(1)
	go func() {
		defer run.wg.Done()
		w.Run(ctx, every)
	}()
	return run
}

func (r *sweepRun) stop() {
	if r == nil {
		return
	}
	r.cancel()
	r.wg.Wait()
}
