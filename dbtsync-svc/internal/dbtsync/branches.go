package dbtsync

import (
	"context"
	"errors"
	"slices"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// branchError names the branch when the store did not find it.
func branchError(name string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return errs.NotFoundf("branch %q not found", name)
	}
	return err
}

// branch reads a branch as the API shows it; the production branch always exists.
func (s *service) branch(ctx context.Context, deploymentID int64, name, production string) (Branch, error) {
	st, err := s.Branches.Branch(ctx, deploymentID, name)
	if errors.Is(err, ErrNotFound) && name == production {
		return productionBranch(name), nil
	}
	if err != nil {
		return Branch{}, branchError(name, err)
	}
	return st.View(production, s.now()), nil
}

func (s *service) ListBranches(ctx context.Context, p *identity.Principal, deploymentID int64, pg httpx.PageQuery) (httpx.Page[Branch], error) {
	if err := authorize(p, roleBranches); err != nil {
		return httpx.Page[Branch]{}, err
	}
	// Production first, then the others by name, a page at a time from the store (a
	// deployment's branches are as many as the names its syncs gave): the cursor is the
	// last name listed.
	production, now := p.Deployment.ProductionBranch, s.now()
	var after string
	if pg.After != "" {
		var err error
		if after, err = httpx.DecodeCursor[string](pg.After); err != nil || !validBranchName(after) {
			return httpx.Page[Branch]{}, httpx.ErrBadCursor
		}
	}
	items := make([]Branch, 0, pg.First+1)
	if after == "" {
		prod, err := s.branch(ctx, deploymentID, production, production)
		if err != nil {
			return httpx.Page[Branch]{}, err
		}
		items = append(items, prod)
	} else if after == production {
		after = ""
	}
	states, err := s.Branches.Branches(ctx, deploymentID, after, production, pg.First+1-len(items))
	if err != nil {
		return httpx.Page[Branch]{}, err
	}
	for _, st := range states {
		items = append(items, st.View(production, now))
	}
	return httpx.PageOf(items[:min(len(items), pg.First)], len(items) > pg.First, func(b Branch) string { return b.Name }), nil
}

func (s *service) GetBranch(ctx context.Context, p *identity.Principal, deploymentID int64, name string) (Branch, error) {
	if err := authorize(p, roleBranches); err != nil {
		return Branch{}, err
	}
	return s.branch(ctx, deploymentID, name, p.Deployment.ProductionBranch)
}

func (s *service) ListFiles(ctx context.Context, p *identity.Principal, deploymentID int64, name string, version int64) (FileList, error) {
	if err := authorize(p, roleBranches); err != nil {
		return FileList{}, err
	}
	v, files, err := s.Branches.Files(ctx, deploymentID, name, version, "", false)
	if err != nil {
		return FileList{}, branchError(name, err)
	}
	out := FileList{BranchName: name, Version: v, Files: make([]FileEntry, 0, len(files))}
	for _, f := range files {
		out.Files = append(out.Files, FileEntry{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	return out, nil
}

func (s *service) GetFile(ctx context.Context, p *identity.Principal, deploymentID int64, name, path string, version int64) (FileContent, error) {
	if err := authorize(p, roleBranches); err != nil {
		return FileContent{}, err
	}
	if !validFilePath(path) {
		return FileContent{}, errs.Invalidf("file path %q must be relative, without empty, '.' or '..' segments", path)
	}
	v, files, err := s.Branches.Files(ctx, deploymentID, name, version, path, true)
	if err == nil && len(files) == 0 {
		return FileContent{}, errs.NotFoundf("file %q not found in branch %q", path, name)
	}
	if err != nil {
		return FileContent{}, branchError(name, err)
	}
	return FileContent{BranchName: name, Version: v, Path: path, Content: files[0].Content}, nil
}

func (s *service) ListVersions(ctx context.Context, p *identity.Principal, deploymentID int64, name string, pg httpx.PageQuery) (httpx.Page[BranchVersion], error) {
	if err := authorize(p, roleBranches); err != nil {
		return httpx.Page[BranchVersion]{}, err
	}
	st, err := s.Branches.Branch(ctx, deploymentID, name)
	if err != nil {
		return httpx.Page[BranchVersion]{}, branchError(name, err)
	}
	newestFirst := slices.Clone(st.Versions)
	slices.Reverse(newestFirst)
	after, err := httpx.AfterCursor[int64](pg.After)
	if err != nil {
		return httpx.Page[BranchVersion]{}, err
	}
	return httpx.Paginate(newestFirst, func(v BranchVersion) int64 { return v.Version }, after, pg.First)
}

// OpenBranch renews the branch's lease: it is served for LeaseDuration from now. The
// production branch is always served, and keeps no lease.
func (s *service) OpenBranch(ctx context.Context, p *identity.Principal, deploymentID int64, name string) (Branch, error) {
	if err := authorize(p, roleBranches); err != nil {
		return Branch{}, err
	}
	production := p.Deployment.ProductionBranch
	if name == production {
		return s.branch(ctx, deploymentID, name, production)
	}
	now := s.now().UTC()
	st, err := s.Branches.SetLease(ctx, deploymentID, name, now.Add(LeaseDuration), now)
	if err != nil {
		return Branch{}, branchError(name, err)
	}
	return st.View(production, s.now()), nil
}

func (s *service) SetStaging(ctx context.Context, p *identity.Principal, deploymentID int64, name string, enabled bool) (Branch, error) {
	if err := authorize(p, roleBranches); err != nil {
		return Branch{}, err
	}
	production := p.Deployment.ProductionBranch
	if name == production {
		return Branch{}, errs.Invalidf("branch %q is the production branch, which is always served", name)
	}
	st, err := s.Branches.SetStaging(ctx, deploymentID, name, enabled, s.now().UTC())
	if err != nil {
		return Branch{}, branchError(name, err)
	}
	return st.View(production, s.now()), nil
}
