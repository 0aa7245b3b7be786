package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// versionRecord is a kept dashboard version and whether it is committed.
type versionRecord struct {
	v         workspace.DashboardVersion
	committed bool
}

func cloneVersion(v *workspace.DashboardVersion, full bool) *workspace.DashboardVersion {
	out := *v
	if v.Title != nil {
		t := *v.Title
		out.Title = &t
	}
	out.Dashboard = nil
	if full {
		out.Dashboard = viaJSON(v.Dashboard)
	}
	return &out
}

// InsertDashboardVersion stores v as pending.
func (s *Store) InsertDashboardVersion(ctx context.Context, v *workspace.DashboardVersion) error {
	if err := s.begin(ctx, "InsertDashboardVersion"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.versions == nil {
		s.versions = map[int64]*versionRecord{}
	}
	if s.versions[v.VersionID] != nil {
		return fmt.Errorf("insert dashboard version %d: %w", v.VersionID, workspace.ErrIDTaken)
	}
	s.versions[v.VersionID] = &versionRecord{v: *cloneVersion(v, true)}
	return nil
}

// versionOf is the workbook's record versionID, or nil.
func (s *Store) versionOf(deploymentID, workbook, versionID int64) *versionRecord {
	r := s.versions[versionID]
	if r == nil || r.v.DeploymentID != deploymentID || r.v.WorkbookID != workbook {
		return nil
	}
	return r
}

// CommitDashboardVersion commits the record and prunes the workbook's records numbered
// keep or more below it.
func (s *Store) CommitDashboardVersion(ctx context.Context, deploymentID, workbook, versionID, number int64, keep int) (bool, error) {
	if err := s.begin(ctx, "CommitDashboardVersion"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	r := s.versionOf(deploymentID, workbook, versionID)
	if r == nil || r.v.VersionNumber != number {
		return false, nil
	}
	r.committed = true
	below := number - int64(keep)
	for id, o := range s.versions {
		if o.v.DeploymentID == deploymentID && o.v.WorkbookID == workbook && o.v.VersionNumber <= below {
			delete(s.versions, id)
		}
	}
	return true, nil
}

// DropDashboardVersion removes a pending record.
func (s *Store) DropDashboardVersion(ctx context.Context, deploymentID, workbook, versionID int64) error {
	if err := s.begin(ctx, "DropDashboardVersion"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if r := s.versionOf(deploymentID, workbook, versionID); r != nil && !r.committed {
		delete(s.versions, versionID)
	}
	return nil
}

// PendingDashboardVersion reports whether a pending record of the workbook has the
// number.
func (s *Store) PendingDashboardVersion(ctx context.Context, deploymentID, workbook, number int64) (bool, error) {
	if err := s.begin(ctx, "PendingDashboardVersion"); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	for _, r := range s.versions {
		if r.v.DeploymentID == deploymentID && r.v.WorkbookID == workbook && r.v.VersionNumber == number && !r.committed {
			return true, nil
		}
	}
	return false, nil
}

// DashboardVersions returns committed versions numbered below before, newest first.
func (s *Store) DashboardVersions(ctx context.Context, deploymentID, workbook, before int64, limit int) ([]*workspace.DashboardVersion, error) {
	if err := s.begin(ctx, "DashboardVersions"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*workspace.DashboardVersion
	for _, r := range s.versions {
		if r.committed && r.v.DeploymentID == deploymentID && r.v.WorkbookID == workbook && (before == 0 || r.v.VersionNumber < before) {
			out = append(out, cloneVersion(&r.v, false))
		}
	}
	slices.SortFunc(out, func(a, b *workspace.DashboardVersion) int {
		switch {
		case a.VersionNumber > b.VersionNumber:
			return -1
		case a.VersionNumber < b.VersionNumber:
			return 1
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DashboardVersion returns the committed version with the number, in full.
func (s *Store) DashboardVersion(ctx context.Context, deploymentID, workbook, number int64) (*workspace.DashboardVersion, error) {
	if err := s.begin(ctx, "DashboardVersion"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	for _, r := range s.versions {
		if r.committed && r.v.DeploymentID == deploymentID && r.v.WorkbookID == workbook && r.v.VersionNumber == number {
			return cloneVersion(&r.v, true), nil
		}
	}
	return nil, nil
}

// DeleteDashboardVersions removes every record of the workbook.
func (s *Store) DeleteDashboardVersions(ctx context.Context, deploymentID, workbook int64) error {
	if err := s.begin(ctx, "DeleteDashboardVersions"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for id, r := range s.versions {
		if r.v.DeploymentID == deploymentID && r.v.WorkbookID == workbook {
			delete(s.versions, id)
		}
	}
	return nil
}
