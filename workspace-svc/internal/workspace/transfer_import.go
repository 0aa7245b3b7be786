package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// importBatch is how many bundle items an import matches against the target at once:
// one ItemsByKey read.
const importBatch = MaxKeysPerRead

// importer is the state of an import once its body has passed the checks: the bundle's
// keys mapped to the target's ids (bounded by the import's item limit), the folders
// leased for creating into, and the answer so far.
type importer struct {
	s        *service
	r        *request
	pi       *parsedImport
	res      *ImportResult
	grantsOK bool
	embedOK  bool
	// folders and reports map a bundle key to the target's id (0: planned, not created:
	// a dry run, or an item that failed, which failed also holds).
	folders, reports map[string]int64
	failed           map[ItemType]map[string]bool
	reportKeys       map[int64]string // the target's report id -> its bundle key
	leases           map[int64]time.Time
}

// Import checks the whole body first (checkImport: any problem is the request's 4xx and
// nothing is written), then takes the bundle's folders (in bundle order, parents first),
// its reports, then its workbooks, importBatch at a time: each is matched by (type, key)
// with the target's live items and planned as create, update (its content, place,
// grants or embed grants differ), unchanged (equal: nothing written) or conflict (its
// own request would be refused: the error says why). Without dryRun each planned item is
// applied as its own writes, like a bulk move's items: a failure does not undo the
// others, and an item whose folder or report failed fails too.
func (s *service) Import(ctx context.Context, p *identity.Principal, deploymentID int64, in ImportInput) (ImportResult, error) {
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return ImportResult{}, err
	}
	pi, err := s.checkImport(in.Body)
	if err != nil {
		return ImportResult{}, err
	}
	defer pi.Close()
	res := ImportResult{DryRun: pi.DryRun, Items: []ImportEntry{}, Folder: pi.FolderID}
	if pi.FolderID != 0 {
		if r, _, err = s.folderForRead(ctx, p, deploymentID, pi.FolderID, LevelView, "import into it"); err != nil {
			return ImportResult{}, err
		}
		if lvl := r.tree.level(pi.FolderID) + pi.Depth; pi.Depth > 0 && lvl > MaxDepth {
			return ImportResult{}, errs.Invalidf("folder %d is at level %d: the bundle's folders, %d levels deep, would reach level %d, and folders nest at most %d levels deep",
				pi.FolderID, r.tree.level(pi.FolderID), pi.Depth, lvl, MaxDepth).WithCode(errs.CodeDepthLimit)
		}
	}
	im := &importer{s: s, r: r, pi: pi, res: &res, embedOK: p.Credential == identity.CredentialBearer,
		grantsOK: pi.Source != nil && pi.Source.AccountID == p.Account.ID,
		folders:  map[string]int64{}, reports: map[string]int64{}, reportKeys: map[int64]string{}, leases: map[int64]time.Time{},
		failed: map[ItemType]map[string]bool{TypeFolder: {}, TypeReport: {}, TypeWorkbook: {}}}
	defer im.releaseLeases(ctx)
	for _, typ := range []ItemType{TypeFolder, TypeReport, TypeWorkbook} {
		var batch []*BundleItem
		err := pi.each(func(_ int, it *BundleItem) error {
			if it.Type != typ {
				return nil
			}
			if it.Grants != nil && !im.grantsOK {
				res.GrantsDropped = true
				it.Grants = nil
			}
			batch = append(batch, it)
			if len(batch) < importBatch {
				return nil
			}
			err := im.batch(ctx, typ, batch)
			batch = nil
			return err
		})
		if err == nil && len(batch) > 0 {
			err = im.batch(ctx, typ, batch)
		}
		if err != nil {
			return ImportResult{}, err
		}
	}
	if pi.Root != nil && pi.FolderID == 0 {
		im.root(ctx, *pi.Root)
	}
	return res, nil
}

// entry records one item's outcome.
func (im *importer) entry(it *BundleItem, action string, id int64, err error) {
	e := ImportEntry{Type: it.Type, Key: it.Key, Action: action, ID: id}
	if err != nil {
		e.Action, e.Err = ImportConflict, asClientError(err)
		im.failed[it.Type][it.Key] = true
	}
	im.res.Items = append(im.res.Items, e)
}

// asClientError is err as its single request would answer it: a domain error as it is,
// ErrKeyTaken as a 409, a store failure as a 503 that says the item was not applied.
func asClientError(err error) error {
	if e, ok := errs.As(err); ok {
		return e
	}
	if errors.Is(err, ErrKeyTaken) {
		return errs.Conflictf("another live item of this type holds the key").WithCode(errs.CodeKeyTaken)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return notAppliedf("the item may not have been imported: its deadline passed; import again")
	}
	return notAppliedf("the item may not have been imported: the workspace store failed; import again")
}

