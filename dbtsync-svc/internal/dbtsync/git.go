package dbtsync

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// GitLimits bound what one clone may cost; zero fields take the defaults.
type GitLimits struct {
	Policy       RepoPolicy
	CloneTimeout time.Duration // the clone, from the first request to the checked-out tree
	MaxRepoBytes int64         // bytes downloaded, and bytes of the checked-out tree
	MaxFiles     int           // files of the checked-out tree
	MaxFileBytes int64         // one file the conversion reads (a schema .yml, dbt_project.yml)
	MaxManifest  int64         // the manifest at manifestPath
}

// DefaultGitLimits apply where GitLimits leaves a field zero.
var DefaultGitLimits = GitLimits{CloneTimeout: 2 * time.Minute, MaxRepoBytes: 512 << 20, MaxFiles: 50_000,
	MaxFileBytes: 16 << 20, MaxManifest: DefaultMaxSyncBodyBytes}

func (l GitLimits) withDefaults() GitLimits {
	d := DefaultGitLimits
	if l.CloneTimeout <= 0 {
		l.CloneTimeout = d.CloneTimeout
	}
	if l.MaxRepoBytes <= 0 {
		l.MaxRepoBytes = d.MaxRepoBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxManifest <= 0 {
		l.MaxManifest = d.MaxManifest
	}
	return l
}

// GitFetcher reads a dbt project at a ref of the integration's repository: a shallow,
// single-ref clone into a directory of its own, removed afterwards. Repositories are
// hostile: the clone is bounded in time and size, and nothing outside it is ever read.
type GitFetcher struct {
	sealer *Sealer
	limits GitLimits
	root   string // this process's clone directory; each job clones into its own directory under it
}

// NewGitFetcher clones under a directory of this process's own, made in tmpDir ("" is the
// system temp directory). Directories that crashed workers left behind are removed first:
// each process holds a lock on its own for as long as it lives.
func NewGitFetcher(sealer *Sealer, tmpDir string, limits GitLimits) (*GitFetcher, error) {
	limits = limits.withDefaults()
	installTransports(limits)
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	removeAbandonedClones(tmpDir)
	root, err := os.MkdirTemp(tmpDir, "dbtsync-clones-")
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("lock clone directory: %w", err)
	}
	heldLocks = append(heldLocks, lock) // held until the process exits
	return &GitFetcher{sealer: sealer, limits: limits, root: root}, nil
}

// heldLocks keeps the clone directories' lock files open (and so locked) for the process.
var heldLocks []*os.File

// removeAbandonedClones removes the clone directories under dir whose process is gone
// (their lock is free), and clone directories of the old layout (dbtsync-clone-*) older
// than an hour.
func removeAbandonedClones(dir string) {
	roots, _ := filepath.Glob(filepath.Join(dir, "dbtsync-clones-*"))
	for _, r := range roots {
		f, err := os.Open(filepath.Join(r, ".lock"))
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(r)
		}
		f.Close()
	}
	old, _ := filepath.Glob(filepath.Join(dir, "dbtsync-clone-*"))
	for _, o := range old {
		if st, err := os.Lstat(o); err == nil && time.Since(st.ModTime()) > time.Hour {
			_ = os.RemoveAll(o)
		}
	}
}

var (
	httpsMu     sync.Mutex
	httpsLimits GitLimits
	httpsOnce   sync.Once
)

// installTransports sets go-git's file and https transports for this process.
func installTransports(l GitLimits) {
	pureGoFileTransport.Do(func() {
		// go-git's file:// transport runs the git-upload-pack binary, which the distroless
		// production image does not have; its in-process server reads the repository itself.
		client.InstallProtocol("file", server.NewClient(localRepositories{}))
	})
	installHTTPS(l)
}

// installHTTPS makes go-git clone over https with the policy's client (go-git keeps one
// client per scheme for the process; the limits of the last fetcher made apply).
func installHTTPS(l GitLimits) {
	httpsMu.Lock()
	httpsLimits = l
	httpsMu.Unlock()
	httpsOnce.Do(func() {
		client.InstallProtocol("https", githttp.NewClient(&http.Client{Transport: policyTransport{}, Timeout: 0,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return fmt.Errorf("%w: the git server answered with a redirect, which clones do not follow", errRefusedHost)
			}}))
	})
}

// policyTransport sends each request with the current limits' client.
type policyTransport struct{}

func (policyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	httpsMu.Lock()
	l := httpsLimits
	httpsMu.Unlock()
	return l.Policy.httpClient(l.CloneTimeout, l.MaxRepoBytes).Transport.RoundTrip(r)
}

// localRepositories opens a file:// repository, bare or with a work tree, for the
// in-process git server (go-git's own filesystem loader takes a work tree for the .git
// directory and finds no references in it).
type localRepositories struct{}

func (localRepositories) Load(ep *transport.Endpoint) (storer.Storer, error) {
	repo, err := git.PlainOpen(ep.Path)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, transport.ErrRepositoryNotFound
	}
	if err != nil {
		return nil, err
	}
	return repo.Storer, nil
}

