package dbtsync

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// GitFetcher reads a dbt project at a ref of the integration's repository: a shallow,
// single-ref clone into a temporary directory, removed afterwards.
type GitFetcher struct {
	sealer *Sealer
	tmpDir string
}

// NewGitFetcher clones under tmpDir ("" is the system temp directory).
func NewGitFetcher(sealer *Sealer, tmpDir string) *GitFetcher {
	pureGoFileTransport.Do(func() {
		// go-git's file:// transport runs the git-upload-pack binary, which the distroless
		// production image does not have; its in-process server reads the repository itself.
		client.InstallProtocol("file", server.NewClient(localRepositories{}))
	})
	return &GitFetcher{sealer: sealer, tmpDir: tmpDir}
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
	dir, err := os.MkdirTemp(g.tmpDir, "dbtsync-clone-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	opts := &git.CloneOptions{URL: integ.RepoURL, Depth: 1, SingleBranch: true, Tags: git.NoTags}
	if strings.HasPrefix(integ.RepoURL, "file://") {
		// The in-process server does not negotiate shallow clones; a local clone is cheap anyway.
		opts.Depth = 0
	}
	if len(integ.Credentials) > 0 {
		plain, err := g.sealer.Open(integ.Credentials, integ.DeploymentID)
		if err != nil {
			return nil, permanentError{errors.New("saved git credentials cannot be decrypted (was DBT_CREDENTIALS_KEY changed?)")}
		}
		var c GitCredentials
		_ = json.Unmarshal(plain, &c)
		user := c.Username
		if user == "" {
			user = "x-access-token"
		}
		opts.Auth = &githttp.BasicAuth{Username: user, Password: c.Token}
	}
	var cloneErr error
	for _, name := range []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)} {
		_ = os.RemoveAll(dir)
		opts.ReferenceName = name
		if _, cloneErr = git.PlainCloneContext(ctx, dir, false, opts); cloneErr == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if cloneErr != nil {
		msg := cloneErr.Error()
		if integ.Credentials != nil {
			msg = strings.ReplaceAll(msg, integ.RepoURL, redactURL(integ.RepoURL))
		}
		if strings.Contains(msg, "couldn't find remote ref") || strings.Contains(msg, "reference not found") || strings.Contains(msg, "authentication") || strings.Contains(msg, "not found") {
			return nil, permanentError{fmt.Errorf("git ref %q of %s: %s", ref, redactURL(integ.RepoURL), msg)}
		}
		return nil, fmt.Errorf("git clone %s at %q: %s", redactURL(integ.RepoURL), ref, msg)
	}
	if integ.ManifestPath != "" {
		mp := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+integ.ManifestPath)))
		if f, err := os.Open(mp); err == nil {
			defer f.Close()
			return decodeManifest(bufio.NewReaderSize(f, 256<<10))
		}
	}
	proj := strings.Trim(path.Clean("/"+integ.ProjectPath), "/")
	p, err := convert.ReadProject(os.DirFS(dir), proj)
	if err != nil {
		return nil, permanentError{err}
	}
	return p, nil
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