// parentOf is the target folder an item goes in: its bundle folder's id, or the import's
// folderId for the top level; planned when that folder is only planned (a dry run's
// create), failed when it was not imported.
func (im *importer) parentOf(it *BundleItem) (id int64, planned bool, err error) {
	if it.FolderKey == nil {
		return im.pi.FolderID, false, nil
	}
	k := *it.FolderKey
	if im.failed[TypeFolder][k] {
		return 0, false, errs.Conflictf("its folder %q was not imported", k)
	}
	id = im.folders[k]
	return id, id == 0, nil
}

// batch plans, and unless dry run applies, a batch of items of one type.
func (im *importer) batch(ctx context.Context, typ ItemType, batch []*BundleItem) error {
	s, r := im.s, im.r
	keys := make([]string, len(batch))
	for i, it := range batch {
		keys[i] = it.Key
	}
	heads, err := s.store.ItemsByKey(ctx, r.deploymentID, typ, keys, 0)
	if err != nil {
		return err
	}
	if typ != TypeFolder {
		if heads, err = im.withContent(ctx, heads); err != nil {
			return err
		}
	}
	var chains []int64
	for _, it := range batch {
		if d := heads[it.Key]; d != nil {
			r.addDocs(d)
			chains = append(chains, d.Parent)
			if d.Type == TypeFolder {
				chains = append(chains, d.ID)
			}
		}
		if parent, planned, err := im.parentOf(it); err == nil && !planned {
			chains = append(chains, parent)
		}
	}
	if err := r.need(ctx, chains...); err != nil {
		return err
	}
	users := []int64{}
	for _, d := range heads {
		users = append(users, d.CreatedBy)
	}
	if _, err := s.usersFor(ctx, r, users); err != nil {
		return err
	}
	for _, it := range batch {
		ictx, cancel := context.WithTimeout(ctx, writeDeadline)
		im.one(ictx, it, heads[it.Key])
		cancel()
	}
	return nil
}

// withContent reads the large parts of the matched workbooks and reports, in reads no
// larger than exportPageBytes by their stored sizes.
func (im *importer) withContent(ctx context.Context, heads map[string]*Item) (map[string]*Item, error) {
	out := make(map[string]*Item, len(heads))
	var ids []int64
	size := 0
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		docs, err := im.s.store.Items(ctx, im.r.deploymentID, ids, AllParts)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if d.Key != "" {
				out[d.Key] = d
			}
		}
		ids, size = ids[:0], 0
		return nil
	}
	keys := make([]string, 0, len(heads))
	for k := range heads {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		d := heads[k]
		if len(ids) > 0 && size+max(d.Bytes, 0) > exportPageBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		ids, size = append(ids, d.ID), size+max(d.Bytes, 0)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func (im *importer) one(ctx context.Context, it *BundleItem, have *Item) {
	parent, planned, err := im.parentOf(it)
	if err == nil {
		err = im.reportsImported(it)
	}
	if err != nil {
		id := int64(0)
		if have != nil {
			id = have.ID
		}
		im.entry(it, ImportConflict, id, err)
		return
	}
	if have == nil {
		if err := im.canCreate(it, parent, planned); err != nil {
			im.entry(it, ImportConflict, 0, err)
			return
		}
		if im.pi.DryRun {
			im.entry(it, ImportCreate, 0, nil)
			return
		}
		id, err := im.create(ctx, it, parent)
		if err == nil {
			im.mapped(it, id)
		}
		im.entry(it, ImportCreate, id, err)
		return
	}
	ch := im.changes(it, have, parent, planned)
	if !ch.any() {
		im.mapped(it, have.ID)
		im.entry(it, ImportUnchanged, have.ID, nil)
		return
	}
	if err := im.canUpdate(it, have, ch); err != nil {
		im.entry(it, ImportConflict, have.ID, err)
		return
	}
	if im.pi.DryRun {
		im.mapped(it, have.ID)
		im.entry(it, ImportUpdate, have.ID, nil)
		return
	}
	err = im.update(ctx, it, have, parent, ch)
	if err == nil {
		im.mapped(it, have.ID)
	}
	im.entry(it, ImportUpdate, have.ID, err)
}

// mapped records the target's id of a bundle item (0 in a dry run's create).
func (im *importer) mapped(it *BundleItem, id int64) {
	switch it.Type {
	case TypeFolder:
		im.folders[it.Key] = id
	case TypeReport:
		im.reports[it.Key] = id
		if id != 0 {
			im.reportKeys[id] = it.Key
		}
	}
}

// reportsImported refuses a workbook whose dashboards name a report that was not
// imported: its widgets would lose their report.
func (im *importer) reportsImported(it *BundleItem) error {
	var cfgs []*DashboardConfig
	if it.DashboardDraft != nil {
		cfgs = append(cfgs, it.DashboardDraft)
	}
	if it.DashboardPublished != nil {
		cfgs = append(cfgs, &it.DashboardPublished.Config)
		for _, sn := range it.DashboardPublished.ReportSnapshots {
			if sn.ReportKey != nil && im.failed[TypeReport][*sn.ReportKey] {
				return errs.Conflictf("its report %q was not imported", *sn.ReportKey)
			}
		}
	}
	for _, cfg := range cfgs {
		for _, w := range cfg.Widgets {
			if k, ok := w.Config[widgetReportKeyField].(string); ok && im.failed[TypeReport][k] {
				return errs.Conflictf("its report %q was not imported", k)
			}
		}
	}
	return nil
}

// reportID is the target's id of a bundle report (0: none, or only planned).
func (im *importer) reportID(key string) int64 { return im.reports[key] }

func (im *importer) targetReportKey(id int64) (string, bool) {
	k, ok := im.reportKeys[id]
	return k, ok
}

// itemChanges is what differs between a bundle item and its target.
type itemChanges struct {
	name, position, move, grants, embed, meta, calculated, draft, published bool
}

func (c itemChanges) any() bool {
	return c.name || c.position || c.move || c.grants || c.embed || c.meta || c.calculated || c.draft || c.published
}

// changes compares a bundle item with the target item it matched: only the parts the
// bundle holds count (a part it leaves out is left as it is).
func (im *importer) changes(it *BundleItem, have *Item, parent int64, planned bool) itemChanges {
	c := itemChanges{name: it.Name != have.Name, position: it.Position != have.Position, move: planned || parent != have.Parent}
	if it.Grants != nil {
		c.grants = !slices.Equal(sortedGrants(*it.Grants), sortedGrants(have.Grants))
	}
	if it.EmbedAccess != nil {
		c.embed = !sameGrants(canonicalGrants(*it.EmbedAccess), canonicalGrants(have.EmbedAccess))
	}
	if it.Type == TypeFolder {
		return c
	}
	c.meta = it.Meta != nil && !sameJSON(it.Meta, have.Meta)
	c.calculated = it.CalculatedFields != nil && !sameJSON(it.CalculatedFields, have.CalculatedFields)
	if it.DashboardDraft != nil {
		c.draft = have.Draft == nil || !sameValue(*it.DashboardDraft, configToKeys(*have.Draft, im.targetReportKey))
	}
	if it.DashboardPublished != nil {
		c.published = have.Published == nil
		if !c.published {
			now := bundleItemOf(have, it.Key, nil, im.targetReportKey, false)
			c.published = !sameValue(*it.DashboardPublished, *now.DashboardPublished)

		}
	}
	return c
}

// sameJSON reports whether two JSON documents hold the same value (key order aside).
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// sameValue reports whether two values encode to the same JSON value.
func sameValue[T any](a, b T) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && sameJSON(x, y)
}

