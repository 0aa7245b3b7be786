package workspace

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/analyticsco/platform/libs/audit"
)

// TrashSweeper purges what has been in the trash longer than the retention. MongoDB's
// TTL indexes would remove documents one by one (and the embedded FerretDB has none); a
// folder's trash is removed as one OpPurge, so the sweep goes through the service's own
// purge. Every pass is bounded (batches of sweepBatch roots, at most sweepBatches of
// them), and replicas may sweep at once: each root's purge is a conditional delete or
// a compare-and-set of the tree version, which exactly one of them wins.
type TrashSweeper struct {
	s *service
	o SweepOptions
}

// SweepOptions tune the retention sweep.
type SweepOptions struct {
	Retention time.Duration  // how long an item stays in the trash
	Logger    *slog.Logger   // nil: nothing logged
	Metrics   *Metrics       // nil: nothing counted
	Audit     audit.Recorder // nil: nothing recorded; else one event per root purged, by the system
}

const (
	sweepBatch   = 100
	sweepBatches = 10
)

// NewTrashSweeper builds the sweep over p's store.
func NewTrashSweeper(p Ports, o Options, so SweepOptions) *TrashSweeper {
	return &TrashSweeper{s: NewService(p, o).(*service), o: so}
}

// Sweep runs one bounded pass: the roots trashed before now minus the retention, oldest
// first, each purged with what was trashed with it. It answers how many it purged.
func (w *TrashSweeper) Sweep(ctx context.Context) (int, error) {
	cutoff := w.s.now().Add(-w.o.Retention)
	n := 0
	for range sweepBatches {
		roots, err := w.s.store.ExpiredTrashRoots(ctx, cutoff, sweepBatch)
		if err != nil {
			return n, err
		}
		progress := false
		for _, root := range roots {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			d := &Item{ID: root.ID, DeploymentID: root.DeploymentID, Type: root.Type}
			ictx, cancel := context.WithTimeout(ctx, writeDeadline)
			err := w.s.purgeRoot(ictx, root.DeploymentID, d)
			cancel()
			w.record(ctx, root, err)
			if err == nil {
				n++
				progress = true
			} else if w.o.Logger != nil {
				w.o.Logger.WarnContext(ctx, "trash sweep: purge failed", "deploymentId", root.DeploymentID, "type", root.Type, "id", root.ID, "error", err)
			}
		}
		if len(roots) < sweepBatch || !progress {
			break
		}
	}
	return n, nil
}

// Run sweeps every interval until ctx ends (the service's shutdown); it returns then.
func (w *TrashSweeper) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := w.Sweep(ctx)
		if w.o.Logger != nil && (n > 0 || (err != nil && ctx.Err() == nil)) {
			w.o.Logger.InfoContext(ctx, "trash swept", "purged", n, "error", errString(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// record audits and counts one root's purge by the sweep.
func (w *TrashSweeper) record(ctx context.Context, root TrashRoot, err error) {
	if w.o.Metrics != nil {
		outcome := "done"
		if err != nil {
			outcome = moveOutcome(err)
		}
		w.o.Metrics.Trash.Items.WithLabelValues("expire", string(root.Type), outcome).Inc()
	}
	if w.o.Audit == nil {
		return
	}
	ev := audit.New(nil, ItemAction(root.Type, "purge"), target(root.Type, root.ID))
	ev.Actor, ev.DeploymentID = audit.Actor{Type: audit.ActorSystem}, root.DeploymentID
	ev.Outcome = audit.OutcomeOf(err, http.StatusOK)
	ev.Details = map[string]any{"reason": "retention", "retentionSeconds": int64(w.o.Retention.Seconds())}
	w.o.Audit.Record(ctx, ev)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
