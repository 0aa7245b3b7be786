package gitsource

import (
	"errors"
	"net/http"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

var (
	pureGoFileTransport sync.Once
	httpsMu             sync.Mutex
	httpsTransport      http.RoundTripper // the policy's transport for the limits of the last Source made
	httpsOnce           sync.Once
)

// installTransports sets go-git's file and https transports for this process.
func installTransports(l Limits) {
	pureGoFileTransport.Do(func() {
		// go-git's file:// transport runs the git-upload-pack binary, which the distroless
		// production image does not have; its in-process server reads the repository itself.
		client.InstallProtocol("file", server.NewClient(localRepositories{}))
	})
	installHTTPS(l)
}

// installHTTPS makes go-git clone over https with the policy's client (go-git keeps one
// client per scheme for the process; the limits of the last Source made apply).
func installHTTPS(l Limits) {
	rt := l.Policy.transport(l.MaxRepoBytes, l.MaxRefAdverts)
	httpsMu.Lock()
	httpsTransport = rt
	httpsMu.Unlock()
	httpsOnce.Do(func() {
		client.InstallProtocol("https", githttp.NewClient(&http.Client{Transport: policyTransport{}, Timeout: 0,
			CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}))
	})
}

// errRedirect refuses a git server's redirect: it could lead anywhere.
var errRedirect = &dbtsync.RepositoryRefusedError{Reason: "the git server answered with a redirect, which clones do not follow"}

// policyTransport sends each request with the current limits' transport: one per
// Source made, so the requests of a clone and later clones reuse its connections.
type policyTransport struct{}

func (policyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	httpsMu.Lock()
	rt := httpsTransport
	httpsMu.Unlock()
	return rt.RoundTrip(r)
}

// localRepositories opens a file:// repository, bare or with a work tree, for the
// in-process git server (go-git's own filesystem loader takes a work tree for the .git
// directory and finds no references in it). Objects over servedInMemory bytes are
// streamed from disk into the pack, never read whole: the server runs in the worker.
type localRepositories struct{}

const servedInMemory = 1 << 20

func (localRepositories) Load(ep *transport.Endpoint) (storer.Storer, error) {
	repo, err := git.PlainOpen(ep.Path)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, transport.ErrRepositoryNotFound
	}
	if err != nil {
		return nil, err
	}
	st, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo.Storer, nil
	}
	return filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRUDefault(),
		filesystem.Options{LargeObjectThreshold: servedInMemory}), nil
}
