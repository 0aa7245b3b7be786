// Package gitsource reads dbt projects from git repositories for dbtsync-svc: a
// shallow, single-ref fetch into a directory of its own, read without a checkout (the
// pack inflated object by object, pack.go; the commit's tree walked and served as a file
// system, tree.go and treefs.go), and the repository policy (policy.go) that decides
// which URLs may be cloned at all. Repositories are hostile: clones are bounded in time
// and size while they are inflated, and nothing outside a clone is ever read.
// Source implements dbtsync.GitSource.
package gitsource

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	libconfig "github.com/analyticsco/platform/libs/config"
)

// Limits bound what one clone may cost; zero fields take the defaults.
type Limits struct {
	Policy         Policy
	CloneTimeout   time.Duration // the clone, from the first request to the walked tree
	MaxRepoBytes   int64         // bytes downloaded, and bytes of the objects inflated (the files, each path counted)
	MaxFiles       int           // files of the tree (and as many directories)
	MaxFileBytes   int64         // one file the conversion reads (a schema .yml, dbt_project.yml)
	MaxManifest    int64         // the manifest at manifestPath
	MaxModelPaths  int           // distinct model directories dbt_project.yml names
	MaxTreeEntries int           // tree entries read in one clone, skipped ones and re-read subtrees included
	MaxPathBytes   int64         // bytes of the full paths of those entries, together
	MaxLookupSteps int64         // path components walked resolving paths and links in one clone's tree
	MaxRefAdverts  int64         // bytes of a server's reference advertisement read (ref listing and fetch)
	RefListings    int           // reference listings (HasRef) this process runs at once
	// The limits of every manifest read (convert.ManifestLimits): the API's upload check,
	// the worker's read of an uploaded manifest and of the one at manifestPath.
	MaxManifestMemberBytes int64 // one value the conversion reads whole (a node's read members together)
	MaxManifestNames       int   // member names the open objects hold together
}

// DefaultLimits apply where Limits leaves a field zero: the defaults of the config tags
// (DBT_SYNC_*), which a fitness test keeps equal (systemtest/architecture).
var DefaultLimits = Limits{CloneTimeout: 2 * time.Minute, MaxRepoBytes: 512 << 20, MaxFiles: 50_000,
	MaxFileBytes: 16 << 20, MaxManifest: dbtsync.DefaultMaxSyncBodyBytes, MaxModelPaths: 64,
	MaxTreeEntries: 200_000, MaxPathBytes: 64 << 20, MaxLookupSteps: 10_000_000,
	MaxRefAdverts: 8 << 20, RefListings: 4,
	MaxManifestMemberBytes: int64(convert.DefaultManifestLimits.MaxMemberBytes), MaxManifestNames: convert.DefaultManifestLimits.MaxNames}

// WithDefaults is l with every limit not set (zero or less) at its DefaultLimits value.
func (l Limits) WithDefaults() Limits { return libconfig.OrDefaults(l, DefaultLimits) }

// ManifestLimits are the limits of a manifest read, with the defaults where l sets none.
func (l Limits) ManifestLimits() convert.ManifestLimits {
	return convert.ManifestLimits{MaxMemberBytes: int(l.MaxManifestMemberBytes), MaxNames: l.MaxManifestNames}.WithDefaults()
}

// Opener opens the sealed credentials of an integration (internal/credentials).
type Opener interface {
	Open(sealed []byte, deploymentID int64) ([]byte, error)
}

// Source checks repository URLs, lists their references and, when made by NewCloner,
// clones them.
type Source struct {
	opener   Opener
	limits   Limits
	root     string        // this process's clone directory ("": no clones); each clone gets its own directory under it
	listings chan struct{} // one token per reference listing running (HasRef)
}

// New checks repository URLs and lists references (the API process); it clones nothing.
func New(opener Opener, limits Limits) *Source {
	limits = limits.WithDefaults()
	installTransports(limits)
	return &Source{opener: opener, limits: limits, listings: make(chan struct{}, limits.RefListings)}
}

// CheckRepository applies the repository policy to url.
func (s *Source) CheckRepository(ctx context.Context, url string) error {
	return s.limits.Policy.CheckURL(ctx, url)
}

