package workspace

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the domain counters of workspace-svc.
type Metrics struct {
	ItemsMoved          *prometheus.CounterVec
	FoldersCreated      prometheus.Counter
	TreeConflicts       prometheus.Counter
	DashboardsPublished prometheus.Counter
}

// NewMetrics registers the counters on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ItemsMoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workspace_svc_items_moved_total",
			Help: "Workspace items in single and bulk moves, by item type and outcome (moved, not_found, forbidden, invalid, busy).",
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
	}
	if reg != nil {
		reg.MustRegister(m.ItemsMoved, m.FoldersCreated, m.TreeConflicts, m.DashboardsPublished)
	}
	return m
}
