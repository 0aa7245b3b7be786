package workspace

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// exportHead is what an export keeps of each item it will write: enough to order the
// bundle and rewrite references, never the content, which is read in pages as it is
// written.
type exportHead struct {
	id     int64
	typ    ItemType
	key    string
	parent int64
	bytes  int
	folder *string // the bundle folder it sits in (nil: the bundle's top level)
	depth  int     // folders: the level in the bundle
	manage bool    // the caller manages it: its grants and embed access are written
}

// exportPage bounds one read of content: items and their stored bytes.
const (
	exportPageItems = 100
	exportPageBytes = 8 << 20
	exportScanBatch = 1000
)

// Export writes the bundle of deploymentID's workspace, or of folder's subtree: the folders,
// reports and workbooks the caller can view, in a fixed order (folders parents first, by
// level then key; then reports by key; then workbooks by key), each naming others by key.
// An item without a key is given one, "<type>-<id>" (with a suffix should that be another
// item's key), so two exports of the same content are equal. A folder's grants and an
// object's embed grants are written only where the caller manages it, the root's only
// for an admin exporting the whole deployment. A dashboard's reference to a report the
// bundle does not hold (deleted, elsewhere, not visible) is left out.
func (s *service) Export(ctx context.Context, p *identity.Principal, deploymentID, folder int64, w io.Writer) (ExportSummary, error) {
	var sum ExportSummary
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return sum, err
	}
	if folder != 0 {
		if r, _, err = s.folderForRead(ctx, p, deploymentID, folder, LevelView, "export it"); err != nil {
			return sum, err
		}
		if err := r.needSubtree(ctx, folder); err != nil {
			return sum, err
		}
	} else if err := s.loadAllFolders(ctx, r); err != nil {
		return sum, err
	}
	embedOK := p.Credential == identity.CredentialBearer
	var folders []*exportHead
	for _, n := range r.tree.folders {
		if (folder == 0 || n.ID == folder || containsID(n.Anc, folder)) && r.tree.folderLevel(p, n.ID) >= LevelView {
			folders = append(folders, &exportHead{id: n.ID, typ: TypeFolder, parent: n.Parent, manage: r.tree.folderLevel(p, n.ID) >= LevelManage})
		}
	}
	if len(folders) > s.limits.ExportItems {
		return sum, s.exportTooMany(len(folders))
	}
	items, err := s.exportItems(ctx, r, folder, folders, len(folders))
	if err != nil {
		return sum, err
	}
	// Keys: the items' own, then one made for each item without.
	if err := s.exportKeys(ctx, r, folders); err != nil {
		return sum, err
	}
	var reports, books []*exportHead
	for _, h := range items {
		if h.typ == TypeReport {
			reports = append(reports, h)
		} else {
			books = append(books, h)
		}
	}
	assignKeys(folders)
	assignKeys(reports)
	assignKeys(books)
	folderKey := map[int64]*exportHead{}
	for _, h := range folders {
		folderKey[h.id] = h
	}
	var depth func(h *exportHead) int
	depth = func(h *exportHead) int {
		if h.depth == 0 {
			h.depth = 1
			if up := folderKey[h.parent]; up != nil && h.id != folder {
				h.folder, h.depth = &up.key, depth(up)+1
			}
		}
		return h.depth
	}
	for _, h := range folders {
		depth(h)
	}
	for _, h := range items {
		if up := folderKey[h.parent]; up != nil {
			h.folder = &up.key
		}
	}
	slices.SortFunc(folders, func(a, b *exportHead) int { return cmp.Or(cmp.Compare(a.depth, b.depth), cmp.Compare(a.key, b.key)) })
	byKey := func(a, b *exportHead) int { return cmp.Compare(a.key, b.key) }
	slices.SortFunc(reports, byKey)
	slices.SortFunc(books, byKey)
	estimate := int64(0)
	for _, h := range items {
		estimate += int64(max(h.bytes, 0)) + 256
	}
	estimate += int64(len(folders)) * 256
	if estimate > s.limits.ExportBytes {
		return sum, errs.New(errs.TooLarge, "the export would write about %d bytes, over the limit of %d bytes; export a folder at a time", estimate, s.limits.ExportBytes)
	}

	var root *embedaccess.Grants
	if folder == 0 && embedOK && p.HasRole(identity.RoleAdmin) {
		g, err := s.store.RootEmbedAccess(ctx, deploymentID)
		if err != nil {
			return sum, err
		}
		g = canonicalGrants(g)
		root = &g
		sum.RootEmbedAccess = true
	}
	// Nothing can refuse the export from here on: the bundle is written as it is read.
	cw := &countWriter{w: bufio.NewWriterSize(w, 64<<10)}
	head := struct {
		Format string              `json:"format"`
		Source BundleSource        `json:"source"`
		Root   *embedaccess.Grants `json:"rootEmbedAccess,omitempty"`
	}{Format: BundleFormat, Source: BundleSource{AccountID: p.Account.ID, DeploymentID: deploymentID, FolderID: optionalID(folder)}, Root: root}
	b, _ := json.Marshal(head)
	cw.write(b[:len(b)-1])
	cw.write([]byte(`,"items":[`))
	first := true
	emit := func(it *BundleItem) error {
		b, err := json.Marshal(it)
		if err != nil {
			return err
		}
		if !first {
			cw.write([]byte{','})
		}
		first = false
		cw.write([]byte{'\n'})
		cw.write(b)
		return cw.err
	}
	for _, h := range folders {
		n := r.tree.folders[h.id]
		it := BundleItem{Type: TypeFolder, Key: h.key, FolderKey: h.folder, Name: n.Name, Position: n.Position}
		if h.manage {
			g := sortedGrants(n.Grants)
			it.Grants = &g
			if embedOK {
				e := canonicalGrants(n.EmbedAccess)
				it.EmbedAccess = &e
			}
		}
		if err := emit(&it); err != nil {
			return sum, err
		}
		sum.Folders++
	}
	written := map[int64]string{} // report id -> key, for the reports written
	keyOf := func(id int64) (string, bool) { k, ok := written[id]; return k, ok }
	for _, group := range [][]*exportHead{reports, books} {
		for len(group) > 0 {
			n, size := 0, 0
			for n < len(group) && n < exportPageItems && (n == 0 || size+max(group[n].bytes, 0) <= exportPageBytes) {
				size += max(group[n].bytes, 0)
				n++
			}
			page := group[:n]
			group = group[n:]
			ids := make([]int64, len(page))
			for i, h := range page {
				ids[i] = h.id
			}
			docs, err := s.store.Items(ctx, deploymentID, ids, AllParts)
			if err != nil {
				return sum, err
			}
			for _, h := range page {
				d := docs[h.id]
				if d == nil || d.Type != h.typ {
					continue // deleted since: not in the bundle
				}
				it := bundleItemOf(d, h.key, h.folder, keyOf, h.manage && embedOK)
				if err := emit(&it); err != nil {
					return sum, err
				}
				if d.Type == TypeReport {
					written[d.ID] = h.key
					sum.Reports++
				} else {
					sum.Workbooks++
				}
			}
		}
	}
	cw.write([]byte("\n]}\n"))
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	sum.Bytes = cw.n
	return sum, cw.err
}

