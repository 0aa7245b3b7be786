package workspace

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Published versions: every publish (and every restore, which is a publish of a kept
// version) keeps the dashboard it published as a version record of its workbook, so a
// client can list what was published and publish an old version again. Only versions
// published since records are kept can be listed; an unpublish is no version (it
// changes the status of the version already published, which the audit trail records).
//
// A record is written before the workbook's published dashboard and is pending until
// the workbook is known to have reached it: a publish that loses the race for its
// version number (the PublishedVersion precondition) or fails leaves at most a pending
// record, which is never listed or read and is removed with the versions pruned below
// it. A record becomes the workbook's (committed) only once its versionId was the
// workbook's published versionId: by the publish that wrote both, or, when that
// publish did not get to it, by whoever next reads the workbook's published dashboard
// (the next publish or restore, a listing of its versions). So two committed records
// never share a number, and none records a publish that did not happen.

// DashboardVersion is one published version of a workbook's dashboard as kept.
type DashboardVersion struct {
	VersionID     int64 // the dashboard's versionId: the record's identity
	DeploymentID  int64
	WorkbookID    int64
	VersionNumber int64
	// Title is the dashboard's title as a workbook's head keeps it (PublishedHead): what
	// a summary shows without reading the dashboard.
	Title       *string
	AllowEmbed  bool
	PublishedAt time.Time
	PublishedBy int64
	// RestoredFrom is the version this one restored (0: published from the draft).
	RestoredFrom int64
	// Dashboard is the published dashboard in full; nil in a summary read.
	Dashboard *Dashboard
}

// VersionStore keeps the published versions of each workbook's dashboard.
type VersionStore interface {
	// InsertDashboardVersion stores v as pending: neither listed nor read until it is
	// committed. ErrIDTaken when its VersionID is another record's.
	InsertDashboardVersion(ctx context.Context, v *DashboardVersion) error
	// CommitDashboardVersion makes the record versionID of the workbook, numbered
	// number, one of its versions (idempotent), then removes the workbook's records
	// numbered keep or more below it, pending ones too; false when no such record is
	// stored (pruned, or never written).
	CommitDashboardVersion(ctx context.Context, deploymentID, workbook, versionID, number int64, keep int) (bool, error)
	// DropDashboardVersion removes the record versionID of the workbook if it is still
	// pending (a committed one stays).
	DropDashboardVersion(ctx context.Context, deploymentID, workbook, versionID int64) error
	// PendingDashboardVersion reports whether a pending record of the workbook has the
	// number.
	PendingDashboardVersion(ctx context.Context, deploymentID, workbook, number int64) (bool, error)
	// DashboardVersions returns at most limit committed versions of the workbook
	// numbered below before (0: from the newest), newest first, without their
	// Dashboard.
	DashboardVersions(ctx context.Context, deploymentID, workbook, before int64, limit int) ([]*DashboardVersion, error)
	// DashboardVersion returns the committed version of the workbook with the number,
	// in full; nil when there is none.
	DashboardVersion(ctx context.Context, deploymentID, workbook, number int64) (*DashboardVersion, error)
	// DeleteDashboardVersions removes every record of the workbook (its purge).
	DeleteDashboardVersions(ctx context.Context, deploymentID, workbook int64) error
}

// VersionService is the published versions of a workbook's dashboard.
type VersionService interface {
	// DashboardVersions lists a workbook's kept versions, newest first; view on the
	// workbook.
	DashboardVersions(ctx context.Context, p *identity.Principal, deploymentID, workbook int64, first int, after string) (httpx.Page[DashboardVersionSummary], error)
	// GetDashboardVersion is one kept version in full; view on the workbook.
	GetDashboardVersion(ctx context.Context, p *identity.Principal, deploymentID, workbook, number int64) (DashboardVersionDetail, error)
	// RestoreDashboardVersion publishes a new version equal to kept version number;
	// edit on the workbook, as a publish.
	RestoreDashboardVersion(ctx context.Context, p *identity.Principal, deploymentID, workbook, number int64) (Workbook, error)
}

// DashboardVersionSummary is a listed version.
type DashboardVersionSummary struct {
	VersionNumber int64      `json:"versionNumber"`
	VersionID     int64      `json:"versionId"`
	PublishedAt   httpx.Time `json:"publishedAt"`
	PublishedBy   int64      `json:"publishedBy"`
	AllowEmbed    bool       `json:"allowEmbed"`
	Title         *string    `json:"title"`
	RestoredFrom  *int64     `json:"restoredFrom"`
}

// DashboardVersionDetail is a version in full: its summary, the config and the report
// snapshots it published.
type DashboardVersionDetail struct {
	DashboardVersionSummary
	Description     *string          `json:"description"`
	Config          DashboardConfig  `json:"config"`
	ReportSnapshots []ReportSnapshot `json:"reportSnapshots"`
}

func summaryOf(v *DashboardVersion) DashboardVersionSummary {
	out := DashboardVersionSummary{VersionNumber: v.VersionNumber, VersionID: v.VersionID, PublishedAt: httpx.At(v.PublishedAt),
		PublishedBy: v.PublishedBy, AllowEmbed: v.AllowEmbed, Title: v.Title}
	if v.RestoredFrom != 0 {
		from := v.RestoredFrom
		out.RestoredFrom = &from
	}
	return out
}

// versionCursor is where a page of versions ended: the last version number listed.
type versionCursor struct {
	N int64 `json:"n"`
}

// versionRecord is the record of the published dashboard dash, published by user by at
// time at (restoredFrom: the version it restores, 0 for none).
func versionRecord(dash *Dashboard, by int64, at time.Time, restoredFrom int64) *DashboardVersion {
	title, _ := PublishedHead(&Dashboard{Config: dash.Config, Title: dash.Title})
	return &DashboardVersion{VersionID: dash.VersionID, DeploymentID: dash.DeploymentID, WorkbookID: dash.WorkbookID,
		VersionNumber: dash.VersionNumber, Title: title, AllowEmbed: dash.AllowEmbed, PublishedAt: at, PublishedBy: by,
		RestoredFrom: restoredFrom, Dashboard: dash}
}

// publishVersion writes the workbook's published dashboard dash as the version after
// the one d was read at, keeping its record: the record pending first, then the
// workbook under the PublishedVersion precondition, then the record committed. It
// answers the workbook as changed, or nil when another publish got in first (the
// caller starts over; the record it wrote is dropped).
func (s *service) publishVersion(ctx context.Context, d *Item, dash *Dashboard, by int64, at time.Time, restoredFrom int64) (*Item, error) {
	// The version d has is the workbook's: commit it, in case its own publish did not.
	s.settleVersion(ctx, d)
	rec := versionRecord(dash, by, at, restoredFrom)
	if err := s.store.InsertDashboardVersion(ctx, rec); errors.Is(err, ErrIDTaken) {
		return nil, nil // the versionId was handed out twice: start over with fresh ids
	} else if err != nil {
		return nil, err
	}
	nd, err := s.store.UpdateItem(ctx, d.DeploymentID, d.ID, TypeWorkbook, ItemPrecondition{PublishedVersion: &d.PublishedVersion},
		ItemUpdate{Published: dash, UpdatedAt: at, UpdatedBy: by})
	if err != nil {
		return nil, err // the record stays pending: committed later if the write was done
	}
	if nd == nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = s.store.DropDashboardVersion(cctx, d.DeploymentID, d.ID, rec.VersionID) // else pruned in time
		return nil, nil
	}
	s.settleVersion(ctx, nd)
	return nd, nil
}