var pureGoFileTransport sync.Once

// Load clones ref (a branch, else a tag) and reads the manifest at manifestPath when it
// exists there, otherwise the dbt project files.
func (g *GitFetcher) Load(ctx context.Context, integ *integrationDoc, ref string) (*convert.Project, error) {
	host := repoHost(integ.RepoURL)
	if err := g.limits.Policy.CheckURL(ctx, integ.RepoURL); err != nil {
		return nil, permanentError{err}
	}
	dir, err := os.MkdirTemp(g.root, "job-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, g.limits.CloneTimeout)
	defer cancel()
	opts := &git.CloneOptions{URL: integ.RepoURL, Depth: 1, SingleBranch: true, Tags: git.NoTags}
	if strings.HasPrefix(integ.RepoURL, "file://") {
		// The in-process server does not negotiate shallow clones; a local clone is cheap anyway.
		opts.Depth = 0
	}
	if opts.Auth, err = gitAuth(g.sealer, integ); err != nil {
		return nil, err
	}
	var cloneErr error
	for _, name := range refCandidates(ref) {
		_ = os.RemoveAll(dir)
		opts.ReferenceName = name
		if _, cloneErr = git.PlainCloneContext(ctx, dir, false, opts); cloneErr == nil {
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	if cloneErr != nil {
		return nil, cloneFailure(ctx, host, ref, cloneErr, g.limits)
	}
	if err := scanClone(dir, g.limits); err != nil {
		return nil, permanentError{err}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if integ.ManifestPath != "" {
		rel := strings.TrimPrefix(path.Clean("/"+integ.ManifestPath), "/")
		if f, err := root.Open(rel); err == nil {
			defer f.Close()
			st, err := f.Stat()
			switch {
			case err != nil:
				return nil, permanentError{fmt.Errorf("repository file %s cannot be read", rel)}
			case !st.Mode().IsRegular():
				return nil, permanentError{fmt.Errorf("repository file %s is not a regular file", rel)}
			case st.Size() > g.limits.MaxManifest:
				return nil, permanentError{fmt.Errorf("repository file %s is %d bytes, over the manifest limit of %d bytes", rel, st.Size(), g.limits.MaxManifest)}
			}
			return decodeManifest(bufio.NewReaderSize(io.LimitReader(f, g.limits.MaxManifest), 256<<10))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, permanentError{fmt.Errorf("repository file %s cannot be read: it leads outside the repository or is not a file", rel)}
		}
	}
	proj := strings.Trim(path.Clean("/"+integ.ProjectPath), "/")
	bfs := &boundedFS{fsys: root.FS(), maxFile: g.limits.MaxFileBytes}
	p, err := convert.ReadProject(bfs, proj)
	if bfs.violation != nil {
		return nil, permanentError{bfs.violation}
	}
	if err != nil {
		return nil, permanentError{err}
	}
	return p, nil
}

// refCandidates are the references a ref may name, in order: a branch, then a tag.
func refCandidates(ref string) []plumbing.ReferenceName {
	return []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
}

// gitAuth is the integration's saved credentials as go-git auth (nil without any).
func gitAuth(sealer *Sealer, integ *integrationDoc) (transport.AuthMethod, error) {
	if len(integ.Credentials) == 0 {
		return nil, nil
	}
	plain, err := sealer.Open(integ.Credentials, integ.DeploymentID)
	if err != nil {
		return nil, permanentError{errors.New("saved git credentials cannot be decrypted (was a DBT_CREDENTIALS_KEY key removed?)")}
	}
	var c GitCredentials
	_ = json.Unmarshal(plain, &c)
	user := c.Username
	if user == "" {
		user = "x-access-token"
	}
	return &githttp.BasicAuth{Username: user, Password: c.Token}, nil
}

// RefLookup tells whether a ref names a branch or a tag of an integration's repository,
// by listing the remote's references (git ls-remote: no objects are fetched). The API
// asks it for refs that look like commit SHAs, which are legal branch and tag names
// (a date tag such as 20240601) but must not be taken as commits.
type RefLookup struct {
	sealer *Sealer
	limits GitLimits
}

// NewRefLookup lists references through the same policy and limits as clones.
func NewRefLookup(sealer *Sealer, limits GitLimits) *RefLookup {
	limits = limits.withDefaults()
	installTransports(limits)
	return &RefLookup{sealer: sealer, limits: limits}
}

// refListTimeout bounds the listing inside the request that asked for it.
const refListTimeout = 15 * time.Second

// maxListedRefs bounds how many advertised references are looked at.
const maxListedRefs = 100_000

// Exists reports whether ref is a branch or a tag of integ's repository. An error means
// the repository could not be asked (the caller may let the job find out).
func (l *RefLookup) Exists(ctx context.Context, integ *integrationDoc, ref string) (bool, error) {
	if err := l.limits.Policy.CheckURL(ctx, integ.RepoURL); err != nil {
		return false, permanentError{err}
	}
	auth, err := gitAuth(l.sealer, integ)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, min(refListTimeout, l.limits.CloneTimeout))
	defer cancel()
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{integ.RepoURL}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return false, cloneFailure(ctx, repoHost(integ.RepoURL), ref, err, l.limits)
	}
	want := refCandidates(ref)
	for i, r := range refs {
		if i >= maxListedRefs {
			break
		}
		if r.Name() == want[0] || r.Name() == want[1] {
			return true, nil
		}
	}
	return false, nil
}

// repoHost is the host of a repository URL, for messages ("" when it has none).
func repoHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.Scheme == "file" {
		return "the local file system"
	}
	return u.Hostname()
}

// cloneFailure turns a clone error into a message naming the host and the kind of
// failure, never the server's own words (they would make the clone an oracle for whatever
// the URL reaches).
func cloneFailure(ctx context.Context, host, ref string, err error, l GitLimits) error {
	switch {
	case errors.Is(err, errRefusedHost):
		var msg string
		if i := strings.Index(err.Error(), errRefusedHost.Error()+": "); i >= 0 {
			msg = err.Error()[i+len(errRefusedHost.Error())+2:]
		} else {
			msg = "host " + host + " is refused"
		}
		return permanentError{errors.New(msg)}
	case errors.Is(err, errRepoTooLarge):
		return permanentError{fmt.Errorf("the repository at %s is over the size limit of %d bytes (DBT_SYNC_MAX_REPO_BYTES)", host, l.MaxRepoBytes)}
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return permanentError{fmt.Errorf("cloning from %s took longer than %s (DBT_SYNC_CLONE_TIMEOUT)", host, l.CloneTimeout)}
	case errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed):
		return permanentError{fmt.Errorf("git server %s refused the credentials", host)}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return permanentError{fmt.Errorf("no repository at %s under that path", host)}
	case errors.Is(err, plumbing.ErrReferenceNotFound) || strings.Contains(err.Error(), "couldn't find remote ref") || strings.Contains(err.Error(), "reference not found"):
		return permanentError{fmt.Errorf("git ref %q not found in the repository at %s", ref, host)}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("git server %s cannot be reached (network error)", host)
	}
	return fmt.Errorf("cloning from %s failed (the server's answer is not a git repository we can read)", host)
}