func (s *service) exportTooMany(n int) error {
	return errs.New(errs.TooLarge, "the export would hold more than %d items (it has reached %d), the limit of one export; export a folder at a time", s.limits.ExportItems, n)
}

// loadAllFolders puts every live folder of the deployment into r's tree: the ids by the
// search's pages, the heads (grants and embed grants included) by id.
func (s *service) loadAllFolders(ctx context.Context, r *request) error {
	var after *SearchKey
	for {
		batch, err := s.store.Search(ctx, r.deploymentID, SearchQuery{Type: TypeFolder, Sort: ByName, After: after, Limit: exportScanBatch})
		if err != nil {
			return err
		}
		if len(r.tree.folders)+len(batch) > s.limits.ExportItems {
			return s.exportTooMany(len(r.tree.folders) + len(batch))
		}
		ids := make([]int64, len(batch))
		for i, d := range batch {
			ids[i] = d.ID
		}
		docs, err := s.store.Items(ctx, r.deploymentID, ids, 0)
		if err != nil {
			return err
		}
		for _, id := range ids {
			r.addDocs(docs[id])
		}
		if len(batch) < exportScanBatch {
			return nil
		}
		last := batch[len(batch)-1]
		after = &SearchKey{Name: last.Name, ID: last.ID}
	}
}

