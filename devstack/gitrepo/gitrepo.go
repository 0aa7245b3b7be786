// Package gitrepo writes git repositories for tests, with the standard library only: loose
// objects are written as they stream, so a test can commit a blob far larger than memory
// (a compressed bomb of zeros) or trees that share subtrees (a tree bomb), which neither
// the git binary nor go-git's worktree would make cheaply. The result opens with git and
// go-git like any repository (objects under .git, HEAD on refs/heads/main).
package gitrepo

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Hash is an object's id, hex.
type Hash string

// Modes of tree entries.
const (
	ModeFile    = "100644"
	ModeDir     = "40000"
	ModeSymlink = "120000"
)

// TreeEntry is one entry of a tree object.
type TreeEntry struct {
	Name string
	Mode string
	Hash Hash
}

// Repo is a repository being written.
type Repo struct{ git string }

// Init creates an empty repository at dir (its objects in dir/.git).
func Init(dir string) (*Repo, error) {
	git := filepath.Join(dir, ".git")
	for _, d := range []string{"objects", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(git, d), 0o755); err != nil {
			return nil, err
		}
	}
	files := map[string]string{"HEAD": "ref: refs/heads/main\n", "config": "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(git, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	return &Repo{git: git}, nil
}

// object writes a loose object of kind whose content, size bytes, r yields.
func (r *Repo) object(kind string, size int64, content io.Reader) (Hash, error) {
	tmp, err := os.CreateTemp(filepath.Join(r.git, "objects"), "tmp-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	sum := sha1.New()
	zw, _ := zlib.NewWriterLevel(tmp, zlib.BestSpeed)
	w := io.MultiWriter(sum, zw)
	if _, err := fmt.Fprintf(w, "%s %d\x00", kind, size); err != nil {
		return "", err
	}
	if n, err := io.Copy(w, content); err != nil || n != size {
		return "", fmt.Errorf("gitrepo: object content %d bytes, want %d (%v)", n, size, err)
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	h := hexOf(sum)
	dir := filepath.Join(r.git, "objects", string(h[:2]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return h, os.Rename(tmp.Name(), filepath.Join(dir, string(h[2:])))
}

func hexOf(h hash.Hash) Hash { return Hash(hex.EncodeToString(h.Sum(nil))) }

// Blob writes a blob.
func (r *Repo) Blob(content []byte) (Hash, error) {
	return r.object("blob", int64(len(content)), bytes.NewReader(content))
}

// ZeroBlob writes a blob of size zero bytes, streamed: it costs a few MB of disk per GB
// and no memory.
func (r *Repo) ZeroBlob(size int64) (Hash, error) {
	return r.object("blob", size, io.LimitReader(zeros{}, size))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Tree writes a tree of entries (in any order; git's order is applied).
func (r *Repo) Tree(entries []TreeEntry) (Hash, error) {
	sorted := append([]TreeEntry(nil), entries...)
	// Git compares a directory's name as if it ended with '/'.
	key := func(e TreeEntry) string {
		if e.Mode == ModeDir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(sorted, func(i, j int) bool { return key(sorted[i]) < key(sorted[j]) })
	var b bytes.Buffer
	for _, e := range sorted {
		raw, err := hex.DecodeString(string(e.Hash))
		if err != nil || len(raw) != sha1.Size {
			return "", fmt.Errorf("gitrepo: entry %s: bad hash %q", e.Name, e.Hash)
		}
		fmt.Fprintf(&b, "%s %s\x00", e.Mode, e.Name)
		b.Write(raw)
	}
	return r.object("tree", int64(b.Len()), &b)
}

// Files writes the blobs of files (slash-separated path -> content) and the trees that
// hold them, and returns the root tree.
func (r *Repo) Files(files map[string][]byte) (Hash, error) {
	type dir struct {
		files map[string]Hash
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]Hash{}, dirs: map[string]*dir{}} }
	root := newDir()
	for p, content := range files {
		h, err := r.Blob(content)
		if err != nil {
			return "", err
		}
		d := root
		parts := strings.Split(path.Clean(p), "/")
		for _, part := range parts[:len(parts)-1] {
			if d.dirs[part] == nil {
				d.dirs[part] = newDir()
			}
			d = d.dirs[part]
		}
		d.files[parts[len(parts)-1]] = h
	}
	var write func(d *dir) (Hash, error)
	write = func(d *dir) (Hash, error) {
		var entries []TreeEntry
		for name, h := range d.files {
			entries = append(entries, TreeEntry{Name: name, Mode: ModeFile, Hash: h})
		}
		for name, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return "", err
			}
			entries = append(entries, TreeEntry{Name: name, Mode: ModeDir, Hash: h})
		}
		return r.Tree(entries)
	}
	return write(root)
}

// Commit writes a commit of tree (no parent) and points refs/heads/branch at it.
func (r *Repo) Commit(tree Hash, branch string) (Hash, error) {
	body := fmt.Sprintf("tree %s\nauthor t <t@example.test> 1700000000 +0000\ncommitter t <t@example.test> 1700000000 +0000\n\ncommit\n", tree)
	h, err := r.object("commit", int64(len(body)), strings.NewReader(body))
	if err != nil {
		return "", err
	}
	ref := filepath.Join(r.git, "refs", "heads", filepath.FromSlash(branch))
	if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
		return "", err
	}
	return h, os.WriteFile(ref, []byte(string(h)+"\n"), 0o644)
}

// ZeroModel writes a dbt project whose one model, models/zero.sql, is size zero bytes (a
// compressed bomb: a few hundred KB on disk per GB it inflates to), and returns its root
// tree.
func (r *Repo) ZeroModel(size int64) (Hash, error) {
	zero, err := r.ZeroBlob(size)
	if err != nil {
		return "", err
	}
	models, err := r.Tree([]TreeEntry{{Name: "zero.sql", Mode: ModeFile, Hash: zero}})
	if err != nil {
		return "", err
	}
	proj, err := r.Blob([]byte("name: bomb\nversion: '1'\nmodel-paths: [models]\n"))
	if err != nil {
		return "", err
	}
	return r.Tree([]TreeEntry{{Name: "dbt_project.yml", Mode: ModeFile, Hash: proj}, {Name: "models", Mode: ModeDir, Hash: models}})
}

// WriteZeroModel creates, at dir, a repository whose main holds ZeroModel(size).
func WriteZeroModel(dir string, size int64) error {
	r, err := Init(dir)
	if err != nil {
		return err
	}
	root, err := r.ZeroModel(size)
	if err != nil {
		return err
	}
	_, err = r.Commit(root, "main")
	return err
}
