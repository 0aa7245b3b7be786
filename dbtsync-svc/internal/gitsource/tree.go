package gitsource

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// The commit's tree is read from the object store, never checked out: walkTree visits
// it entry by entry, counting files and their bytes against the limits before any file
// is read (a tree that names one subtree a million times is refused at the limit, not
// expanded), and keeps the paths in memory as a small index (node) that treeFS serves.
// Symbolic links are resolved inside that index: one that leads outside the repository
// fails the job naming it, as the checkout's scan did. Beyond the per-object limits, the
// whole walk and every lookup in the index run on the clone's budget (meter, budget.go),
// and stop when the job's context ends.

// node is one entry of the walked tree.
type node struct {
	name     string
	dir      bool
	symlink  bool
	target   string // a symbolic link's target, as stored
	blob     storedObject
	children map[string]*node // a directory's entries
	names    []string         // ... in git's order
}

// Limits on what a tree walk reads of single objects held in memory.
const (
	maxCommitBytes    = 1 << 20 // a commit or tag object
	maxLinkBytes      = 4096    // a symbolic link's target (PATH_MAX)
	maxPathBytes      = 4096    // a path in the tree, from its root (PATH_MAX)
	maxTagDepth       = 8       // annotated tags pointing at tags
	maxLinksPerLookup = 40      // links followed in all to resolve one path, however nested (Linux's MAXSYMLINKS)
)

