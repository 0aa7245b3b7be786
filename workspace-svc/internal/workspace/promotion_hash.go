package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/analyticsco/platform/workspace-svc/internal/jcs"
)

// PromotionFormat is the version of the canonical content a promotion hash is taken of.
// The content (docs/promotion.md states it in full) is a JSON object
//
//	{"format": 1,
//	 "workbook": {"name", "meta", "calculatedFields", "dashboardDraft", "published"},
//	 "reports": [{"ref", "name", "meta", "calculatedFields"}, ...]}
//
// where meta and calculated fields are objects ({} when none), dashboardDraft is the
// draft ({} when none), published is the published dashboard's {"status", "allowEmbed",
// "config", "reportSnapshots"} while it is published (null otherwise), and every report
// id (a widget's config.reportId, a snapshot's reportId) is replaced by its report's
// ref: "r0", "r1", ... in the order the draft's widgets, then the published config's,
// then the snapshots name them (null for a report that does not go along: missing, or
// one the caller cannot view). Ids, times, users, versions and the publicId are left
// out, so a source and the target it was promoted to hash alike. The hash is the
// SHA-256, in lowercase hex, of the content's RFC 8785 (JCS) form.
const PromotionFormat = 1

// promotionContent is what a promotion copies of one deployment's workbook: the workbook
// in full and the reports it names that go along, in ref order.
type promotionContent struct {
	wb      *Item
	reports []*Item        // in ref order
	refs    map[int64]int  // report id -> index in reports
	skipped []int64        // report ids named that do not go along
	named   map[int64]bool // every report id named
}

// namedReports are the report ids wb names: its draft's widgets, its published config's,
// then its snapshots', each once.
func namedReports(wb *Item) []int64 {
	var ids []int64
	seen := map[int64]bool{}
	add := func(id int64) {
		if id > 0 && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if wb.Draft != nil {
		for _, id := range reportIDs(wb.Draft) {
			add(id)
		}
	}
	if d := wb.Published; d != nil {
		for _, id := range reportIDs(&d.Config) {
			add(id)
		}
		for _, s := range d.ReportSnapshots {
			add(s.ReportID)
		}
	}
	return ids
}

func newPromotionContent(wb *Item, reports map[int64]*Item) *promotionContent {
	c := &promotionContent{wb: wb, refs: map[int64]int{}, named: map[int64]bool{}}
	for _, id := range namedReports(wb) {
		c.named[id] = true
		if r := reports[id]; r != nil {
			c.refs[id] = len(c.reports)
			c.reports = append(c.reports, r)
		} else {
			c.skipped = append(c.skipped, id)
		}
	}
	return c
}

// ref is the canonical stand-in of report id: "r<index>", or nil when it does not go along.
func (c *promotionContent) ref(id int64) any {
	if i, ok := c.refs[id]; ok {
		return fmt.Sprintf("r%d", i)
	}
	return nil
}

// widgetReportID is a widget's config.reportId when it names a report (a positive integer).
func widgetReportID(w DashboardWidget) (int64, bool) {
	v, ok := w.Config["reportId"].(float64)
	if !ok || v <= 0 || v != float64(int64(v)) {
		return 0, false
	}
	return int64(v), true
}

// mapConfigReports is a deep copy of cfg whose widgets' config.reportId are replaced by
// to(id) (nil: the key is set to null).
func mapConfigReports(cfg *DashboardConfig, to func(int64) any) *DashboardConfig {
	if cfg == nil {
		return nil
	}
	var out DashboardConfig
	raw, _ := json.Marshal(cfg)
	_ = json.Unmarshal(raw, &out)
	for i, w := range out.Widgets {
		if id, ok := widgetReportID(w); ok {
			out.Widgets[i].Config["reportId"] = to(id)
		}
	}
	return &out
}

// generic is v as encoding/json's generic value.
func generic(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

func objectOrEmpty(raw json.RawMessage) json.RawMessage { return rawOrEmpty(raw) }

// canonicalReport is one report's part of the content (without its ref).
func canonicalReport(r *Item) map[string]any {
	return map[string]any{"name": r.Name, "meta": objectOrEmpty(r.Meta), "calculatedFields": objectOrEmpty(r.CalculatedFields)}
}

// canonicalPublished is the published part: null unless the dashboard is published.
func (c *promotionContent) canonicalPublished() any {
	d := c.wb.Published
	if d == nil || d.Status != StatusPublished {
		return nil
	}
	snaps := make([]any, 0, len(d.ReportSnapshots))
	for _, s := range d.ReportSnapshots {
		m, _ := generic(s).(map[string]any)
		delete(m, "id")
		delete(m, "versionNumber")
		m["reportId"] = c.ref(s.ReportID)
		snaps = append(snaps, m)
	}
	return map[string]any{"status": d.Status, "allowEmbed": d.AllowEmbed, "config": generic(mapConfigReports(&d.Config, c.ref)), "reportSnapshots": snaps}
}

// canonicalWorkbook is the workbook's part of the content.
func (c *promotionContent) canonicalWorkbook() map[string]any {
	draft := any(map[string]any{})
	if c.wb.Draft != nil {
		draft = generic(mapConfigReports(c.wb.Draft, c.ref))
	}
	return map[string]any{"name": c.wb.Name, "meta": objectOrEmpty(c.wb.Meta), "calculatedFields": objectOrEmpty(c.wb.CalculatedFields),
		"dashboardDraft": draft, "published": c.canonicalPublished()}
}

// hash is the promotion hash of the content.
func (c *promotionContent) hash() (string, error) {
	reports := make([]any, len(c.reports))
	for i, r := range c.reports {
		m := canonicalReport(r)
		m["ref"] = fmt.Sprintf("r%d", i)
		reports[i] = m
	}
	return hashOf(map[string]any{"format": PromotionFormat, "workbook": c.canonicalWorkbook(), "reports": reports})
}

// hashOf is the SHA-256, in hex, of v's canonical JSON.
func hashOf(v any) (string, error) {
	b, err := jcs.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// sameCanonical reports whether a and b have the same canonical JSON.
func sameCanonical(a, b any) bool {
	ha, err1 := hashOf(a)
	hb, err2 := hashOf(b)
	return err1 == nil && err2 == nil && ha == hb
}
