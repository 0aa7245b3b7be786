package workspace

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"math"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// lease holds a lease on folder (0: the root, none) for creating into it, renewed when a
// long import has held it for a while.
func (im *importer) lease(ctx context.Context, folder int64) error {
	if folder == 0 {
		return nil
	}
	now := im.s.now()
	if at, ok := im.leases[folder]; ok && now.Sub(at) < leaseTTL/4 {
		return nil
	}
	ok, err := im.s.store.LeaseFolder(ctx, im.r.deploymentID, folder, now, now.Add(leaseTTL))
	if err != nil {
		return err
	}
	if !ok {
		return notFound(TypeFolder, folder)
	}
	im.leases[folder] = now
	return nil
}

func (im *importer) releaseLeases(ctx context.Context) {
	for f := range im.leases {
		im.s.release(ctx, im.r.deploymentID, f)
	}
}

// create stores a new item with its key, then its grants, embed grants and published
// dashboard, each as its single request would.
func (im *importer) create(ctx context.Context, it *BundleItem, parent int64) (int64, error) {
	s, r, p := im.s, im.r, im.r.p
	var id int64
	var err error
	if it.Type == TypeFolder {
		id, err = im.createFolder(ctx, it, parent)
	} else {
		id, err = im.createItem(ctx, it, parent)
	}
	if err != nil {
		return 0, err
	}
	now := s.now()
	if it.Type == TypeFolder && it.Grants != nil && len(*it.Grants) > 0 {
		g := sortedGrants(*it.Grants)
		if _, err := s.store.UpdateItem(ctx, r.deploymentID, id, TypeFolder, ItemPrecondition{}, ItemUpdate{Grants: &g, UpdatedAt: now, UpdatedBy: p.User.ID}); err != nil {
			return id, err
		}
		if n := r.tree.folders[id]; n != nil {
			n.Grants = g
		}
	}
	if it.EmbedAccess != nil && !it.EmbedAccess.Empty() {
		if _, err := s.store.SetEmbedAccess(ctx, r.deploymentID, id, it.Type, canonicalGrants(*it.EmbedAccess), p.User.ID, now); err != nil {
			return id, err
		}
	}
	if it.DashboardPublished != nil {
		d := &Item{ID: id, Type: TypeWorkbook, Parent: parent}
		if err := im.publish(ctx, d, it.DashboardPublished); err != nil {
			return id, err
		}
	}
	return id, nil
}

// createFolder is CreateFolder with the item's key and position, its parent leased for
// the rest of the import.
func (im *importer) createFolder(ctx context.Context, it *BundleItem, parent int64) (int64, error) {
	s, r, p := im.s, im.r, im.r.p
	id, err := s.store.NextID(ctx)
	if err != nil {
		return 0, err
	}
	now := s.now()
	slotted := false
	err = r.commit(ctx, func(ctx context.Context) error { return r.need(ctx, parent) }, func(t *tree) (*TreeOp, error) {
		if parent != 0 && t.folders[parent] == nil {
			return nil, notFound(TypeFolder, parent)
		}
		if t.containerLevel(p, parent) < LevelEdit {
			return nil, errs.Forbiddenf("you need edit access to folder %d to create a folder in it", parent)
		}
		if lvl := t.level(parent) + 1; lvl > MaxDepth {
			return nil, errs.Invalidf("folder %d is at level %d: a folder in it would be at level %d, and folders nest at most %d levels deep", parent, lvl-1, lvl, MaxDepth).WithCode(errs.CodeDepthLimit)
		}
		if err := im.lease(ctx, parent); err != nil {
			return nil, err
		}
		if !slotted {
			if err := s.takeSlot(ctx, r.deploymentID); err != nil {
				return nil, err
			}
			slotted = true
		}
		anc, depth := t.ancestorsOf(parent)
		doc := &Item{ID: id, DeploymentID: r.deploymentID, Type: TypeFolder, Key: it.Key, Name: it.Name, Position: it.Position, Parent: parent,
			CreatedBy: p.User.ID, UpdatedBy: p.User.ID, CreatedAt: now, UpdatedAt: now, Anc: anc, Depth: depth}
		return &TreeOp{Kind: OpCreate, Folder: id, To: parent, By: p.User.ID, At: now, Created: doc}, nil
	})
	if err != nil {
		voided := errors.Is(err, ErrIDTaken) || errors.Is(err, ErrKeyTaken)
		if slotted && (!r.committing || voided) {
			s.returnSlot(ctx, r.deploymentID)
		}
		if errors.Is(err, ErrIDTaken) {
			return 0, idTaken(TypeFolder, id)
		}
		return 0, err
	}
	return id, nil
}

