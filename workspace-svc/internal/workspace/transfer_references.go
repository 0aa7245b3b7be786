package workspace

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/analyticsco/platform/libs/errs"
)

// dashboards checks a workbook's draft and published dashboard: valid as a save and a
// publish would find them, every report named by key.
func (c *bundleCheck) dashboards(i int, it *BundleItem) error {
	if d := it.DashboardDraft; d != nil {
		if err := d.Validate("dashboardDraft"); err != nil {
			return itemErr(i, it, "%s", errMessage(err))
		}
		if err := c.reportKeys(i, it, "dashboardDraft", d); err != nil {
			return err
		}
		if n, max := jsonBytes(d), c.s.limits.DraftBytes; n > max {
			return errs.New(errs.TooLarge, "bundle.items[%d] (%s %q): dashboardDraft is %d bytes, over the limit of %d bytes", i, it.Type, it.Key, n, max)
		}
	}
	if d := it.DashboardPublished; d != nil {
		if d.Status != StatusPublished && d.Status != StatusArchived {
			return itemErr(i, it, "dashboardPublished.status must be published or archived, not %q", d.Status)
		}
		if err := d.Config.Validate("dashboardPublished.config"); err != nil {
			return itemErr(i, it, "%s", errMessage(err))
		}
		if err := c.reportKeys(i, it, "dashboardPublished.config", &d.Config); err != nil {
			return err
		}
		for j, sn := range d.ReportSnapshots {
			if sn.ReportKey != nil {
				if err := ValidKey(*sn.ReportKey); err != nil {
					return itemErr(i, it, "dashboardPublished.reportSnapshots[%d].reportKey: %s", j, errMessage(err))
				}
				c.refReport(*sn.ReportKey, i)
			}
			for _, p := range []struct {
				field string
				raw   *json.RawMessage
			}{{"spec", &d.ReportSnapshots[j].Spec}, {"meta", &d.ReportSnapshots[j].Meta}} {
				if len(*p.raw) == 0 {
					continue
				}
				v, err := jsonObject(fmt.Sprintf("dashboardPublished.reportSnapshots[%d].%s", j, p.field), *p.raw)
				if err != nil {
					return itemErr(i, it, "%s", errMessage(err))
				}
				*p.raw = v
			}
		}
		if n, max := jsonBytes(d), c.s.limits.PublishedBytes; n > max {
			return errs.New(errs.TooLarge, "bundle.items[%d] (%s %q): dashboardPublished is %d bytes, over the limit of %d bytes", i, it.Type, it.Key, n, max)
		}
	}
	return nil
}

// reportKeys checks that a dashboard's widgets name reports by key (config.reportKey), not
// by a deployment's ids, and at most DashboardReports of them.
func (c *bundleCheck) reportKeys(i int, it *BundleItem, field string, cfg *DashboardConfig) error {
	distinct := map[string]bool{}
	for j, w := range cfg.Widgets {
		if _, ok := w.Config[widgetReportIDField]; ok {
			return itemErr(i, it, "%s.widgets[%d].config.reportId: a bundle names reports by config.reportKey, never by id", field, j)
		}
		v, ok := w.Config[widgetReportKeyField]
		if !ok {
			continue
		}
		k, isString := v.(string)
		if !isString {
			return itemErr(i, it, "%s.widgets[%d].config.reportKey must be a string", field, j)
		}
		if err := ValidKey(k); err != nil {
			return itemErr(i, it, "%s.widgets[%d].config.reportKey: %s", field, j, errMessage(err))
		}
		distinct[k] = true
		c.refReport(k, i)
	}
	if n := len(distinct); n > c.s.limits.DashboardReports {
		return itemErr(i, it, "%s names %d distinct reports (widgets' config.reportKey), over the limit of %d", field, n, c.s.limits.DashboardReports)
	}
	return nil
}

func (c *bundleCheck) refReport(key string, i int) {
	if _, ok := c.reportRefs[key]; !ok {
		c.reportRefs[key] = i
	}
}

// references checks, once every item is read, that each reference names an item of the
// bundle, that folders list their parent first and form no cycle, and how deep they nest.
func (c *bundleCheck) references() error {
	bad := func(i int, typ ItemType, key, format string, args ...any) *errs.Error {
		return errs.New(errs.Invalid, "bundle.items[%d] (%s %q): %s", i, typ, key, fmt.Sprintf(format, args...)).WithCode(errs.CodeBundleInvalid)
	}
	// Folders in bundle order: a parent listed earlier has its depth already.
	order := make([]string, len(c.folders))
	byIndex := map[int]string{}
	for k, f := range c.folders {
		byIndex[f.index] = k
	}
	order = order[:0]
	for i := 0; i < c.pi.Items; i++ {
		if k, ok := byIndex[i]; ok {
			order = append(order, k)
		}
	}
	for _, k := range order {
		f := c.folders[k]
		if f.parent == nil {
			f.depth = 1
		} else if p := c.folders[*f.parent]; p == nil {
			return bad(f.index, TypeFolder, k, "folderKey %q names no folder of the bundle", *f.parent)
		} else if p.depth == 0 {
			if cycle := c.cycleFrom(k); cycle != nil {
				return bad(f.index, TypeFolder, k, "the folders %s form a cycle", strings.Join(cycle, " -> ")).WithCode(errs.CodeFolderCycle)
			}
			return bad(f.index, TypeFolder, k, "its folder %q comes later in the bundle: a bundle lists a folder's parent before it", *f.parent)
		} else {
			f.depth = p.depth + 1
		}
		if f.depth > MaxDepth {
			return bad(f.index, TypeFolder, k, "it would be at level %d of the bundle: folders nest at most %d levels deep", f.depth, MaxDepth).WithCode(errs.CodeDepthLimit)
		}
		c.pi.Depth = max(c.pi.Depth, f.depth)
	}
	// The first item (in bundle order) with a dangling reference is the one named.
	first, msg := -1, ""
	for k, i := range c.folderRefs {
		if c.folders[k] == nil && (first < 0 || i < first) {
			first, msg = i, fmt.Sprintf("folderKey %q names no folder of the bundle", k)
		}
	}
	for k, i := range c.reportRefs {
		if _, ok := c.reports[k]; !ok && (first < 0 || i < first) {
			first, msg = i, fmt.Sprintf("reportKey %q names no report of the bundle", k)
		}
	}
	if first >= 0 {
		return errs.New(errs.Invalid, "bundle.items[%d]: %s", first, msg).WithCode(errs.CodeBundleInvalid)
	}
	return nil
}

// cycleFrom is the cycle of folder keys that k's parents lead back to (nil: none).
func (c *bundleCheck) cycleFrom(k string) []string {
	path := []string{fmt.Sprintf("%q", k)}
	seen := map[string]bool{k: true}
	for cur := c.folders[k]; cur != nil && cur.parent != nil; cur = c.folders[*cur.parent] {
		if *cur.parent == k {
			return append(path, path[0])
		}
		if seen[*cur.parent] {
			return nil // a cycle above k, reported at its own folder
		}
		seen[*cur.parent] = true
		path = append(path, fmt.Sprintf("%q", *cur.parent))
	}
	return nil
}