// Load fetches ref (a branch, else a tag) and reads the manifest at manifestPath when it
// exists there, otherwise the dbt project files. Nothing is checked out: the fetched pack
// is inflated object by object within the limits (explodePack), the commit's tree is
// walked within them (walkTree), and the conversion reads that tree (treeFS).
func (s *Source) Load(ctx context.Context, in dbtsync.Integration, ref, commit string) (*convert.Project, error) {
	if s.root == "" {
		return nil, errors.New("this process does not clone repositories (gitsource.New)")
	}
	if err := s.limits.Policy.CheckURL(ctx, in.RepoURL); err != nil {
		return nil, dbtsync.Permanent(err)
	}
	dir, err := os.MkdirTemp(s.root, "job-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tree, err := s.clone(ctx, in, ref, commit, dir)
	if err != nil {
		return nil, err
	}
	defer tree.store.Close()
	if in.ManifestPath != "" {
		p, found, err := s.readManifest(tree, in.ManifestPath)
		if stop := tree.stopped(); stop != nil {
			return nil, stop
		}
		if found || err != nil {
			return p, err
		}
	}
	return s.readProject(tree, in.ProjectPath)
}

// clone fetches ref into dir and indexes its tree, within the clone's time and size
// limits and its work budget. The tree it returns reads within ctx (the job's) and on
// the same budget.
func (s *Source) clone(ctx context.Context, in dbtsync.Integration, ref, commit, dir string) (*treeFS, error) {
	cloneCtx, cancel := context.WithTimeout(ctx, s.limits.CloneTimeout)
	defer cancel()
	host := dbtsync.RepoHost(in.RepoURL)
	head, err := s.fetch(cloneCtx, in, ref, dir)
	if err != nil {
		return nil, cloneFailure(cloneCtx, host, ref, err, s.limits)
	}
	if commit != "" && !strings.EqualFold(head.String(), commit) {
		return nil, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeCommitSuperseded,
			"the pushed commit %s is no longer the head of %q (now %s): the push of the newer commit syncs the branch", commit, ref, head))
	}
	store, err := explodePack(cloneCtx, filepath.Join(dir, "pack"), dir, s.limits)
	if err == nil {
		_ = os.Remove(filepath.Join(dir, "pack"))
		m := newMeter(s.limits)
		var root *node
		var treeHash plumbing.Hash
		if treeHash, err = store.treeOf(head); err == nil {
			if root, err = walkTree(cloneCtx, store, treeHash, m); err == nil {
				return &treeFS{ctx: ctx, root: root, store: store, meter: m}, nil
			}
		}
		store.Close()
	}
	return nil, cloneFailure(cloneCtx, host, ref, err, s.limits)
}

// readManifest reads the manifest at manifestPath; found is false when the tree has
// none there.
func (s *Source) readManifest(tree *treeFS, manifestPath string) (p *convert.Project, found bool, err error) {
	rel := strings.TrimPrefix(path.Clean("/"+manifestPath), "/")
	f, err := tree.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "repository file %s cannot be read: it leads outside the repository or is not a file", rel))
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, true, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "repository file %s cannot be read", rel))
	case !st.Mode().IsRegular():
		return nil, true, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "repository file %s is not a regular file", rel))
	case st.Size() > s.limits.MaxManifest:
		return nil, true, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "repository file %s is %d bytes, over the manifest limit of %d bytes", rel, st.Size(), s.limits.MaxManifest))
	}
	p, err = dbtsync.DecodeManifestWith(bufio.NewReaderSize(io.LimitReader(f, s.limits.MaxManifest), 256<<10), s.limits.ManifestLimits())
	return p, true, err
}

// readProject reads the dbt project files under projectPath.
func (s *Source) readProject(tree *treeFS, projectPath string) (*convert.Project, error) {
	proj := strings.Trim(path.Clean("/"+projectPath), "/")
	bfs := &boundedFS{fsys: tree, maxFile: s.limits.MaxFileBytes}
	// The read's own budget: its model directories, the files a clone may hold, read once
	// each, and the entries a clone may list.
	limits := convert.ReadLimits{MaxPaths: s.limits.MaxModelPaths, MaxEntries: s.limits.MaxTreeEntries, MaxFiles: s.limits.MaxFiles, MaxBytes: s.limits.MaxRepoBytes}
	p, err := convert.ReadProjectContext(tree.ctx, bfs, proj, limits)
	var overBudget *convert.LimitError
	if stop := tree.stopped(); stop != nil {
		return nil, stop
	}
	switch {
	case bfs.violation != nil:
		return nil, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeRepositoryLimit, "%s", bfs.violation))
	case errors.Is(err, errStoreRead):
		return nil, err // the worker's disk, not the project: retried, and logged
	case errors.As(err, &overBudget):
		return nil, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeWorkLimit, "%s", err))
	case err != nil:
		return nil, dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeInvalidProject, "%s", err))
	}
	return p, nil
}

// refCandidates are the references a ref may name, in order: a branch, then a tag.
func refCandidates(ref string) []plumbing.ReferenceName {
	return []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
}

// auth is the integration's saved credentials as go-git auth (nil without any).
func (s *Source) auth(in dbtsync.Integration) (transport.AuthMethod, error) {
	if len(in.Credentials) == 0 {
		return nil, nil
	}
	plain, err := s.opener.Open(in.Credentials, in.DeploymentID)
	if err != nil {
		return nil, dbtsync.Permanent(errors.New("saved git credentials cannot be decrypted (was a DBT_CREDENTIALS_KEY key removed?)"))
	}
	var c dbtsync.GitCredentials
	_ = json.Unmarshal(plain, &c)
	user := c.Username
	if user == "" {
		user = "x-access-token"
	}
	return &githttp.BasicAuth{Username: user, Password: c.Token}, nil
}