// createItem is CreateItem with the item's key and position.
func (im *importer) createItem(ctx context.Context, it *BundleItem, parent int64) (int64, error) {
	s, r, p := im.s, im.r, im.r.p
	if err := im.lease(ctx, parent); err != nil {
		return 0, err
	}
	if err := s.takeSlot(ctx, r.deploymentID); err != nil {
		return 0, err
	}
	id, err := s.store.NextID(ctx)
	if err != nil {
		s.returnSlot(ctx, r.deploymentID)
		return 0, err
	}
	now := s.now()
	d := &Item{ID: id, DeploymentID: r.deploymentID, Type: it.Type, Key: it.Key, Name: it.Name, Position: it.Position, Parent: parent,
		CreatedBy: p.User.ID, UpdatedBy: p.User.ID, CreatedAt: now, UpdatedAt: now, Meta: it.Meta, CalculatedFields: it.CalculatedFields}
	if it.DashboardDraft != nil {
		cfg := configToIDs(*it.DashboardDraft, im.reportID)
		d.Draft = &cfg
	}
	if err := s.store.InsertItem(ctx, d); err != nil {
		if errors.Is(err, ErrIDTaken) || errors.Is(err, ErrKeyTaken) {
			s.returnSlot(ctx, r.deploymentID)
		}
		if errors.Is(err, ErrIDTaken) {
			return 0, idTaken(it.Type, id)
		}
		return 0, err
	}
	return id, nil
}

// update applies the changes of a matched item, each as its single request would.
func (im *importer) update(ctx context.Context, it *BundleItem, have *Item, parent int64, c itemChanges) error {
	s, r, p := im.s, im.r, im.r.p
	if c.move {
		lease := &destLease{s: s, deploymentID: r.deploymentID, dest: parent}
		var err error
		if have.Type == TypeFolder {
			err = s.moveFolder(ctx, r, have, parent, lease)
		} else {
			err = s.moveItem(ctx, r, have, parent, lease, &moveAnswer{max: math.MaxInt, read: map[int64]bool{}})
		}
		lease.release(ctx)
		if err != nil {
			return err
		}
	}
	u := ItemUpdate{UpdatedAt: s.now(), UpdatedBy: p.User.ID}
	if c.name {
		u.Name = &it.Name
	}
	if c.position {
		u.Position = &it.Position
	}
	if c.grants {
		g := sortedGrants(*it.Grants)
		u.Grants = &g
	}
	if c.meta {
		u.Meta = it.Meta
	}
	if c.calculated {
		u.CalculatedFields = it.CalculatedFields
	}
	if c.draft {
		cfg := configToIDs(*it.DashboardDraft, im.reportID)
		u.Draft = &cfg
	}
	if c.name || c.position || c.grants || c.meta || c.calculated || c.draft {
		pre := ItemPrecondition{}
		if have.Type != TypeFolder {
			pre.Parent = &parent
		}
		nd, err := s.store.UpdateItem(ctx, r.deploymentID, have.ID, have.Type, pre, u)
		if err != nil {
			return err
		}
		if nd == nil {
			return errs.Conflictf("%s %d was moved or deleted during the change; retry", have.Type.lower(), have.ID)
		}
		if n := r.tree.folders[have.ID]; n != nil && have.Type == TypeFolder {
			n.Name, n.Position, n.Grants = nd.Name, nd.Position, nd.Grants
		}
		have.PublishedVersion = nd.PublishedVersion
	}
	if c.embed {
		ok, err := s.store.SetEmbedAccess(ctx, r.deploymentID, have.ID, have.Type, canonicalGrants(*it.EmbedAccess), p.User.ID, s.now())
		if err != nil {
			return err
		}
		if !ok {
			return notFound(have.Type, have.ID)
		}
	}
	if c.published {
		return im.publish(ctx, have, it.DashboardPublished)
	}
	return nil
}

