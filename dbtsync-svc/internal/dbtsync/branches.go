package dbtsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// KeptVersions is how many versions of a branch are kept; older ones and their files
// are dropped when a new one is written.
const KeptVersions = 20

// LeaseDuration is how long opening a branch keeps it served.
const LeaseDuration = 10 * time.Minute

// BranchState is a branch as the branch store keeps it.
type BranchState struct {
	Name           string
	LatestVersion  int64           // 0: no version yet
	Versions       []BranchVersion // the kept versions, oldest first
	StagingEnabled bool
	LeaseExpiresAt *time.Time // the last open's lease, expired or not
	UpdatedAt      time.Time
}

// BranchVersion is one kept file set of a branch (fields in the order clients have
// always received them).
type BranchVersion struct {
	Version   int64      `json:"version"`
	SyncJobID string     `json:"syncJobId"`
	FileCount int        `json:"fileCount"`
	CreatedAt httpx.Time `json:"createdAt"`
}

// StoredFile is a file of a branch version; Content is empty unless it was asked for.
type StoredFile struct {
	Path    string
	Content string
	Size    int64
	SHA256  string
}

// Branch is a branch as the API shows it.
type Branch struct {
	Name           string      `json:"name"`
	Production     bool        `json:"production"`
	Served         bool        `json:"served"`
	StagingEnabled bool        `json:"stagingEnabled"`
	LeaseExpiresAt *httpx.Time `json:"leaseExpiresAt"`
	LatestVersion  *int64      `json:"latestVersion"`
	UpdatedAt      httpx.Time  `json:"updatedAt"`
}

// Served is the spec's rule (generate-session, branch selection): a branch is served
// while someone has it open (its lease has not expired at now) or permanently once its
// staging environment is enabled; the production branch always is.
func (b BranchState) Served(production string, now time.Time) bool {
	return b.Name == production || b.StagingEnabled || b.leaseActive(now)
}

func (b BranchState) leaseActive(now time.Time) bool {
	return b.LeaseExpiresAt != nil && b.LeaseExpiresAt.After(now)
}

// View is the branch as the API shows it at now: an expired lease is no lease.
func (b BranchState) View(production string, now time.Time) Branch {
	out := Branch{Name: b.Name, Production: b.Name == production, Served: b.Served(production, now), StagingEnabled: b.StagingEnabled,
		UpdatedAt: httpx.At(b.UpdatedAt.UTC())}
	if b.leaseActive(now) {
		t := b.LeaseExpiresAt.UTC()
		out.LeaseExpiresAt = httpx.AtPtr(&t)
	}
	if b.LatestVersion > 0 {
		v := b.LatestVersion
		out.LatestVersion = &v
	}
	return out
}

// productionBranch is the production branch before anything was synced into it: it
// always exists, and is always served.
func productionBranch(name string) Branch {
	return Branch{Name: name, Production: true, Served: true, UpdatedAt: httpx.At(time.Unix(0, 0).UTC())}
}

// FilesDigest identifies a file set: SHA-256 over each path and its content's SHA-256, in
// path order. A sync whose output has the latest version's digest writes no version.
func FilesDigest(files []convert.File) string {
	sums := make([][2]string, len(files))
	for i, f := range files {
		sums[i] = [2]string{f.Path, ContentSHA256(f.Content)}
	}
	return DigestOfSums(sums)
}

// ContentSHA256 is the hex SHA-256 of a file's content.
func ContentSHA256(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// DigestOfSums is FilesDigest from (path, content SHA-256) pairs, for a store that
// keeps the sums of its files (it sorts sums).
func DigestOfSums(sums [][2]string) string {
	slices.SortFunc(sums, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	h := sha256.New()
	for _, e := range sums {
		h.Write([]byte(e[0]))
		h.Write([]byte{0})
		h.Write([]byte(e[1]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

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
