package workspace

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// Metrics are the domain counters of workspace-svc.
type Metrics struct {
	ItemsMoved          *prometheus.CounterVec
	FoldersCreated      prometheus.Counter
	TreeConflicts       prometheus.Counter // counted by the service itself (NewService)
	DashboardsPublished prometheus.Counter
	EmbedAccessChanges  *prometheus.CounterVec
	EmbedDashboardReads *prometheus.CounterVec
	Trash               *TrashMetrics
}

// NewMetrics registers the counters on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ItemsMoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workspace_svc_items_moved_total",
			Help: "Workspace items in single and bulk moves, by item type and outcome (moved, not_found, forbidden, invalid, busy, not_applied, other).",
		}, []string{"type", "outcome"}),
		FoldersCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "workspace_svc_folders_created_total",
			Help: "Folders created.",
		}),
		TreeConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "workspace_svc_tree_conflicts_total",
			Help: "Structural changes retried because another change of the same deployment's tree committed first.",
		}),
		DashboardsPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "workspace_svc_dashboards_published_total",
			Help: "Workbook dashboards published.",
		}),
		EmbedAccessChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workspace_svc_embed_access_changes_total",
			Help: "Changes of embed access grants, by the object they sit on (workbook, folder, root); a PUT of the grants already there is none.",
		}, []string{"object"}),
		EmbedDashboardReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workspace_svc_embed_dashboard_reads_total",
			Help: "Published dashboards asked for by embed sessions, by outcome (opened, not_found, forbidden, unavailable, other).",
		}, []string{"outcome"}),
	}
	m.Trash = newTrashMetrics()
	if reg != nil {
		reg.MustRegister(m.Trash.Items)
		reg.MustRegister(m.ItemsMoved, m.FoldersCreated, m.TreeConflicts, m.DashboardsPublished, m.EmbedAccessChanges, m.EmbedDashboardReads)
	}
	return m
}

// instrumentingMiddleware counts the domain outcomes of s from its results: folders
// created, dashboards published, and every item of a single or bulk move by type and
// outcome (nil m: no decorator). Tree conflicts happen inside the service's commit
// loop: NewService counts them.
func instrumentingMiddleware(m *Metrics) func(Service) Service {
	if m == nil {
		return nil
	}
	return func(next Service) Service { return &instrumenting{Service: next, m: m} }
}

type instrumenting struct {
	Service
	m *Metrics
}

// moveOutcome is the outcome label of an item that did not move.
func moveOutcome(err error) string {
	e, ok := errs.As(err)
	if !ok {
		return "other"
	}
	switch e.Kind {
	case errs.NotFound:
		return "not_found"
	case errs.Forbidden:
		return "forbidden"
	case errs.Invalid:
		return "invalid"
	case errs.Unavailable:
		if e.Code == errs.CodeNotApplied {
			return "not_applied"
		}
		return "busy"
	}
	return "other"
}

func (i *instrumenting) CreateFolder(ctx context.Context, p *identity.Principal, deploymentID int64, in CreateFolderInput) (Folder, error) {
	f, err := i.Service.CreateFolder(ctx, p, deploymentID, in)
	if err == nil {
		i.m.FoldersCreated.Inc()
	}
	return f, err
}

// Move counts its item: moved, or the outcome it was refused with.
// PutFolderByKey counts a folder the PUT created, as CreateFolder does.
func (i *instrumenting) PutFolderByKey(ctx context.Context, p *identity.Principal, deploymentID int64, key string, in PutFolderInput) (Folder, PutOutcome, error) {
	f, outcome, err := i.Service.PutFolderByKey(ctx, p, deploymentID, key, in)
	if err == nil && outcome == PutCreated {
		i.m.FoldersCreated.Inc()
	}
	return f, outcome, err
}

func (i *instrumenting) Move(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, dest int64) (MoveResult, error) {
	w, err := i.Service.Move(ctx, p, deploymentID, ref, dest)
	outcome := "moved"
	if err != nil {
		outcome = moveOutcome(err)
	}
	i.m.ItemsMoved.WithLabelValues(string(ref.Type), outcome).Inc()
	return w, err
}

// BulkMove counts each distinct item of the answer; a request refused as a whole (no
// item tried) counts nothing.
func (i *instrumenting) BulkMove(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, dest int64) (BulkMoveResult, error) {
	res, err := i.Service.BulkMove(ctx, p, deploymentID, refs, dest)
	if err == nil {
		for _, w := range res.Moved {
			i.m.ItemsMoved.WithLabelValues(string(w.Type), "moved").Inc()
		}
		for _, f := range res.Failed {
			i.m.ItemsMoved.WithLabelValues(string(f.Ref.Type), moveOutcome(f.Err)).Inc()
		}
	}
	return res, err
}

func (i *instrumenting) Publish(ctx context.Context, p *identity.Principal, deploymentID, id int64, allowEmbed *bool) (Workbook, error) {
	w, err := i.Service.Publish(ctx, p, deploymentID, id, allowEmbed)
	if err == nil {
		i.m.DashboardsPublished.Inc()
	}
	return w, err
}

// embedObjectLabel names the object embed grants sit on: workbook, folder or root.
func embedObjectLabel(obj EmbedObject) string {
	if obj.Root() {
		return "root"
	}
	return obj.Type.lower()
}

func (i *instrumenting) PutEmbedAccess(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject, g embedaccess.Grants) (EmbedAccessView, error) {
	v, err := i.Service.PutEmbedAccess(ctx, p, deploymentID, obj, g)
	if err == nil && v.Changed {
		i.m.EmbedAccessChanges.WithLabelValues(embedObjectLabel(obj)).Inc()
	}
	return v, err
}

// EmbedDashboard counts each read by its outcome: every dashboard the session may not
// open is one not_found.
func (i *instrumenting) EmbedDashboard(ctx context.Context, p *identity.Principal, publicID string) (Dashboard, error) {
	d, err := i.Service.EmbedDashboard(ctx, p, publicID)
	outcome := "opened"
	if err != nil {
		outcome = "other"
		if e, ok := errs.As(err); ok {
			switch e.Kind {
			case errs.NotFound:
				outcome = "not_found"
			case errs.Forbidden:
				outcome = "forbidden"
			case errs.Unavailable:
				outcome = "unavailable"
			}
		}
	}
	i.m.EmbedDashboardReads.WithLabelValues(outcome).Inc()
	return d, err
}