// publish sets workbook d's published dashboard to bd, as a publish does: a new version,
// the workbook's dashboard id and public id kept (made at the first), a snapshot id each,
// its reports named by the target's ids.
func (im *importer) publish(ctx context.Context, d *Item, bd *BundleDashboard) error {
	s, r, p := im.s, im.r, im.r.p
	dashID, publicID := d.DashboardID, d.PublicID
	var err error
	if dashID == 0 {
		if dashID, err = s.store.NextID(ctx); err != nil {
			return err
		}
		var b [12]byte
		_, _ = rand.Read(b[:])
		publicID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	versionID, err := s.store.NextID(ctx)
	if err != nil {
		return err
	}
	version := d.PublishedVersion + 1
	snaps := make([]ReportSnapshot, 0, len(bd.ReportSnapshots))
	for _, bs := range bd.ReportSnapshots {
		sid, err := s.store.NextID(ctx)
		if err != nil {
			return err
		}
		sn := ReportSnapshot{ID: sid, VersionNumber: version, Name: bs.Name, Title: bs.Title, Description: bs.Description, SQLQuery: bs.SQLQuery,
			PythonCode: bs.PythonCode, Spec: bs.Spec, Meta: bs.Meta, IsSourceReport: bs.IsSourceReport, Kind: bs.Kind,
			FillMissingRows: bs.FillMissingRows, PeriodComparisons: bs.PeriodComparisons, Preferences: bs.Preferences}
		if bs.ReportKey != nil {
			sn.ReportID = im.reportID(*bs.ReportKey)
		}
		snaps = append(snaps, sn)
	}
	createdBy, updatedBy := p.User.ID, p.User.ID
	if d.Published != nil && d.Published.CreatedBy != nil {
		createdBy = *d.Published.CreatedBy
	}
	dash := Dashboard{ID: dashID, PublicID: publicID, DeploymentID: r.deploymentID, WorkbookID: d.ID, Status: bd.Status, AllowEmbed: bd.AllowEmbed,
		Config: configToIDs(bd.Config, im.reportID), VersionNumber: version, VersionID: versionID, ReportSnapshots: snaps,
		CreatedBy: &createdBy, UpdatedBy: &updatedBy, Description: bd.Description, Title: bd.Title,
		FromSharedWorkspace: bd.FromSharedWorkspace, RestrictDataDownload: bd.RestrictDataDownload, UseBoardDashboards: bd.UseBoardDashboards}
	if err := s.checkPublishedSize(d.ID, &dash); err != nil {
		return err
	}
	nd, err := s.store.UpdateItem(ctx, r.deploymentID, d.ID, TypeWorkbook, ItemPrecondition{PublishedVersion: &d.PublishedVersion},
		ItemUpdate{Published: &dash, UpdatedAt: s.now(), UpdatedBy: p.User.ID})
	if err != nil {
		return err
	}
	if nd == nil {
		return errs.Conflictf("workbook %d was published, moved or deleted during the import; retry", d.ID)
	}
	return nil
}

// root plans, and unless dry run applies, the root's embed grants: an admin's, with a
// user's bearer token, as PUT .../embed-access.
func (im *importer) root(ctx context.Context, g embedaccess.Grants) {
	s, r, p := im.s, im.r, im.r.p
	it := &BundleItem{Type: TypeRoot}
	have, err := s.store.RootEmbedAccess(ctx, r.deploymentID)
	if err != nil {
		im.entry(it, ImportConflict, 0, err)
		return
	}
	if sameGrants(canonicalGrants(have), canonicalGrants(g)) {
		im.entry(it, ImportUnchanged, 0, nil)
		return
	}
	if !im.embedOK {
		im.entry(it, ImportConflict, 0, errs.Forbiddenf("the workspace needs a user's bearer token"))
		return
	}
	if !p.HasRole(identity.RoleAdmin) {
		im.entry(it, ImportConflict, 0, errs.Forbiddenf("you need the admin role to change its embed access of the deployment's root"))
		return
	}
	if !im.pi.DryRun {
		if err := s.store.SetRootEmbedAccess(ctx, r.deploymentID, canonicalGrants(g), p.User.ID, s.now()); err != nil {
			im.entry(it, ImportConflict, 0, err)
			return
		}
	}
	im.entry(it, ImportUpdate, 0, nil)
}
