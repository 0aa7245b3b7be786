package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// treeFS is a walked tree as a read-only file system: directories list their entries in
// git's order (a symbolic link is listed as one), and opening a path follows links
// inside the repository. A file's size comes from the object store's index, so a reader
// knows it before reading a byte; its content streams from the store. Every lookup is
// charged to the clone's meter, and once ctx ends every call returns its error.
type treeFS struct {
	ctx   context.Context
	root  *node
	store *objectStore
	meter *meter
}

// stopped is why reading the tree must stop, if it must: the job's context ended
// (returned as is: the worker reports a cancel or a timeout), or the clone passed a work
// budget (a permanent work_limit failure naming it), which a reader that swallows errors
// would not report itself.
func (t *treeFS) stopped() error {
	if err := t.ctx.Err(); err != nil {
		return err
	}
	if e := t.meter.err(); e != nil {
		return dbtsync.Permanent(dbtsync.Failure(dbtsync.CodeWorkLimit, "%s", e.msg))
	}
	return nil
}

var (
	_ fs.ReadDirFS = (*treeFS)(nil)
	_ fs.StatFS    = (*treeFS)(nil)
)

func (t *treeFS) lookup(op, name string) (*node, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return t.root, nil
	}
	n, _, err := resolve(t.ctx, t.root, name, t.meter)
	if errors.Is(err, errNotExist) {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return n, nil
}

// Open opens the file or directory at name.
func (t *treeFS) Open(name string) (fs.File, error) {
	n, err := t.lookup("open", name)
	if err != nil {
		return nil, err
	}
	info := fileInfo{n: n, name: path.Base(name)}
	if n.dir {
		return &treeDir{ctx: t.ctx, info: info, n: n}, nil
	}
	return &treeFile{ctx: t.ctx, info: info, r: t.store.reader(n.blob)}, nil
}

// Stat describes the file or directory at name (links followed).
func (t *treeFS) Stat(name string) (fs.FileInfo, error) {
	n, err := t.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return fileInfo{n: n, name: path.Base(name)}, nil
}

// ReadDir lists the directory at name.
func (t *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := t.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return entries(n, n.names), nil
}

// entries describes the entries of directory n named in names.
func entries(n *node, names []string) []fs.DirEntry {
	out := make([]fs.DirEntry, 0, len(names))
	for _, name := range names {
		out = append(out, fs.FileInfoToDirEntry(fileInfo{n: n.children[name], name: name}))
	}
	return out
}

// fileInfo describes a node; a link is described as a link (ReadDir's entries).
type fileInfo struct {
	n    *node
	name string
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.n.blob.size }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.n.dir }
func (i fileInfo) Sys() any           { return nil }
func (i fileInfo) Mode() fs.FileMode {
	switch {
	case i.n.dir:
		return fs.ModeDir | 0o555
	case i.n.symlink:
		return fs.ModeSymlink | 0o777
	}
	return 0o444
}

// treeFile is an open file: its content, streamed from the store.
type treeFile struct {
	ctx  context.Context
	info fileInfo
	r    *io.SectionReader
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *treeFile) Read(p []byte) (int, error) {
	if err := f.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errStoreRead, err)
	}
	return n, err
}

// errStoreRead: the object store's file could not be read (the worker's disk: its
// message names the worker's paths, and stays in its log).
var errStoreRead = errors.New("reading the fetched repository failed")

func (f *treeFile) Close() error { return nil }

// treeDir is an open directory.
type treeDir struct {
	ctx  context.Context
	info fileInfo
	n    *node
	read int // entries returned by ReadDir so far
}

func (d *treeDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}
func (d *treeDir) Close() error { return nil }

// ReadDir returns the next n entries (all with n <= 0), as fs.ReadDirFile does.
func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if err := d.ctx.Err(); err != nil {
		return nil, err
	}
	names := d.n.names[d.read:]
	if n <= 0 {
		d.read += len(names)
		return entries(d.n, names), nil
	}
	if len(names) == 0 {
		return nil, io.EOF
	}
	names = names[:min(n, len(names))]
	d.read += len(names)
	return entries(d.n, names), nil
}
