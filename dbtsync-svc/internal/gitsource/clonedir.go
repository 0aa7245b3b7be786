package gitsource

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// NewCloner is New that also clones (the worker process), under a directory of this
// process's own made in tmpDir ("" is the system temp directory). Directories that
// crashed workers left behind are removed first: each process holds a lock on its own
// for as long as it lives.
func NewCloner(opener Opener, tmpDir string, limits Limits) (*Source, error) {
	s := New(opener, limits)
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
	heldMu.Lock()
	heldLocks = append(heldLocks, lock) // held until the process exits
	heldMu.Unlock()
	s.root = root
	return s, nil
}

// Root is the directory this Source's clones go under, locked by this process ("" for
// New's, which clones nothing).
func (s *Source) Root() string { return s.root }

// heldLocks keeps the clone directories' lock files open (and so locked) for the process.
var (
	heldMu    sync.Mutex
	heldLocks []*os.File
)

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
