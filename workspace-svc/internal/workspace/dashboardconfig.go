package workspace

import (
	"fmt"
	"slices"
	"strings"

	"github.com/analyticsco/platform/libs/errs"
)

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

// Validate checks the enums and limits of a dashboard configuration; field names the
// JSON path of c in the request.
func (c *DashboardConfig) Validate(field string) error {
	if c == nil {
		return nil
	}
	if c.Kind != nil && !slices.Contains(dashboardKinds, *c.Kind) {
		return errs.Invalidf("%s.kind must be one of %s, not %q", field, strings.Join(dashboardKinds, ", "), *c.Kind)
	}
	if c.App != nil && c.App.Entry != nil && len([]rune(*c.App.Entry)) > MaxAppEntryLength {
		return errs.Invalidf("%s.app.entry must be at most %d characters", field, MaxAppEntryLength)
	}
	for i, w := range c.Widgets {
		wf := fmt.Sprintf("%s.widgets[%d]", field, i)
		switch {
		case w.ID == nil || *w.ID == "":
			return errs.Invalidf("%s.id is required", wf)
		case w.Type == nil:
			return errs.Invalidf("%s.type is required", wf)
		case !slices.Contains(widgetTypes, *w.Type):
			return errs.Invalidf("%s.type must be one of %s, not %q", wf, strings.Join(widgetTypes, ", "), *w.Type)
		case w.Position == nil:
			return errs.Invalidf("%s.position is required", wf)
		}
		if err := w.Position.validate(wf + ".position"); err != nil {
			return err
		}
		if r := w.ResponsiveLayouts; r != nil {
			// In a fixed order, so the error names the same breakpoint every time.
			for _, l := range []struct {
				name string
				p    *WidgetPosition
			}{{"lg", r.LG}, {"md", r.MD}, {"sm", r.SM}, {"xs", r.XS}, {"xxs", r.XXS}} {
				if l.p != nil {
					if err := l.p.validate(wf + ".responsiveLayouts." + l.name); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// validate requires x, y, w and h, checked in that order.
func (p *WidgetPosition) validate(field string) error {
	for _, c := range []struct {
		name string
		v    *int64
	}{{"x", p.X}, {"y", p.Y}, {"w", p.W}, {"h", p.H}} {
		if c.v == nil {
			return errs.Invalidf("%s.%s is required", field, c.name)
		}
	}
	return nil
}
