package workspace

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// Publish turns a workbook's dashboard draft into its published dashboard: a new
// version number and version id, the same dashboard id and public id as before, and a
// snapshot of each report that a widget refers to by `config.reportId`. Each version is
// kept (publishVersion) for the workbook's version history.
// The dashboard's createdBy stays its first publisher and updatedBy is the last;
// allowEmbed is what the publish says, else what the previous version had (true at first).
func (s *service) Publish(ctx context.Context, p *identity.Principal, deploymentID, id int64, allowEmbed *bool) (Workbook, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		r, d, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, id, LevelEdit, "publish it")
		if err != nil {
			return Workbook{}, err
		}
		if d, err = s.withParts(ctx, r, d, PartDraft|PartPublished, LevelEdit, "publish it"); err != nil {
			return Workbook{}, err
		}
		if d.Draft == nil {
			return Workbook{}, errs.Conflictf("workbook %d has no dashboard draft to publish", id)
		}
		if err := s.checkDashboardReports("the dashboard draft", d.Draft); err != nil {
			return Workbook{}, err // a draft stored before the limit
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
		snaps, err := s.snapshotReports(ctx, r, cfg, version, id)
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
		dash := Dashboard{ID: dashID, PublicID: publicID, DeploymentID: deploymentID, WorkbookID: id, Status: StatusPublished,
			AllowEmbed: embed, Config: cfg, VersionNumber: version, VersionID: versionID, ReportSnapshots: snaps,
			CreatedBy: &createdBy, UpdatedBy: &updatedBy, Title: cfg.Title, Description: cfg.Description}
		if err := s.checkPublishedSize(id, &dash); err != nil {
			return Workbook{}, err
		}
		nd, err := s.publishVersion(ctx, d, &dash, p.User.ID, s.now(), 0) // keeps the version (versions.go)
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
	return Workbook{}, errs.Unavailablef("workbook %d kept changing during the publish; retry", id)
}

