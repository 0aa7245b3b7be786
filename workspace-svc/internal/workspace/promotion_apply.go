package workspace

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
)

// promoteReport creates or updates the target of source report src and returns its id.
func (s *service) promoteReport(ctx context.Context, pl *promotionPlan, src, t *Item) (int64, error) {
	target, now, by := pl.rt.deploymentID, s.now(), pl.rt.p.User.ID
	want := int64(0)
	if t != nil {
		want = t.ID
	} else {
		var err error
		if want, err = s.store.NextID(ctx); err != nil {
			return 0, err
		}
	}
	if was := pl.link.Reports[src.ID]; was != want {
		link, err := s.store.LinkPromotionReport(ctx, pl.src.wb.DeploymentID, pl.src.wb.ID, target, src.ID, was, want)
		if err != nil {
			return 0, err
		}
		if link.Reports[src.ID] != want {
			return 0, errs.Conflictf("report %d is being promoted into deployment %d by another request; retry", src.ID, target)
		}
		pl.link = link
	}
	if t != nil {
		if sameCanonical(canonicalReport(src), canonicalReport(t)) {
			return t.ID, nil
		}
		name := src.Name
		nd, err := s.store.UpdateItem(ctx, target, t.ID, TypeReport, ItemPrecondition{Parent: &t.Parent},
			ItemUpdate{Name: &name, Meta: objectOrEmpty(src.Meta), CalculatedFields: objectOrEmpty(src.CalculatedFields), UpdatedAt: now, UpdatedBy: by})
		if err != nil {
			return 0, err
		}
		if nd == nil {
			return 0, errs.Conflictf("report %d of deployment %d was moved or deleted during the promotion; retry", t.ID, target)
		}
		return t.ID, nil
	}
	id := want
	it := &Item{ID: id, DeploymentID: target, Type: TypeReport, Name: src.Name, Parent: pl.folder, CreatedBy: by, UpdatedBy: by,
		CreatedAt: now, UpdatedAt: now, Meta: objectOrEmpty(src.Meta), CalculatedFields: objectOrEmpty(src.CalculatedFields)}
	promotedKey(src, it)
	if err := s.insertInto(ctx, pl.rt, it); err != nil {
		return 0, err
	}
	return id, nil
}

// insertInto stores a new workbook or report in r's deployment, in it.Parent: the
// folder leased while it is written and one item slot taken (given back when nothing was
// stored).
func (s *service) insertInto(ctx context.Context, r *request, it *Item) error {
	deploymentID := r.deploymentID
	if it.Parent != 0 {
		now := s.now()
		ok, err := s.store.LeaseFolder(ctx, deploymentID, it.Parent, now, now.Add(leaseTTL))
		if err != nil {
			return err
		}
		if !ok {
			return notFound(TypeFolder, it.Parent)
		}
		defer s.release(ctx, deploymentID, it.Parent)
	}
	if err := s.takeSlot(ctx, deploymentID); err != nil {
		return err
	}
	if err := s.store.InsertItem(ctx, it); err != nil {
		if errors.Is(err, ErrIDTaken) {
			s.returnSlot(ctx, deploymentID)
			return idTaken(it.Type, it.ID)
		}
		if keyErr := insertKeyError(it, err); keyErr != nil {
			s.returnSlot(ctx, deploymentID)
			return keyErr
		}
		return err
	}
	return nil
}