// canCreate is what the single create would refuse: edit on the folder it goes in (the
// root: ai_bi_user); embed grants need a user's bearer token (the creator manages it).
func (im *importer) canCreate(it *BundleItem, parent int64, planned bool) error {
	p, t := im.r.p, im.r.tree
	if !p.HasRole(identity.RoleAIBIUser) {
		return errs.Forbiddenf("creating a %s needs the ai_bi_user role or higher", it.Type.lower())
	}
	if it.EmbedAccess != nil && !it.EmbedAccess.Empty() && !im.embedOK {
		return errs.Forbiddenf("the workspace needs a user's bearer token")
	}
	if planned {
		return nil // a folder this dry run creates: the caller will be its creator
	}
	if parent != 0 && t.folders[parent] == nil {
		return notFound(TypeFolder, parent)
	}
	if t.containerLevel(p, parent) < LevelEdit {
		if parent == 0 {
			return errs.Forbiddenf("creating a %s at the workspace root needs the ai_bi_user role or higher", it.Type.lower())
		}
		return errs.Forbiddenf("you need edit access to folder %d to create a %s in it", parent, it.Type.lower())
	}
	return nil
}

// canUpdate is what the single requests of the changes would refuse: edit on the item
// for its content and place, manage for its grants and embed grants.
func (im *importer) canUpdate(it *BundleItem, have *Item, c itemChanges) error {
	p, t := im.r.p, im.r.tree
	var lvl Level
	if have.Type == TypeFolder {
		lvl = t.folderLevel(p, have.ID)
	} else {
		lvl = t.itemLevel(p, have.CreatedBy, have.Parent)
	}
	if lvl < LevelEdit {
		return errs.Forbiddenf("you need edit access to %s %d to change it", have.Type.lower(), have.ID)
	}
	if (c.grants || c.embed) && lvl < LevelManage {
		return errs.Forbiddenf("you need manage access to %s %d to change its grants", have.Type.lower(), have.ID)
	}
	if c.embed && !im.embedOK {
		return errs.Forbiddenf("the workspace needs a user's bearer token")
	}
	return nil
}