// settleVersion commits the record of the published dashboard d has (read with
// PartPublished), pruning what is past the retention. Best effort: a record left
// pending is committed by the next reader of the published dashboard.
func (s *service) settleVersion(ctx context.Context, d *Item) {
	if d == nil || d.Published == nil || d.Published.VersionID == 0 {
		return
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, _ = s.store.CommitDashboardVersion(cctx, d.DeploymentID, d.ID, d.Published.VersionID, d.Published.VersionNumber, s.limits.DashboardVersionsKept)
}

// settleHead commits the record of the workbook's current version when it is still
// pending (its publish stopped between the workbook and the record): the published
// dashboard is read only then, to learn its versionId.
func (s *service) settleHead(ctx context.Context, r *request, head *Item) error {
	if head.PublishedVersion == 0 {
		return nil
	}
	pending, err := s.store.PendingDashboardVersion(ctx, r.deploymentID, head.ID, head.PublishedVersion)
	if err != nil || !pending {
		return err
	}
	d, err := s.withParts(ctx, r, head, PartPublished, LevelView, "read its dashboard versions")
	if err != nil {
		return err
	}
	s.settleVersion(ctx, d)
	return nil
}

// DashboardVersions lists the kept versions of a workbook's dashboard, newest first.
func (s *service) DashboardVersions(ctx context.Context, p *identity.Principal, deploymentID, id int64, first int, after string) (httpx.Page[DashboardVersionSummary], error) {
	from, err := httpx.AfterCursor[versionCursor](after)
	if err != nil {
		return httpx.Page[DashboardVersionSummary]{}, err
	}
	if from != nil && from.N < 1 {
		return httpx.Page[DashboardVersionSummary]{}, httpx.ErrBadCursor
	}
	r, head, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, id, LevelView, "list its dashboard versions")
	if err != nil {
		return httpx.Page[DashboardVersionSummary]{}, err
	}
	var before int64
	if from != nil {
		before = from.N
	} else if err := s.settleHead(ctx, r, head); err != nil {
		return httpx.Page[DashboardVersionSummary]{}, err
	}
	vs, err := s.store.DashboardVersions(ctx, deploymentID, id, before, first+1)
	if err != nil {
		return httpx.Page[DashboardVersionSummary]{}, err
	}
	more := len(vs) > first
	if more {
		vs = vs[:first]
	}
	items := make([]DashboardVersionSummary, len(vs))
	for i, v := range vs {
		items[i] = summaryOf(v)
	}
	return httpx.PageOf(items, more, func(v DashboardVersionSummary) versionCursor { return versionCursor{N: v.VersionNumber} }), nil
}