// treeOf returns the tree a commit (or an annotated tag of one) names.
func (s *objectStore) treeOf(h plumbing.Hash) (plumbing.Hash, error) {
	for range maxTagDepth {
		o, ok := s.objs[h]
		if !ok {
			return plumbing.ZeroHash, fmt.Errorf("%w: the fetched ref names an object the pack does not hold", errMalformedPack)
		}
		if o.size > maxCommitBytes {
			return plumbing.ZeroHash, fmt.Errorf("%w: a commit of %d bytes", errMalformedPack, o.size)
		}
		b, err := io.ReadAll(s.reader(o))
		if err != nil {
			return plumbing.ZeroHash, err
		}
		field := "tree "
		switch o.typ {
		case plumbing.CommitObject:
		case plumbing.TagObject:
			field = "object "
		default:
			return plumbing.ZeroHash, fmt.Errorf("%w: the fetched ref names a %v", errMalformedPack, o.typ)
		}
		line, _, _ := bytes.Cut(b, []byte("\n"))
		hexHash, ok := bytes.CutPrefix(line, []byte(field))
		if !ok || len(hexHash) != 40 {
			return plumbing.ZeroHash, fmt.Errorf("%w: a %v without its %q", errMalformedPack, o.typ, strings.TrimSpace(field))
		}
		if _, err := hex.DecodeString(string(hexHash)); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%w: a %v naming %q", errMalformedPack, o.typ, hexHash)
		}
		h = plumbing.NewHash(string(hexHash))
		if o.typ == plumbing.CommitObject {
			return h, nil
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("%w: tags nested more than %d deep", errMalformedPack, maxTagDepth)
}

// walker counts what a tree walk has visited.
type walker struct {
	store       *objectStore
	limits      Limits
	meter       *meter
	files, dirs int
	bytes       int64
	links       []string // paths of the symbolic links, resolved once the walk is over
}

// walkTree indexes the tree at h within the limits: at most MaxFiles files (links
// included) and as many directories, and MaxRepoBytes of file content, counted per path;
// every entry it reads, and every path component its link resolution walks, is charged to
// m. It stops when ctx ends.
func walkTree(ctx context.Context, store *objectStore, h plumbing.Hash, m *meter) (*node, error) {
	w := &walker{store: store, limits: m.limits, meter: m}
	root := &node{dir: true}
	stack := []subdir{{root, h, ""}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		subdirs, err := w.readTree(ctx, t.n, t.hash, t.path)
		if err != nil {
			return nil, err
		}
		stack = append(stack, subdirs...)
	}
	for _, p := range w.links {
		if _, _, err := resolve(ctx, root, p, m); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// subdir is a directory to read: its node, its tree, its path.
type subdir struct {
	n    *node
	hash plumbing.Hash
	path string
}

// readTree reads the tree object h into dir (at path p), streaming its entries. Every
// entry read is charged, the ones a checkout would skip included.
func (w *walker) readTree(ctx context.Context, dir *node, h plumbing.Hash, p string) ([]subdir, error) {
	o, ok := w.store.objs[h]
	if !ok || o.typ != plumbing.TreeObject {
		return nil, fmt.Errorf("%w: directory %q is not a tree the pack holds", errMalformedPack, p)
	}
	r := bufio.NewReader(w.store.reader(o))
	dir.children = map[string]*node{}
	var subdirs []subdir
	for {
		mode, err := r.ReadString(' ')
		if err == io.EOF && mode == "" {
			return subdirs, nil
		}
		if err != nil || len(mode) > 8 {
			return nil, fmt.Errorf("%w: tree %q", errMalformedPack, p)
		}
		name, err := readName(r)
		if err != nil {
			return nil, fmt.Errorf("%w: tree %q: %v", errMalformedPack, p, err)
		}
		var raw [20]byte
		if _, err := io.ReadFull(r, raw[:]); err != nil {
			return nil, fmt.Errorf("%w: tree %q", errMalformedPack, p)
		}
		if err := w.meter.entry(ctx, p, name); err != nil {
			return nil, err
		}
		if _, dup := dir.children[name]; dup || name == "." || name == ".." || strings.EqualFold(name, ".git") {
			continue // what a checkout would never write (a .git of its own included)
		}
		full := name
		if p != "" {
			full = p + "/" + name
		}
		n, sub, err := w.entry(strings.TrimSuffix(mode, " "), name, full, plumbing.Hash(raw))
		if err != nil {
			return nil, err
		}
		if n == nil {
			continue
		}
		dir.children[name] = n
		dir.names = append(dir.names, name)
		if sub != nil {
			subdirs = append(subdirs, *sub)
		}
	}
}

// readName reads an entry's name (up to its NUL), bounded.
func readName(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for b.Len() <= 4096 {
		c, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		if c == 0 {
			if b.Len() == 0 {
				return "", errors.New("an entry without a name")
			}
			return b.String(), nil
		}
		if c == '/' {
			return "", errors.New("an entry name with '/'")
		}
		b.WriteByte(c)
	}
	return "", errors.New("an entry name over 4096 bytes")
}

// entry counts one tree entry and returns its node (nil: skipped) and, for a
// directory, the tree to read into it.
func (w *walker) entry(mode, name, full string, h plumbing.Hash) (*node, *subdir, error) {
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: entry %q has mode %q", errMalformedPack, full, mode)
	}
	switch m & 0o170000 {
	case 0o040000:
		w.dirs++
		if w.dirs > w.limits.MaxFiles {
			return nil, nil, overLimit("the repository has more than %d directories, the most a sync reads", w.limits.MaxFiles)
		}
		n := &node{name: name, dir: true}
		return n, &subdir{n, h, full}, nil
	case 0o160000:
		return nil, nil, nil // a submodule: a commit of another repository, not cloned
	case 0o100000, 0o120000:
	default:
		return nil, nil, fmt.Errorf("%w: entry %q has mode %q", errMalformedPack, full, mode)
	}
	w.files++
	if w.files > w.limits.MaxFiles {
		return nil, nil, overLimit("the repository has more than %d files, the most a sync reads", w.limits.MaxFiles)
	}
	o, ok := w.store.objs[h]
	if !ok || o.typ != plumbing.BlobObject {
		return nil, nil, fmt.Errorf("%w: file %q is not a blob the pack holds", errMalformedPack, full)
	}
	if o.size > w.limits.MaxRepoBytes-w.bytes {
		return nil, nil, overLimit("the repository's files are over the size limit of %d bytes", w.limits.MaxRepoBytes)
	}
	w.bytes += o.size
	n := &node{name: name, blob: o}
	if m&0o170000 == 0o120000 {
		if o.size > maxLinkBytes {
			return nil, nil, overLimit("repository file %s is a symbolic link of %d bytes", full, o.size)
		}
		target, err := io.ReadAll(w.store.reader(o))
		if err != nil {
			return nil, nil, err
		}
		n.symlink, n.target = true, string(target)
		w.links = append(w.links, full)
	}
	return n, nil, nil
}

// errOutside: a path whose symbolic links lead outside the repository.
var errOutside = errors.New("outside the repository")

// errNotExist: no such path in the tree.
var errNotExist = errors.New("no such file")

// resolve finds the node at path p (slash-separated, relative to root) and the
// directories that lead to it (root excluded), following symbolic links inside the
// repository, the final one included, as the kernel would: ".." after a link leaves the
// link's target, and at most maxLinksPerLookup links are followed in all, however they
// nest. Every component walked is charged to m. A link that leads outside, or to
// nothing, is an error naming it.
func resolve(ctx context.Context, root *node, p string, m *meter) (*node, []*node, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	lk := &lookup{ctx: ctx, root: root, meter: m, path: p}
	return lk.walk(nil, p)
}

// lookup is the resolution of one path: the links it has followed so far.
type lookup struct {
	ctx   context.Context
	root  *node
	meter *meter
	path  string // the path resolved
	links int
}

// walk resolves p from the directory stack (the real directories from the root, as
// resolve returns them).
func (lk *lookup) walk(stack []*node, p string) (*node, []*node, error) {
	cur := top(lk.root, stack)
	for rest, more := p, true; more; {
		var part string
		part, rest, more = strings.Cut(rest, "/")
		if err := lk.meter.step(lk.ctx, 1); err != nil {
			return nil, nil, err
		}
		switch part {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return nil, nil, errOutside
			}
			stack = stack[:len(stack)-1]
			cur = top(lk.root, stack)
			continue
		}
		if !cur.dir {
			return nil, nil, errNotExist
		}
		next := cur.children[part]
		if next == nil {
			return nil, nil, errNotExist
		}
		if next.symlink {
			target, targetStack, err := lk.follow(stack, next)
			if err != nil {
				return nil, nil, err
			}
			if more && !target.dir {
				return nil, nil, errNotExist
			}
			cur, stack = target, targetStack
			continue
		}
		cur = next
		if cur.dir {
			stack = append(stack, cur)
		}
	}
	return cur, stack, nil
}

func top(root *node, stack []*node) *node {
	if len(stack) == 0 {
		return root
	}
	return stack[len(stack)-1]
}

// follow resolves the link n found in the directory stack; the caller goes on from what
// it returns.
func (lk *lookup) follow(stack []*node, n *node) (*node, []*node, error) {
	linkPath := func() string { return strings.Join(append(pathOf(stack), n.name), "/") }
	lk.links++
	if lk.links > maxLinksPerLookup {
		return nil, nil, lk.meter.fail("repository path %s: resolving it follows more symbolic links than the limit of %d links per path", truncate(lk.path, 256), maxLinksPerLookup)
	}
	if strings.HasPrefix(n.target, "/") {
		return nil, nil, linkOutside(linkPath())
	}
	// The target is walked from the link's directory (its ".." pops what the stack holds:
	// not path.Join, whose lexical ".." would skip the links on the way). The stack is
	// clipped so that the target's directories never overwrite it; copying it is charged.
	if err := lk.meter.step(lk.ctx, len(stack)); err != nil {
		return nil, nil, err
	}
	target, targetStack, err := lk.walk(slices.Clip(stack), n.target)
	switch {
	case errors.Is(err, errOutside):
		return nil, nil, linkOutside(linkPath())
	case errors.Is(err, errNotExist):
		return nil, nil, overLimit("repository file %s is a symbolic link to something that is not a file or directory", linkPath())
	}
	return target, targetStack, err
}

func linkOutside(p string) error {
	return overLimit("repository file %s is a symbolic link that leads outside the repository; links must stay inside it", p)
}

// pathOf is the names of the directories in stack.
func pathOf(stack []*node) []string {
	names := make([]string, len(stack))
	for i, n := range stack {
		names[i] = n.name
	}
	return names
}
