package workspace

import (
	"encoding/json"
	"strings"
)

// ItemType is the type of a workspace item.
type ItemType string

// The three workspace item types.
const (
	TypeFolder   ItemType = "FOLDER"
	TypeWorkbook ItemType = "WORKBOOK"
	TypeReport   ItemType = "REPORT"
)

// Valid reports whether t is one of the three types.
func (t ItemType) Valid() bool { return t == TypeFolder || t == TypeWorkbook || t == TypeReport }

// lower is the noun used in messages ("workbook 7 not found").
func (t ItemType) lower() string { return strings.ToLower(string(t)) }

// MaxDepth is the deepest level a folder may sit at; a folder at the root is level 1.
const MaxDepth = 8

// ItemRef names one item of a move.
type ItemRef struct {
	Type ItemType `json:"type"`
	ID   int64    `json:"id"`
}

// FolderPathEntry is one ancestor in a folderPath.
type FolderPathEntry struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// ResourceOwner is the creator of an item.
type ResourceOwner struct {
	ID        int64   `json:"id"`
	Email     string  `json:"email"`
	FirstName *string `json:"firstName"`
	Picture   *string `json:"picture"`
}

// Workbook is the representation of a workbook, and of any moved or listed item.
type Workbook struct {
	ID                 int64             `json:"id"`
	DeploymentID       int64             `json:"deploymentId"`
	Name               string            `json:"name"`
	Type               ItemType          `json:"type"`
	Key                *string           `json:"key"`
	Version            int64             `json:"version"`
	Meta               json.RawMessage   `json:"meta"`
	CalculatedFields   json.RawMessage   `json:"calculatedFields"`
	CreatedAt          string            `json:"createdAt"`
	UpdatedAt          string            `json:"updatedAt"`
	CreatedBy          int64             `json:"createdBy"`
	UserID             *int64            `json:"userId"`
	User               *ResourceOwner    `json:"user"`
	FolderID           *int64            `json:"folderId"`
	FolderPath         []FolderPathEntry `json:"folderPath"`
	Slug               *string           `json:"slug"`
	IsFavorite         *bool             `json:"isFavorite"`
	DashboardDraft     *DashboardConfig  `json:"dashboardDraft"`
	DashboardPublished *DashboardConfig  `json:"dashboardPublished"`
	PublishedDashboard *Dashboard        `json:"publishedDashboard"`
}

// ItemSummary is a listed item of any type: the Workbook shape without the parts that can
// be large (meta, calculated fields, dashboards), plus the item's position.
type ItemSummary struct {
	ID           int64             `json:"id"`
	DeploymentID int64             `json:"deploymentId"`
	Name         string            `json:"name"`
	Type         ItemType          `json:"type"`
	Key          *string           `json:"key"`
	Version      int64             `json:"version"`
	Position     float64           `json:"position"`
	CreatedAt    string            `json:"createdAt"`
	UpdatedAt    string            `json:"updatedAt"`
	CreatedBy    int64             `json:"createdBy"`
	UpdatedBy    int64             `json:"updatedBy"`
	UserID       *int64            `json:"userId"`
	User         *ResourceOwner    `json:"user"`
	FolderID     *int64            `json:"folderId"`
	FolderPath   []FolderPathEntry `json:"folderPath"`
	Slug         *string           `json:"slug"`
	IsFavorite   *bool             `json:"isFavorite"`
}

// Folder is the representation of a folder (creation, get, update).
type Folder struct {
	ID           int64             `json:"id"`
	DeploymentID int64             `json:"deploymentId"`
	Name         string            `json:"name"`
	Position     float64           `json:"position"`
	Type         ItemType          `json:"type"`
	Key          *string           `json:"key"`
	Version      int64             `json:"version"`
	CreatedAt    string            `json:"createdAt"`
	UpdatedAt    string            `json:"updatedAt"`
	CreatedBy    int64             `json:"createdBy"`
	UpdatedBy    int64             `json:"updatedBy"`
	ParentID     *int64            `json:"parentId"`
	FolderPath   []FolderPathEntry `json:"folderPath"`
	User         *ResourceOwner    `json:"user"`
	IsFavorite   *bool             `json:"isFavorite"`
}

// Dashboard is a workbook's published dashboard.
type Dashboard struct {
	ID                   int64            `json:"id"`
	PublicID             string           `json:"publicId"`
	DeploymentID         int64            `json:"deploymentId"`
	WorkbookID           int64            `json:"workbookId"`
	Status               string           `json:"status"`
	AllowEmbed           bool             `json:"allowEmbed"`
	Config               DashboardConfig  `json:"config"`
	VersionNumber        int64            `json:"versionNumber"`
	VersionID            int64            `json:"versionId"`
	ReportSnapshots      []ReportSnapshot `json:"reportSnapshots"`
	CreatedBy            *int64           `json:"createdBy"`
	UpdatedBy            *int64           `json:"updatedBy"`
	Description          *string          `json:"description"`
	Title                *string          `json:"title"`
	FromSharedWorkspace  *bool            `json:"fromSharedWorkspace"`
	RestrictDataDownload *bool            `json:"restrictDataDownload"`
	UseBoardDashboards   *bool            `json:"useBoardDashboards"`
}

// Dashboard statuses (a draft is the workbook's dashboardDraft, not a status it takes).
const (
	StatusPublished = "published"
	StatusArchived  = "archived"
)

// ReportSnapshot is the frozen state of a report inside a published dashboard.
type ReportSnapshot struct {
	ID                int64              `json:"id"`
	ReportID          int64              `json:"reportId"`
	VersionNumber     int64              `json:"versionNumber"`
	Name              *string            `json:"name"`
	Title             *string            `json:"title"`
	Description       *string            `json:"description"`
	SQLQuery          *string            `json:"sqlQuery"`
	PythonCode        *string            `json:"pythonCode"`
	Spec              json.RawMessage    `json:"spec"`
	Meta              json.RawMessage    `json:"meta"`
	IsSourceReport    *bool              `json:"isSourceReport"`
	Kind              *string            `json:"kind"`
	FillMissingRows   *FillMissingRows   `json:"fillMissingRows"`
	PeriodComparisons []PeriodComparison `json:"periodComparisons"`
	Preferences       *ReportPreferences `json:"preferences"`
}

// FillMissingRows of a report snapshot.
type FillMissingRows struct {
	Member             string   `json:"member"`
	ExcludedDimensions []string `json:"excludedDimensions,omitempty"`
}

// PeriodComparison of a report snapshot.
type PeriodComparison struct {
	Measure       string       `json:"measure"`
	TimeDimension string       `json:"timeDimension"`
	Offset        PeriodOffset `json:"offset"`
	Outputs       []string     `json:"outputs,omitempty"`
}

// PeriodOffset of a period comparison.
type PeriodOffset struct {
	Amount int64  `json:"amount"`
	Unit   string `json:"unit"`
}

// ReportPreferences of a report snapshot.
type ReportPreferences struct {
	ColumnFormats map[string]ColumnFormat `json:"columnFormats,omitempty"`
}

// ColumnFormat is the display format of one column.
type ColumnFormat struct {
	Type          string `json:"type"`
	DecimalPlaces *int64 `json:"decimalPlaces"`
}