// scanClone walks the checked-out tree without following links: it bounds the number of
// files and their bytes, and refuses a symlink that leads outside the clone (or to
// anything but a file or directory inside it), naming the file.
func scanClone(dir string, l GitLimits) error {
	files, bytes := 0, int64(0)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		files++
		if files > l.MaxFiles {
			return fmt.Errorf("the repository has more than %d files (DBT_SYNC_MAX_FILES)", l.MaxFiles)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(p)
			inside := err == nil && (target == dir || strings.HasPrefix(target, dir+string(filepath.Separator)))
			if !inside {
				return fmt.Errorf("repository file %s is a symbolic link that leads outside the repository; links must stay inside it", filepath.ToSlash(rel))
			}
			if st, err := os.Stat(target); err != nil || !(st.Mode().IsRegular() || st.IsDir()) {
				return fmt.Errorf("repository file %s is a symbolic link to something that is not a file or directory", filepath.ToSlash(rel))
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("repository file %s is not a regular file", filepath.ToSlash(rel))
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		bytes += info.Size()
		if bytes > l.MaxRepoBytes {
			return fmt.Errorf("the repository's files are over %d bytes (DBT_SYNC_MAX_REPO_BYTES)", l.MaxRepoBytes)
		}
		return nil
	})
}

// boundedFS is the checkout as the conversion reads it (through os.Root, so no path leads
// out of it): only regular files and directories, each file at most maxFile bytes. The
// first violation is kept, and fails the job naming the file.
type boundedFS struct {
	fsys      fs.FS
	maxFile   int64
	violation error
}

func (b *boundedFS) Open(name string) (fs.File, error) {
	f, err := b.fsys.Open(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && b.violation == nil {
			b.violation = fmt.Errorf("repository file %s cannot be read: it leads outside the repository or is not a file", name)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	var bad error
	switch {
	case st.IsDir():
	case !st.Mode().IsRegular():
		bad = fmt.Errorf("repository file %s is not a regular file", name)
	case st.Size() > b.maxFile:
		bad = fmt.Errorf("repository file %s is %d bytes, over the limit of %d bytes for a file the conversion reads (DBT_SYNC_MAX_FILE_BYTES)", name, st.Size(), b.maxFile)
	}
	if bad != nil {
		f.Close()
		if b.violation == nil {
			b.violation = bad
		}
		return nil, bad
	}
	return f, nil
}

// redactURL drops any user info from a clone URL before it reaches a message or a log.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 && (strings.Index(rest, "/") < 0 || at < strings.Index(rest, "/")) {
			return u[:i+3] + rest[at+1:]
		}
	}
	return u
}