// Unpublish archives a workbook's published dashboard (status archived; the version
// stays, and a later publish makes it published again). Archiving an archived dashboard
// changes nothing. It needs edit on the workbook.
func (s *service) Unpublish(ctx context.Context, p *identity.Principal, deploymentID, id int64) (Workbook, error) {
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		r, d, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, id, LevelEdit, "unpublish it")
		if err != nil {
			return Workbook{}, err
		}
		if d, err = s.withParts(ctx, r, d, AllParts, LevelEdit, "unpublish it"); err != nil {
			return Workbook{}, err
		}
		if d.Published == nil {
			return Workbook{}, errs.Conflictf("workbook %d has no published dashboard to unpublish", id)
		}
		nd := d
		if d.Published.Status != StatusArchived {
			by := p.User.ID
			dash := *d.Published
			dash.Status, dash.UpdatedBy = StatusArchived, &by
			if nd, err = s.store.UpdateItem(ctx, deploymentID, id, TypeWorkbook, ItemPrecondition{PublishedVersion: &d.PublishedVersion},
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
	return Workbook{}, errs.Unavailablef("workbook %d kept changing during the unpublish; retry", id)
}

// checkPublishedSize refuses a published dashboard over its limit. The draft's own limit
// does not bound it: each snapshot copies its report's meta.
func (s *service) checkPublishedSize(workbook int64, dash *Dashboard) error {
	if n := jsonBytes(dash); n > s.limits.PublishedBytes {
		return s.publishedTooLarge(workbook, "would be", n)
	}
	return nil
}

func (s *service) publishedTooLarge(workbook int64, verb string, n int) error {
	return errs.New(errs.TooLarge, "the published dashboard of workbook %d %s %d bytes, over the limit of %d bytes: its widgets name more reports (or larger ones) than one dashboard holds",
		workbook, verb, n, s.limits.PublishedBytes)
}

// reportIDs are the distinct reports a dashboard's widgets name (config.reportId, a
// positive integer), in widget order.
func reportIDs(cfg *DashboardConfig) []int64 {
	var ids []int64
	seen := map[int64]bool{}
	for _, w := range cfg.Widgets {
		if v, ok := w.Config["reportId"].(float64); ok && v > 0 && v == float64(int64(v)) && !seen[int64(v)] {
			seen[int64(v)] = true
			ids = append(ids, int64(v))
		}
	}
	return ids
}

// checkDashboardReports refuses a dashboard config (field names it) whose widgets name
// more distinct reports than one dashboard holds: each is read, checked and snapshot at
// every publish.
func (s *service) checkDashboardReports(field string, cfg *DashboardConfig) error {
	if cfg == nil {
		return nil
	}
	if n := len(reportIDs(cfg)); n > s.limits.DashboardReports {
		return errs.Invalidf("%s names %d distinct reports (widgets' config.reportId), over the limit of %d", field, n, s.limits.DashboardReports)
	}
	return nil
}

// snapshotReports copies each report a widget names into the published dashboard, but
// only reports the publisher can view: the others are left out of the snapshot, so a
// publish never reveals a report in a folder the publisher cannot see. Access is decided
// on the reports' heads; only then is the meta of the allowed ones read, in batches no
// larger than what the published dashboard still has room for, so a publish that does
// not fit is refused (413) before the rest is read.
func (s *service) snapshotReports(ctx context.Context, r *request, cfg DashboardConfig, version, workbook int64) ([]ReportSnapshot, error) {
	out := []ReportSnapshot{}
	ids := reportIDs(&cfg)
	if len(ids) == 0 {
		return out, nil
	}
	heads, err := s.store.Items(ctx, r.deploymentID, ids, 0)
	if err != nil {
		return nil, err
	}
	var parents []int64
	for _, d := range heads {
		parents = append(parents, d.Parent)
	}
	if err := r.need(ctx, parents...); err != nil {
		return nil, err
	}
	var allowed []int64
	for _, rid := range ids {
		if d := heads[rid]; d != nil && d.Type == TypeReport && r.tree.itemLevel(r.p, d.CreatedBy, d.Parent) >= LevelView {
			allowed = append(allowed, rid)
		}
	}
	size := jsonBytes(&cfg) // a lower bound of the published dashboard's size, grown per snapshot
	for len(allowed) > 0 {
		n := min(len(allowed), max(1, (s.limits.PublishedBytes-size)/s.limits.MetaBytes), maxSnapshotBatch)
		batch := allowed[:n]
		allowed = allowed[n:]
		docs, err := s.store.Items(ctx, r.deploymentID, batch, PartMeta)
		if err != nil {
			return nil, err
		}
		for _, rid := range batch {
			d := docs[rid]
			if d == nil || d.Type != TypeReport || !s.stillViewable(ctx, r, heads[rid], d) {
				continue
			}
			if size += len(d.Meta) + 2*len(d.Name); size > s.limits.PublishedBytes {
				return nil, s.publishedTooLarge(workbook, "would be at least", size)
			}
			sid, err := s.store.NextID(ctx)
			if err != nil {
				return nil, err
			}
			name := d.Name
			out = append(out, ReportSnapshot{ID: sid, ReportID: rid, VersionNumber: version, Name: &name, Title: &name, Meta: rawOrEmpty(d.Meta)})
		}
	}
	return out, nil
}

// maxSnapshotBatch bounds the reports one read of a publish asks for.
const maxSnapshotBatch = 100

// stillViewable reports whether the publisher can view report d, read after its head:
// checked again only when it moved in between.
func (s *service) stillViewable(ctx context.Context, r *request, head, d *Item) bool {
	if d.Parent == head.Parent {
		return true
	}
	return r.need(ctx, d.Parent) == nil && r.tree.itemLevel(r.p, d.CreatedBy, d.Parent) >= LevelView
}