// GetDashboardVersion returns one kept version of a workbook's dashboard in full.
func (s *service) GetDashboardVersion(ctx context.Context, p *identity.Principal, deploymentID, id, number int64) (DashboardVersionDetail, error) {
	r, head, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, id, LevelView, "read its dashboard versions")
	if err != nil {
		return DashboardVersionDetail{}, err
	}
	v, err := s.keptVersion(ctx, r, head, number)
	if err != nil {
		return DashboardVersionDetail{}, err
	}
	out := DashboardVersionDetail{DashboardVersionSummary: summaryOf(v), Description: v.Dashboard.Description,
		Config: v.Dashboard.Config, ReportSnapshots: v.Dashboard.ReportSnapshots}
	if out.ReportSnapshots == nil {
		out.ReportSnapshots = []ReportSnapshot{}
	}
	return out, nil
}

// keptVersion reads the committed version number of the workbook head.
func (s *service) keptVersion(ctx context.Context, r *request, head *Item, number int64) (*DashboardVersion, error) {
	if number == head.PublishedVersion {
		if err := s.settleHead(ctx, r, head); err != nil {
			return nil, err
		}
	}
	v, err := s.store.DashboardVersion(ctx, r.deploymentID, head.ID, number)
	if err != nil {
		return nil, err
	}
	if v == nil || v.Dashboard == nil {
		return nil, s.versionNotFound(head.ID, number)
	}
	return v, nil
}

func (s *service) versionNotFound(workbook, number int64) error {
	return errs.NotFoundf("version %d of the dashboard of workbook %d not found: the versions kept are the last %d published since versions are kept",
		number, workbook, s.limits.DashboardVersionsKept)
}

// RestoreDashboardVersion publishes a new version of the workbook's dashboard equal to
// kept version number: its config, report snapshots (as they were taken) and
// allowEmbed, with the dashboard's id and public id as they are. The draft stays as it
// is and no kept version changes.
func (s *service) RestoreDashboardVersion(ctx context.Context, p *identity.Principal, deploymentID, id, number int64) (Workbook, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	const verb = "restore a version of its dashboard"
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		r, head, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, id, LevelEdit, verb)
		if err != nil {
			return Workbook{}, err
		}
		d, err := s.withParts(ctx, r, head, PartPublished, LevelEdit, verb)
		if err != nil {
			return Workbook{}, err
		}
		if number == d.PublishedVersion {
			s.settleVersion(ctx, d) // the version to restore may be the current one, still pending
		}
		v, err := s.store.DashboardVersion(ctx, deploymentID, id, number)
		if err != nil {
			return Workbook{}, err
		}
		if v == nil || v.Dashboard == nil {
			return Workbook{}, s.versionNotFound(id, number)
		}
		versionID, err := s.store.NextID(ctx)
		if err != nil {
			return Workbook{}, err
		}
		old := v.Dashboard
		createdBy, updatedBy := p.User.ID, p.User.ID
		dashID, publicID := d.DashboardID, d.PublicID
		if prev := d.Published; prev != nil && prev.CreatedBy != nil {
			createdBy = *prev.CreatedBy
		}
		if dashID == 0 { // a workbook with kept versions has been published: defensive only
			dashID, publicID = old.ID, old.PublicID
		}
		dash := Dashboard{ID: dashID, PublicID: publicID, DeploymentID: deploymentID, WorkbookID: id, Status: StatusPublished,
			AllowEmbed: old.AllowEmbed, Config: old.Config, VersionNumber: d.PublishedVersion + 1, VersionID: versionID,
			ReportSnapshots: old.ReportSnapshots, CreatedBy: &createdBy, UpdatedBy: &updatedBy, Title: old.Config.Title,
			Description: old.Config.Description, FromSharedWorkspace: old.FromSharedWorkspace,
			RestrictDataDownload: old.RestrictDataDownload, UseBoardDashboards: old.UseBoardDashboards}
		if dash.ReportSnapshots == nil {
			dash.ReportSnapshots = []ReportSnapshot{}
		}
		if err := s.checkPublishedSize(id, &dash); err != nil {
			return Workbook{}, err // kept under a larger limit than today's
		}
		nd, err := s.publishVersion(ctx, d, &dash, p.User.ID, s.now(), number)
		if err != nil {
			return Workbook{}, err
		}
		if nd == nil {
			continue // published concurrently: start over
		}
		out, err := s.render(ctx, r, []*Item{nd})
		if err != nil {
			return Workbook{}, err
		}
		return out[0], nil
	}
	return Workbook{}, errs.Unavailablef("workbook %d kept changing during the restore; retry", id)
}
