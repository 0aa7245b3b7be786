package workspace

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// Publish turns a workbook's dashboard draft into its published dashboard: a new
// version number and version id, the same dashboard id and public id as before, and a
// snapshot of each report that a widget refers to by `config.reportId`.
// The dashboard's createdBy stays its first publisher and updatedBy is the last;
// allowEmbed is what the publish says, else what the previous version had (true at first).
func (s *service) Publish(ctx context.Context, p *identity.Principal, dep, id int64, allowEmbed *bool) (Workbook, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		r, d, err := s.itemForAccess(ctx, p, dep, TypeWorkbook, id, LevelEdit, "publish it")
		if err != nil {
			return Workbook{}, err
		}
		if d.Draft == nil {
			return Workbook{}, conflictf("workbook %d has no dashboard draft to publish", id)
		}
		cfg := *d.Draft
		dashID, publicID := d.DashboardID, d.PublicID
		if dashID == 0 {
			if dashID, err = s.store.NextID(ctx); err != nil {
				return Workbook{}, err
			}
			var b [12]byte
			_, _ = rand.Read(b[:])
			publicID = base64.RawURLEncoding.EncodeToString(b[:])
		}
		versionID, err := s.store.NextID(ctx)
		if err != nil {
			return Workbook{}, err
		}
		version := d.PublishedVersion + 1
		snaps, err := s.snapshotReports(ctx, r, cfg, version)
		if err != nil {
			return Workbook{}, err
		}
		createdBy, updatedBy, embed := p.User.ID, p.User.ID, true
		if prev := d.Published; prev != nil {
			if prev.CreatedBy != nil {
				createdBy = *prev.CreatedBy
			}
			embed = prev.AllowEmbed
		}
		if allowEmbed != nil {
			embed = *allowEmbed
		}
		dash := Dashboard{ID: dashID, PublicID: publicID, DeploymentID: dep, WorkbookID: id, Status: StatusPublished,
			AllowEmbed: embed, Config: cfg, VersionNumber: version, VersionID: versionID, ReportSnapshots: snaps,
			CreatedBy: &createdBy, UpdatedBy: &updatedBy, Title: cfg.Title, Description: cfg.Description}
		if err := s.checkPublishedSize(id, &dash); err != nil {
			return Workbook{}, err
		}
		nd, err := s.store.UpdateItem(ctx, dep, id, TypeWorkbook, ItemPrecondition{PublishedVersion: &d.PublishedVersion},
			ItemUpdate{Published: &dash, UpdatedAt: s.now(), UpdatedBy: p.User.ID})
		if err != nil {
			return Workbook{}, err
		}
		if nd == nil {
			continue // published or moved concurrently: start over
		}
		out, err := s.render(ctx, r, []*Item{nd})
		if err != nil {
			return Workbook{}, err
		}
		return out[0], nil
	}
	return Workbook{}, busyf("workbook %d kept changing during the publish; retry", id)
}

// Unpublish archives a workbook's published dashboard (status archived; the version
// stays, and a later publish makes it published again). Archiving an archived dashboard
// changes nothing. It needs edit on the workbook.
func (s *service) Unpublish(ctx context.Context, p *identity.Principal, dep, id int64) (Workbook, error) {
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		r, d, err := s.itemForAccess(ctx, p, dep, TypeWorkbook, id, LevelEdit, "unpublish it")
		if err != nil {
			return Workbook{}, err
		}
		if d.Published == nil {
			return Workbook{}, conflictf("workbook %d has no published dashboard to unpublish", id)
		}
		nd := d
		if d.Published.Status != StatusArchived {
			by := p.User.ID
			dash := *d.Published
			dash.Status, dash.UpdatedBy = StatusArchived, &by
			if nd, err = s.store.UpdateItem(ctx, dep, id, TypeWorkbook, ItemPrecondition{PublishedVersion: &d.PublishedVersion},
				ItemUpdate{Published: &dash, UpdatedAt: s.now(), UpdatedBy: by}); err != nil {
				return Workbook{}, err
			}
			if nd == nil {
				continue // published again meanwhile: start over
			}
		}
		out, err := s.render(ctx, r, []*Item{nd})
		if err != nil {
			return Workbook{}, err
		}
		return out[0], nil
	}
	return Workbook{}, busyf("workbook %d kept changing during the unpublish; retry", id)
}

// checkPublishedSize refuses a published dashboard over its limit. The draft's own limit
// does not bound it: each snapshot copies its report's meta, and a draft's widgets can
// name any number of reports.
func (s *service) checkPublishedSize(workbook int64, dash *Dashboard) error {
	b, _ := json.Marshal(dash) // built from decoded JSON, so it encodes
	if len(b) > s.limits.PublishedBytes {
		return errs.New(errs.TooLarge, "the published dashboard of workbook %d would be %d bytes, over the limit of %d bytes (WORKSPACE_MAX_PUBLISHED_BYTES): its widgets name more reports (or larger ones) than one dashboard holds",
			workbook, len(b), s.limits.PublishedBytes)
	}
	return nil
}

// snapshotReports copies each report a widget names into the published dashboard, but
// only reports the publisher can view: the others are left out of the snapshot, so a
// publish never reveals a report in a folder the publisher cannot see.
func (s *service) snapshotReports(ctx context.Context, r *request, cfg DashboardConfig, version int64) ([]ReportSnapshot, error) {
	p, dep := r.p, r.dep
	var ids []int64
	for _, w := range cfg.Widgets {
		if v, ok := w.Config["reportId"].(float64); ok && v > 0 && v == float64(int64(v)) {
			ids = append(ids, int64(v))
		}
	}
	out := []ReportSnapshot{}
	if len(ids) == 0 {
		return out, nil
	}
	docs, err := s.store.Items(ctx, dep, ids)
	if err != nil {
		return nil, err
	}
	var parents []int64
	for _, d := range docs {
		parents = append(parents, d.Parent)
	}
	if err := r.need(ctx, parents...); err != nil {
		return nil, err
	}
	t := r.tree
	done := map[int64]bool{}
	for _, rid := range ids {
		d := docs[rid]
		if d == nil || d.Type != TypeReport || done[rid] || t.itemLevel(p, d.CreatedBy, d.Parent) < LevelView {
			continue
		}
		done[rid] = true
		sid, err := s.store.NextID(ctx)
		if err != nil {
			return nil, err
		}
		name := d.Name
		out = append(out, ReportSnapshot{ID: sid, ReportID: rid, VersionNumber: version, Name: &name, Title: &name, Meta: rawOrEmpty(d.Meta)})
	}
	return out, nil
}