// exportItems lists the heads of the workbooks and reports an export writes: those the
// caller can view, in the deployment (folder 0) or in the exported folders.
func (s *service) exportItems(ctx context.Context, r *request, folder int64, folders []*exportHead, counted int) ([]*exportHead, error) {
	var out []*exportHead
	add := func(batch []*Item) error {
		var parents []int64
		for _, d := range batch {
			parents = append(parents, d.Parent)
		}
		if err := r.need(ctx, parents...); err != nil {
			return err
		}
		for _, d := range batch {
			l := r.tree.itemLevel(r.p, d.CreatedBy, d.Parent)
			if l < LevelView {
				continue
			}
			if counted+len(out)+1 > s.limits.ExportItems {
				return s.exportTooMany(counted + len(out) + 1)
			}
			out = append(out, &exportHead{id: d.ID, typ: d.Type, key: d.Key, parent: d.Parent, bytes: d.Bytes, manage: l >= LevelManage})
		}
		return nil
	}
	if folder == 0 {
		for _, typ := range []ItemType{TypeReport, TypeWorkbook} {
			var after *SearchKey
			for {
				batch, err := s.store.Search(ctx, r.deploymentID, SearchQuery{Type: typ, Sort: ByName, After: after, Limit: exportScanBatch})
				if err != nil {
					return nil, err
				}
				if err := add(batch); err != nil {
					return nil, err
				}
				if len(batch) < exportScanBatch {
					break
				}
				last := batch[len(batch)-1]
				after = &SearchKey{Name: last.Name, ID: last.ID}
			}
		}
		return out, nil
	}
	for _, f := range folders {
		var after *ListKey
		for {
			batch, err := s.store.Children(ctx, r.deploymentID, ChildrenQuery{Parent: f.id, After: after, Limit: exportScanBatch})
			if err != nil {
				return nil, err
			}
			if err := add(batch); err != nil {
				return nil, err
			}
			if len(batch) < exportScanBatch {
				break
			}
			last := batch[len(batch)-1]
			after = &ListKey{Position: last.Position, Name: last.Name, ID: last.ID}
		}
	}
	return out, nil
}

// exportKeys reads the folders' keys (the tree's nodes do not carry them).
func (s *service) exportKeys(ctx context.Context, r *request, folders []*exportHead) error {
	for i := 0; i < len(folders); i += exportScanBatch {
		page := folders[i:min(i+exportScanBatch, len(folders))]
		ids := make([]int64, len(page))
		for j, h := range page {
			ids[j] = h.id
		}
		docs, err := s.store.Items(ctx, r.deploymentID, ids, 0)
		if err != nil {
			return err
		}
		for _, h := range page {
			if d := docs[h.id]; d != nil {
				h.key = d.Key
			}
		}
	}
	return nil
}

// assignKeys gives each head without a key "<type>-<id>", made unique among the keys of
// its type with a numbered suffix.
func assignKeys(hs []*exportHead) {
	taken := map[string]bool{}
	for _, h := range hs {
		if h.key != "" {
			taken[h.key] = true
		}
	}
	for _, h := range hs {
		if h.key != "" {
			continue
		}
		k := fmt.Sprintf("%s-%d", h.typ.lower(), h.id)
		for n := 2; taken[k]; n++ {
			k = fmt.Sprintf("%s-%d-%d", h.typ.lower(), h.id, n)
		}
		taken[k] = true
		h.key = k
	}
}