// promoteWorkbook creates or updates the target workbook and publishes it when the
// preview says so; it answers the target workbook as stored.
func (s *service) promoteWorkbook(ctx context.Context, pl *promotionPlan, mapped map[int64]int64) (*Item, error) {
	target, by := pl.rt.deploymentID, pl.rt.p.User.ID
	src := pl.src.wb
	toTarget := func(id int64) any {
		if t, ok := mapped[id]; ok {
			return float64(t)
		}
		return nil
	}
	draft := mapConfigReports(src.Draft, toTarget)
	if draft == nil {
		draft = &DashboardConfig{}
	}
	if err := s.checkSizes(src.Meta, src.CalculatedFields, draft); err != nil {
		return nil, err
	}
	cur := pl.target
	if cur == nil {
		now := s.now()
		it := &Item{ID: pl.link.Workbook, DeploymentID: target, Type: TypeWorkbook, Name: src.Name, Parent: pl.folder, CreatedBy: by, UpdatedBy: by,
			CreatedAt: now, UpdatedAt: now, Meta: objectOrEmpty(src.Meta), CalculatedFields: objectOrEmpty(src.CalculatedFields), Draft: draft}
		promotedKey(src, it)
		if err := s.insertInto(ctx, pl.rt, it); err != nil {
			return nil, err
		}
		pl.rt.created = it.ID
		cur = it
	}
	u := ItemUpdate{UpdatedAt: s.now(), UpdatedBy: by}
	if pl.target != nil && pl.preview.Workbook.Action != ActionUnchanged {
		name := src.Name
		u.Name, u.Meta, u.CalculatedFields, u.Draft = &name, objectOrEmpty(src.Meta), objectOrEmpty(src.CalculatedFields), draft
	}
	if pl.preview.Publish {
		dash, err := s.promotedDashboard(ctx, cur, src.Published, toTarget, mapped, by)
		if err != nil {
			return nil, err
		}
		u.Published = dash
	}
	if u.Name == nil && u.Published == nil {
		return cur, nil
	}
	// A promoted publish is a kept version of the target's dashboard, recorded as a
	// publish's is (publishVersion): pending before the write, committed after it.
	var rec *DashboardVersion
	if u.Published != nil {
		rec = versionRecord(u.Published, by, u.UpdatedAt, 0)
		if err := s.store.InsertDashboardVersion(ctx, rec); errors.Is(err, ErrIDTaken) {
			return nil, errs.Unavailablef("the dashboard version id of workbook %d of deployment %d was handed out twice; retry", cur.ID, target)
		} else if err != nil {
			return nil, err
		}
	}
	nd, err := s.store.UpdateItem(ctx, target, cur.ID, TypeWorkbook, ItemPrecondition{Parent: &cur.Parent, PublishedVersion: &cur.PublishedVersion}, u)
	if err != nil {
		return nil, err // a record stays pending: committed later if the write was done
	}
	if nd == nil {
		if rec != nil {
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			_ = s.store.DropDashboardVersion(cctx, target, cur.ID, rec.VersionID)
		}
		return nil, errs.Conflictf("workbook %d of deployment %d was moved, deleted or published during the promotion; retry", cur.ID, target)
	}
	if rec != nil {
		s.settleVersion(ctx, nd)
	}
	return nd, nil
}

// promotedDashboard is the target's next published dashboard: the source's config and
// report snapshots (their report ids mapped to the target's), its allowEmbed, under the
// target's own dashboard id and publicId (new ones at the first publish).
func (s *service) promotedDashboard(ctx context.Context, cur *Item, src *Dashboard, toTarget func(int64) any, mapped map[int64]int64, by int64) (*Dashboard, error) {
	dashID, publicID := cur.DashboardID, cur.PublicID
	var err error
	if dashID == 0 {
		if dashID, err = s.store.NextID(ctx); err != nil {
			return nil, err
		}
		var b [12]byte
		_, _ = rand.Read(b[:])
		publicID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	versionID, err := s.store.NextID(ctx)
	if err != nil {
		return nil, err
	}
	version := cur.PublishedVersion + 1
	cfg := *mapConfigReports(&src.Config, toTarget)
	snaps := make([]ReportSnapshot, 0, len(src.ReportSnapshots))
	for _, sn := range src.ReportSnapshots {
		tid, ok := mapped[sn.ReportID]
		if !ok {
			continue // a report that did not go along
		}
		sid, err := s.store.NextID(ctx)
		if err != nil {
			return nil, err
		}
		sn.ID, sn.ReportID, sn.VersionNumber = sid, tid, version
		snaps = append(snaps, sn)
	}
	createdBy, updatedBy := by, by
	if prev := cur.Published; prev != nil && prev.CreatedBy != nil {
		createdBy = *prev.CreatedBy
	}
	dash := &Dashboard{ID: dashID, PublicID: publicID, DeploymentID: cur.DeploymentID, WorkbookID: cur.ID, Status: StatusPublished,
		AllowEmbed: src.AllowEmbed, Config: cfg, VersionNumber: version, VersionID: versionID, ReportSnapshots: snaps,
		CreatedBy: &createdBy, UpdatedBy: &updatedBy, Title: cfg.Title, Description: cfg.Description}
	if err := s.checkPublishedSize(cur.ID, dash); err != nil {
		return nil, err
	}
	return dash, nil
}
