package gitsource

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// packSink is the storage a fetch writes into: references and shallow commits in
// memory, and the pack, as the server sends it, into a file of at most max bytes. go-git
// hands a storage that is a PackfileWriter the raw pack instead of indexing it itself.
type packSink struct {
	*memory.Storage
	path string
	max  int64
}

// PackfileWriter is where go-git copies the fetched pack.
func (s *packSink) PackfileWriter() (io.WriteCloser, error) {
	f, err := os.Create(s.path)
	if err != nil {
		return nil, err
	}
	return &limitedFile{f: f, left: s.max}, nil
}

// limitedFile refuses writes past its limit (errRepoTooLarge: cloneFailure names it).
type limitedFile struct {
	f    *os.File
	left int64
}

func (w *limitedFile) Write(p []byte) (int, error) {
	if int64(len(p)) > w.left {
		return 0, errRepoTooLarge
	}
	w.left -= int64(len(p))
	return w.f.Write(p)
}

func (w *limitedFile) Close() error { return w.f.Close() }

// fetch downloads ref (a branch, else a tag) into dir as one pack (dir/pack) and returns
// the commit or tag it names. It checks nothing out: the pack is read by explodePack.
func (s *Source) fetch(ctx context.Context, in dbtsync.Integration, ref, dir string) (plumbing.Hash, error) {
	opts := &git.FetchOptions{Depth: 1, Tags: git.NoTags}
	if strings.HasPrefix(in.RepoURL, "file://") {
		// The in-process server does not negotiate shallow clones; a local clone is cheap anyway.
		opts.Depth = 0
	}
	var err error
	if opts.Auth, err = s.auth(in); err != nil {
		return plumbing.ZeroHash, err
	}
	var fetchErr error
	for _, name := range refCandidates(ref) {
		sink := &packSink{Storage: memory.NewStorage(), path: filepath.Join(dir, "pack"), max: s.limits.MaxRepoBytes}
		remote := git.NewRemote(sink, &config.RemoteConfig{Name: "origin", URLs: []string{in.RepoURL}})
		opts.RefSpecs = []config.RefSpec{config.RefSpec("+" + name.String() + ":" + name.String())}
		fetchErr = remote.FetchContext(ctx, opts)
		if fetchErr == nil {
			r, err := sink.Reference(name)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			return r.Hash(), nil
		}
		if ctx.Err() != nil || errors.Is(fetchErr, errRepoTooLarge) {
			break
		}
	}
	return plumbing.ZeroHash, fetchErr
}