// bundleItemOf is a workbook or report as a bundle holds it; reportKey names the key of a
// report in the bundle by its id (false: not in it).
func bundleItemOf(d *Item, key string, folder *string, reportKey func(int64) (string, bool), embed bool) BundleItem {
	it := BundleItem{Type: d.Type, Key: key, FolderKey: folder, Name: d.Name, Position: d.Position,
		Meta: orNone(d.Meta), CalculatedFields: orNone(d.CalculatedFields)}
	if d.Type != TypeWorkbook {
		return it
	}
	if embed {
		g := canonicalGrants(d.EmbedAccess)
		it.EmbedAccess = &g
	}
	if d.Draft != nil {
		cfg := configToKeys(*d.Draft, reportKey)
		it.DashboardDraft = &cfg
	}
	if pd := d.Published; pd != nil {
		bd := BundleDashboard{Status: pd.Status, AllowEmbed: pd.AllowEmbed, Config: configToKeys(pd.Config, reportKey),
			ReportSnapshots: make([]BundleSnapshot, 0, len(pd.ReportSnapshots)), Description: pd.Description, Title: pd.Title,
			FromSharedWorkspace: pd.FromSharedWorkspace, RestrictDataDownload: pd.RestrictDataDownload, UseBoardDashboards: pd.UseBoardDashboards}
		for _, sn := range pd.ReportSnapshots {
			bs := BundleSnapshot{Name: sn.Name, Title: sn.Title, Description: sn.Description, SQLQuery: sn.SQLQuery, PythonCode: sn.PythonCode,
				Spec: orNone(sn.Spec), Meta: orNone(sn.Meta), IsSourceReport: sn.IsSourceReport, Kind: sn.Kind, FillMissingRows: sn.FillMissingRows,
				PeriodComparisons: sn.PeriodComparisons, Preferences: sn.Preferences}
			if k, ok := reportKey(sn.ReportID); ok {
				bs.ReportKey = &k
			}
			bd.ReportSnapshots = append(bd.ReportSnapshots, bs)
		}
		it.DashboardPublished = &bd
	}
	return it
}

// orNone is raw, or nil when it holds no value (JSON null).
func orNone(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// widgetReport is the report id a widget's config names (0: none).
func widgetReport(v any) int64 {
	switch n := v.(type) {
	case float64:
		if n > 0 && n == float64(int64(n)) {
			return int64(n)
		}
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}

// configToKeys is cfg with each widget's config.reportId replaced by config.reportKey
// (left out when the report is not in the bundle); cfg itself is not changed.
func configToKeys(cfg DashboardConfig, reportKey func(int64) (string, bool)) DashboardConfig {
	cfg.Widgets = slices.Clone(cfg.Widgets)
	for i, w := range cfg.Widgets {
		v, ok := w.Config[widgetReportIDField]
		if !ok {
			continue
		}
		c := make(map[string]any, len(w.Config))
		for k, x := range w.Config {
			c[k] = x
		}
		delete(c, widgetReportIDField)
		if k, ok := reportKey(widgetReport(v)); ok {
			c[widgetReportKeyField] = k
		}
		cfg.Widgets[i].Config = c
	}
	return cfg
}

// configToIDs is the reverse of configToKeys, with reportID naming each key's report in
// the target; cfg itself is not changed.
func configToIDs(cfg DashboardConfig, reportID func(string) int64) DashboardConfig {
	cfg.Widgets = slices.Clone(cfg.Widgets)
	for i, w := range cfg.Widgets {
		v, ok := w.Config[widgetReportKeyField]
		if !ok {
			continue
		}
		c := make(map[string]any, len(w.Config))
		for k, x := range w.Config {
			c[k] = x
		}
		delete(c, widgetReportKeyField)
		if k, _ := v.(string); reportID(k) > 0 {
			c[widgetReportIDField] = float64(reportID(k))
		}
		cfg.Widgets[i].Config = c
	}
	return cfg
}

// countWriter remembers the first write error and counts what was written.
type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	k, err := c.w.Write(b)
	c.n += int64(k)
	c.err = err
}
