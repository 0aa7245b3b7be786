package workspace

import (
	"context"
	"encoding/json"
	"io"

	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// BundleFormat names the bundle format export writes and import reads. An import refuses
// any other value (400 bundle_format) before it reads the rest of the bundle; a change of
// the format that an older reader would misread takes a new number.
const BundleFormat = "analytics-workspace-bundle/1"

// TransferService is the workspace as content: a folder's subtree, or a whole deployment,
// written out as a self-contained bundle (docs/content-as-code.md) and read back into a
// deployment, matching items by (type, key).
type TransferService interface {
	// Export writes the bundle of deploymentID (folder 0: the whole deployment; else that folder
	// with its subtree) to w as it reads it, in pages. Everything that can refuse the
	// export (access, limits) does so before the first byte; a store failure after it
	// leaves w with an unterminated bundle, which no reader takes for a whole one.
	Export(ctx context.Context, p *identity.Principal, deploymentID, folder int64, w io.Writer) (ExportSummary, error)
	// Import reads a request body {"bundle", "dryRun", "folderId"} from in.Body and plans
	// (dryRun) or applies it item by item.
	Import(ctx context.Context, p *identity.Principal, deploymentID int64, in ImportInput) (ImportResult, error)
}

// ExportSummary is what an export wrote: the counts the audit trail and the log record.
type ExportSummary struct {
	Folders, Workbooks, Reports int
	RootEmbedAccess             bool
	Bytes                       int64
}

// ImportInput is an import request: its body, read as a stream.
type ImportInput struct {
	Body io.Reader
}

// The actions of an import plan's entries.
const (
	ImportCreate    = "create"
	ImportUpdate    = "update"
	ImportUnchanged = "unchanged"
	ImportConflict  = "conflict"
)

// TypeRoot names the plan entry of the deployment root's embed grants.
const TypeRoot ItemType = "ROOT"

// ImportEntry is one item of an import's plan or outcome: what was (or would be) done
// with it, the target item's id when there is one, and for a conflict the error its own
// request would have been answered with.
type ImportEntry struct {
	Type   ItemType
	Key    string
	Action string
	ID     int64 // 0: none (a planned create, a conflict before any item)
	Err    error // a conflict's cause: an *errs.Error
}

// ImportResult is an import's answer: one entry per bundle item, folders first, then
// reports, then workbooks (each in bundle order), and the root's embed grants last.
type ImportResult struct {
	DryRun bool
	Items  []ImportEntry
	// GrantsDropped: the bundle comes from another account, so its folder grants (which
	// name that account's users) were not applied.
	GrantsDropped bool
	Folder        int64 // where the bundle's top-level items went (0: the root)
}

// Counts are the entries by action.
func (r ImportResult) Counts() map[string]int {
	out := map[string]int{ImportCreate: 0, ImportUpdate: 0, ImportUnchanged: 0, ImportConflict: 0}
	for _, e := range r.Items {
		out[e.Action]++
	}
	return out
}

// BundleSource says where a bundle was exported from. Only AccountID has a meaning on
// import: folder grants are applied only within the account they were exported from.
type BundleSource struct {
	AccountID    int64  `json:"accountId"`
	DeploymentID int64  `json:"deploymentId"`
	FolderID     *int64 `json:"folderId"`
}

// BundleItem is one folder, report or workbook of a bundle. It refers to other items by
// key only: its folder (FolderKey; null: the bundle's top level, which an import puts in
// its folderId or the root), a dashboard's reports (a widget's config.reportKey, a
// snapshot's reportKey). A part left out (grants, embedAccess, meta, calculatedFields,
// dashboardDraft, dashboardPublished) is left as the target has it.
type BundleItem struct {
	Type               ItemType            `json:"type"`
	Key                string              `json:"key"`
	FolderKey          *string             `json:"folderKey"`
	Name               string              `json:"name"`
	Position           float64             `json:"position"`
	Grants             *[]Grant            `json:"grants,omitempty"`
	EmbedAccess        *embedaccess.Grants `json:"embedAccess,omitempty"`
	Meta               json.RawMessage     `json:"meta,omitempty"`
	CalculatedFields   json.RawMessage     `json:"calculatedFields,omitempty"`
	DashboardDraft     *DashboardConfig    `json:"dashboardDraft,omitempty"`
	DashboardPublished *BundleDashboard    `json:"dashboardPublished,omitempty"`
}

// BundleDashboard is a workbook's published dashboard in a bundle: what a publish made,
// without its ids, version numbers and publishers (the target's own are kept or made).
type BundleDashboard struct {
	Status               string           `json:"status"`
	AllowEmbed           bool             `json:"allowEmbed"`
	Config               DashboardConfig  `json:"config"`
	ReportSnapshots      []BundleSnapshot `json:"reportSnapshots"`
	Description          *string          `json:"description,omitempty"`
	Title                *string          `json:"title,omitempty"`
	FromSharedWorkspace  *bool            `json:"fromSharedWorkspace,omitempty"`
	RestrictDataDownload *bool            `json:"restrictDataDownload,omitempty"`
	UseBoardDashboards   *bool            `json:"useBoardDashboards,omitempty"`
}

// BundleSnapshot is a report snapshot of a published dashboard: the report by key (null
// when the report is not in the bundle: the snapshot keeps its frozen content only).
type BundleSnapshot struct {
	ReportKey         *string            `json:"reportKey"`
	Name              *string            `json:"name,omitempty"`
	Title             *string            `json:"title,omitempty"`
	Description       *string            `json:"description,omitempty"`
	SQLQuery          *string            `json:"sqlQuery,omitempty"`
	PythonCode        *string            `json:"pythonCode,omitempty"`
	Spec              json.RawMessage    `json:"spec,omitempty"`
	Meta              json.RawMessage    `json:"meta,omitempty"`
	IsSourceReport    *bool              `json:"isSourceReport,omitempty"`
	Kind              *string            `json:"kind,omitempty"`
	FillMissingRows   *FillMissingRows   `json:"fillMissingRows,omitempty"`
	PeriodComparisons []PeriodComparison `json:"periodComparisons,omitempty"`
	Preferences       *ReportPreferences `json:"preferences,omitempty"`
}

// The widget config fields that name a report: by id in the workspace, by key in a
// bundle.
const (
	widgetReportIDField  = "reportId"
	widgetReportKeyField = "reportKey"
)
