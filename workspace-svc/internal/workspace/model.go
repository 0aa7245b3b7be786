package workspace

import (
	"encoding/json"
	"fmt"
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

// Dashboard statuses.
const (
	StatusDraft     = "draft"
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

// DashboardConfig is a dashboard configuration; every field optional.
type DashboardConfig struct {
	Kind        *string             `json:"kind,omitempty"`
	Title       *string             `json:"title,omitempty"`
	Description *string             `json:"description,omitempty"`
	Layout      *DashboardLayout    `json:"layout,omitempty"`
	Widgets     []DashboardWidget   `json:"widgets,omitempty"`
	Settings    map[string]any      `json:"settings,omitempty"`
	Theme       map[string]any      `json:"theme,omitempty"`
	App         *DashboardAppSource `json:"app,omitempty"`
}

// DashboardLayout is the grid layout of a dashboard.
type DashboardLayout struct {
	Breakpoints      *BreakpointValues `json:"breakpoints,omitempty"`
	Cols             *BreakpointValues `json:"cols,omitempty"`
	ContainerPadding []int64           `json:"containerPadding,omitempty"`
	Margin           []int64           `json:"margin,omitempty"`
	RowHeight        *int64            `json:"rowHeight,omitempty"`
}

// BreakpointValues holds one integer per responsive breakpoint.
type BreakpointValues struct {
	LG  *int64 `json:"lg,omitempty"`
	MD  *int64 `json:"md,omitempty"`
	SM  *int64 `json:"sm,omitempty"`
	XS  *int64 `json:"xs,omitempty"`
	XXS *int64 `json:"xxs,omitempty"`
}

// DashboardAppSource is the source of an APP dashboard.
type DashboardAppSource struct {
	Entry    *string           `json:"entry,omitempty"`
	Files    map[string]string `json:"files,omitempty"`
	HTML     *string           `json:"html,omitempty"`
	Manifest *AppManifest      `json:"manifest,omitempty"`
}

// AppManifest lists an app dashboard's dependencies.
type AppManifest struct {
	Dependencies map[string]string `json:"dependencies,omitempty"`
	Version      *int64            `json:"version,omitempty"`
}

// DashboardWidget is one widget of a dashboard.
type DashboardWidget struct {
	ID                *string            `json:"id"`
	Type              *string            `json:"type"`
	Position          *WidgetPosition    `json:"position"`
	Config            map[string]any     `json:"config,omitempty"`
	Style             map[string]any     `json:"style,omitempty"`
	ResponsiveLayouts *ResponsiveLayouts `json:"responsiveLayouts,omitempty"`
}

// WidgetPosition places a widget on the grid; all four are required.
type WidgetPosition struct {
	X *int64 `json:"x"`
	Y *int64 `json:"y"`
	W *int64 `json:"w"`
	H *int64 `json:"h"`
}

// ResponsiveLayouts holds a widget position per breakpoint.
type ResponsiveLayouts struct {
	LG  *WidgetPosition `json:"lg,omitempty"`
	MD  *WidgetPosition `json:"md,omitempty"`
	SM  *WidgetPosition `json:"sm,omitempty"`
	XS  *WidgetPosition `json:"xs,omitempty"`
	XXS *WidgetPosition `json:"xxs,omitempty"`
}

var (
	dashboardKinds = []string{"CLASSIC", "APP"}
	widgetTypes    = []string{"CHART", "TEXT", "FILTER", "AI", "TIME_GRAIN", "FIELD", "PARENT", "SPACER", "DIVIDER", "CONTAINER"}
)

// MaxAppEntryLength is the longest `entry` of a dashboard app.
const MaxAppEntryLength = 255

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// Validate checks the enums and limits of a dashboard configuration; field names the
// JSON path of c in the request.
func (c *DashboardConfig) Validate(field string) error {
	if c == nil {
		return nil
	}
	if c.Kind != nil && !oneOf(*c.Kind, dashboardKinds) {
		return invalidf("%s.kind must be one of %s, not %q", field, strings.Join(dashboardKinds, ", "), *c.Kind)
	}
	if c.App != nil && c.App.Entry != nil && len([]rune(*c.App.Entry)) > MaxAppEntryLength {
		return invalidf("%s.app.entry must be at most %d characters", field, MaxAppEntryLength)
	}
	for i, w := range c.Widgets {
		wf := fmt.Sprintf("%s.widgets[%d]", field, i)
		switch {
		case w.ID == nil || *w.ID == "":
			return invalidf("%s.id is required", wf)
		case w.Type == nil:
			return invalidf("%s.type is required", wf)
		case !oneOf(*w.Type, widgetTypes):
			return invalidf("%s.type must be one of %s, not %q", wf, strings.Join(widgetTypes, ", "), *w.Type)
		case w.Position == nil:
			return invalidf("%s.position is required", wf)
		}
		if err := w.Position.validate(wf + ".position"); err != nil {
			return err
		}
		if r := w.ResponsiveLayouts; r != nil {
			for name, p := range map[string]*WidgetPosition{"lg": r.LG, "md": r.MD, "sm": r.SM, "xs": r.XS, "xxs": r.XXS} {
				if p != nil {
					if err := p.validate(wf + ".responsiveLayouts." + name); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func (p *WidgetPosition) validate(field string) error {
	for name, v := range map[string]*int64{"x": p.X, "y": p.Y, "w": p.W, "h": p.H} {
		if v == nil {
			return invalidf("%s.%s is required", field, name)
		}
	}
	return nil
}
