package gitsource

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/analyticsco/platform/devstack/gitrepo"
)

// The pack reader and the tree walk read what a hostile server sends. Fuzzed, they
// return errors, never panic, and never pass a work budget by more than one step.

// fuzzLimits are small, so that every input is cheap.
var fuzzLimits = Limits{MaxRepoBytes: 1 << 20, MaxFiles: 64, MaxTreeEntries: 400, MaxPathBytes: 16 << 10, MaxLookupSteps: 20_000}.WithDefaults()

// checkMeter fails when m counted more than one step past a budget of l.
func checkMeter(t *testing.T, m *meter, l Limits) {
	t.Helper()
	if n := m.entries.Load(); n > int64(l.MaxTreeEntries)+1 {
		t.Fatalf("%d tree entries read, over the budget of %d by more than one", n, l.MaxTreeEntries)
	}
	// One entry's path is at most maxPathBytes; one step of a lookup walks one component
	// or charges the directories a link starts from (a real path's depth).
	if n := m.pathBytes.Load(); n > l.MaxPathBytes+maxPathBytes {
		t.Fatalf("%d path bytes, over the budget of %d by more than one path", n, l.MaxPathBytes)
	}
	if n := m.steps.Load(); n > l.MaxLookupSteps+maxPathBytes/2+1 {
		t.Fatalf("%d lookup steps, over the budget of %d by more than one step", n, l.MaxLookupSteps)
	}
	if e := m.err(); e != nil && !strings.Contains(e.msg, "limit of") {
		t.Fatalf("a work-limit failure that names no limit: %q", e.msg)
	}
}

// walkAndLook walks the tree at h of store and, when it is indexed, looks every path of
// it up again through treeFS (links followed), checking the budgets after each.
func walkAndLook(t *testing.T, store *objectStore, h plumbing.Hash) {
	m := newMeter(fuzzLimits)
	root, err := walkTree(context.Background(), store, h, m)
	checkMeter(t, m, fuzzLimits)
	if err != nil {
		var work *workLimitError
		var limit *limitError
		if !errors.As(err, &work) && !errors.As(err, &limit) && !errors.Is(err, errMalformedPack) {
			t.Fatalf("walkTree: an error of no known kind: %v", err)
		}
		return
	}
	tree := &treeFS{ctx: context.Background(), root: root, store: store, meter: m}
	var visit func(n *node, p string)
	visit = func(n *node, p string) {
		for _, name := range n.names {
			full := name
			if p != "" {
				full = p + "/" + name
			}
			if len(full) > maxPathBytes {
				t.Fatalf("an indexed path of %d bytes", len(full))
			}
			if f, err := tree.Open(full); err == nil {
				_, _ = io.Copy(io.Discard, f)
				f.Close()
			}
			checkMeter(t, m, fuzzLimits)
			if c := n.children[name]; c.dir {
				visit(c, full)
			}
		}
	}
	visit(root, "")
}

// fuzzDir is a directory for the inputs of this process, one at a time (a fuzz target
// runs its inputs one after another in each process): a directory per input would be
// most of an input's time.
// TestMain removes it when the process ends.
var (
	fuzzDirOnce sync.Once
	fuzzDir     string
	fuzzDirErr  error
)

func scratch(t *testing.T) string {
	fuzzDirOnce.Do(func() { fuzzDir, fuzzDirErr = os.MkdirTemp("", "gitsource-fuzz-") })
	if fuzzDirErr != nil {
		t.Fatal(fuzzDirErr)
	}
	return fuzzDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fuzzDir != "" {
		_ = os.RemoveAll(fuzzDir)
	}
	os.Exit(code)
}

// storeOf writes objs into a new object store.
func storeOf(t *testing.T, objs map[plumbing.Hash]rawObject) *objectStore {
	store, err := newObjectStore(scratch(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for h, o := range objs {
		if _, err := store.file.WriteAt(o.data, store.end); err != nil {
			t.Fatal(err)
		}
		store.objs[h] = storedObject{typ: o.typ, offset: store.end, size: int64(len(o.data))}
		store.end += int64(len(o.data))
	}
	return store
}

type rawObject struct {
	typ  plumbing.ObjectType
	data []byte
}

// craftedStore reads a store from spec, one object per line, objects named by one byte:
//
//	T<id> <mode> <name> <ref>   an entry of tree <id>; ref is t<id> (a tree), b<id> (a blob)
//	B<id> <content>             blob <id> (a link's target, when a link names it)
//	R<id> <bytes>               raw bytes appended to tree <id> (what the parser must refuse)
//
// The root is tree 0.
func craftedStore(t *testing.T, spec []byte) (*objectStore, plumbing.Hash) {
	trees := map[byte]*bytes.Buffer{}
	blobs := map[byte][]byte{}
	tree := func(id byte) *bytes.Buffer {
		if trees[id] == nil {
			trees[id] = &bytes.Buffer{}
		}
		return trees[id]
	}
	for line := range bytes.SplitSeq(spec, []byte("\n")) {
		if len(line) < 3 || line[2] != ' ' {
			continue
		}
		kind, id, rest := line[0], line[1], line[3:]
		switch kind {
		case 'B':
			blobs[id] = rest
		case 'R':
			tree(id).Write(rest)
		case 'T':
			f := bytes.SplitN(rest, []byte(" "), 3)
			if len(f) != 3 {
				continue
			}
			h := refHash(f[2])
			fmt.Fprintf(tree(id), "%s %s\x00", f[0], f[1])
			tree(id).Write(h[:])
		}
	}
	objs := map[plumbing.Hash]rawObject{}
	for id, b := range trees {
		objs[objHash('t', id)] = rawObject{plumbing.TreeObject, b.Bytes()}
	}
	for id, b := range blobs {
		objs[objHash('b', id)] = rawObject{plumbing.BlobObject, b}
	}
	if _, ok := objs[objHash('t', '0')]; !ok {
		objs[objHash('t', '0')] = rawObject{plumbing.TreeObject, nil}
	}
	return storeOf(t, objs), objHash('t', '0')
}

func objHash(kind, id byte) plumbing.Hash {
	var h plumbing.Hash
	h[0], h[1] = kind, id
	return h
}

func refHash(ref []byte) plumbing.Hash {
	if len(ref) == 2 && (ref[0] == 't' || ref[0] == 'b') {
		return objHash(ref[0], ref[1])
	}
	var h plumbing.Hash
	copy(h[:], ref)
	return h
}

// Seeds of FuzzWalkTree: links naming links, a shared subtree of skipped entries, a deep
// path, a link loop, links leaving the tree.
func walkSeeds() []string {
	var bomb strings.Builder
	bomb.WriteString("B0 .\nT0 120000 a0 b0\n")
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&bomb, "B%d %s\nT0 120000 a%d b%d\n", i, strings.Repeat(fmt.Sprintf("a%d/", i-1), 60), i, i)
	}
	var shared strings.Builder
	shared.WriteString("Bx x\nT1 100644 . bx\nT1 100644 .. bx\nT1 100644 .git bx\nT1 160000 sub bx\n")
	for range 30 {
		shared.WriteString("T1 100644 f bx\n")
	}
	for i := range 20 {
		fmt.Fprintf(&shared, "T0 40000 d%02d t1\n", i)
	}
	var deep strings.Builder
	for i := byte('1'); i < '9'; i++ {
		fmt.Fprintf(&deep, "T%c 40000 %s t%c\n", i-1, strings.Repeat(string(rune(i)), 200), i)
	}
	return []string{
		bomb.String(),
		shared.String(),
		deep.String(),
		"Bl l\nT0 120000 l bl\n", // a link to itself
		"Bo ../x\nBa /etc/passwd\nT0 120000 o bo\nT0 120000 a ba\n",
		"Bm select 1\nBl ../m.sql\nT1 100644 m.sql bm\nT1 120000 alias.sql bl\nT0 40000 models t1\nT0 100644 dbt_project.yml bm\n",
		"R0 100644 name\x00short\nT0 999999 x bm\n",
		"Bd d/../d/../d\nT1 100644 m.sql bd\nT0 40000 d t1\nT0 120000 l1 bd\nT0 120000 l2 bd\n",
	}
}

func FuzzWalkTree(f *testing.F) {
	for _, s := range walkSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		if len(spec) > 64<<10 {
			return
		}
		store, root := craftedStore(t, spec)
		walkAndLook(t, store, root)
	})
}

// realPacks are packs of repositories written by devstack/gitrepo, as go-git's encoder
// (the in-process server's) sends them: a project with a link, the link bomb in small,
// a shared subtree of skipped entries, and similar files the encoder deltifies.
func realPacks(t testing.TB) [][]byte {
	build := []func(r *gitrepo.Repo) (gitrepo.Hash, error){
		func(r *gitrepo.Repo) (gitrepo.Hash, error) {
			files := similar(6)
			files["dbt_project.yml"] = []byte(project)
			link, _ := r.Blob([]byte("../models/m03.sql"))
			return withEntry(r, files, gitrepo.TreeEntry{Name: "alias.sql", Mode: gitrepo.ModeSymlink, Hash: link})
		},
		func(r *gitrepo.Repo) (gitrepo.Hash, error) {
			var entries []gitrepo.TreeEntry
			for i := range 4 {
				target := "."
				if i > 0 {
					target = strings.Repeat(fmt.Sprintf("a%d/", i-1), 50)
				}
				h, _ := r.Blob([]byte(target))
				entries = append(entries, gitrepo.TreeEntry{Name: fmt.Sprintf("a%d", i), Mode: gitrepo.ModeSymlink, Hash: h})
			}
			return withProject(r, entries...)
		},
		func(r *gitrepo.Repo) (gitrepo.Hash, error) {
			blob, _ := r.Blob([]byte("x"))
			entries := []gitrepo.TreeEntry{{Name: ".", Mode: gitrepo.ModeFile, Hash: blob}, {Name: ".git", Mode: gitrepo.ModeFile, Hash: blob}}
			for range 20 {
				entries = append(entries, gitrepo.TreeEntry{Name: "x", Mode: gitrepo.ModeFile, Hash: blob})
			}
			shared, _ := r.Tree(entries)
			var dirs []gitrepo.TreeEntry
			for i := range 10 {
				dirs = append(dirs, gitrepo.TreeEntry{Name: fmt.Sprintf("d%d", i), Mode: gitrepo.ModeDir, Hash: shared})
			}
			return withProject(r, dirs...)
		},
	}
	var packs [][]byte
	for _, b := range build {
		dir := t.TempDir()
		r, err := gitrepo.Init(dir)
		if err != nil {
			t.Fatal(err)
		}
		root, err := b(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Commit(root, "main"); err != nil {
			t.Fatal(err)
		}
		repo, err := git.PlainOpen(dir)
		if err != nil {
			t.Fatal(err)
		}
		var hashes []plumbing.Hash
		iter, err := repo.Storer.IterEncodedObjects(plumbing.AnyObject)
		if err != nil {
			t.Fatal(err)
		}
		_ = iter.ForEach(func(o plumbing.EncodedObject) error {
			hashes = append(hashes, o.Hash())
			return nil
		})
		var pack bytes.Buffer
		if _, err := packfile.NewEncoder(&pack, repo.Storer.(storer.EncodedObjectStorer), false).Encode(hashes, 10); err != nil {
			t.Fatal(err)
		}
		packs = append(packs, pack.Bytes())
	}
	return packs
}

func FuzzExplodePack(f *testing.F) {
	for _, p := range realPacks(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, pack []byte) {
		if len(pack) > 1<<20 {
			return
		}
		dir := scratch(t)
		if err := os.WriteFile(filepath.Join(dir, "pack"), pack, 0o600); err != nil {
			t.Fatal(err)
		}
		store, err := explodePack(context.Background(), filepath.Join(dir, "pack"), dir, fuzzLimits)
		if err != nil {
			var limit *limitError
			if !errors.As(err, &limit) && !errors.Is(err, errMalformedPack) {
				t.Fatalf("explodePack: an error of no known kind: %v", err)
			}
			return
		}
		defer store.Close()
		var inflated int64
		for h, o := range store.objs {
			inflated += o.size
			b, err := io.ReadAll(store.reader(o))
			if err != nil || int64(len(b)) != o.size {
				t.Fatalf("object %s: %d of %d bytes (%v)", h, len(b), o.size, err)
			}
			if got := plumbing.ComputeHash(o.typ, b); got != h {
				t.Fatalf("object %s reads back as %s", h, got)
			}
		}
		if inflated > fuzzLimits.MaxRepoBytes {
			t.Fatalf("%d bytes inflated, over the limit of %d", inflated, fuzzLimits.MaxRepoBytes)
		}
		for h, o := range store.objs {
			if o.typ == plumbing.TreeObject {
				walkAndLook(t, store, h)
			}
		}
	})
}

func FuzzPatchDelta(f *testing.F) {
	f.Add([]byte("0123456789"), []byte{10, 6, 0x91, 2, 3, 3, 'x', 'y', 'z'})
	f.Add([]byte("0123456789"), []byte{10, 5, 0x91, 8, 5})
	f.Add([]byte(strings.Repeat("select a from t\n", 40)), []byte{0x80, 5, 20, 0xb0, 0x10, 0x01, 4, 'e', 'n', 'd', '\n'})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		var out bytes.Buffer
		err := patchDelta(&out, io.NewSectionReader(bytes.NewReader(base), 0, int64(len(base))), bufio.NewReader(bytes.NewReader(delta)))
		if err != nil {
			if !errors.Is(err, errMalformedPack) {
				t.Fatalf("patchDelta: an error of no known kind: %v", err)
			}
			return
		}
		br := bufio.NewReader(bytes.NewReader(delta))
		src, _ := readDeltaSize(br)
		target, _ := readDeltaSize(br)
		if src != int64(len(base)) || target != int64(out.Len()) {
			t.Fatalf("a delta from %d bytes to %d wrote %d from a base of %d", src, target, out.Len(), len(base))
		}
	})
}

func FuzzScanAdvertisement(f *testing.F) {
	f.Add([]byte("001e# service=git-upload-pack\n0000" + pkt(someHash+" refs/heads/main\x00multi_ack\n") + "0000"))
	f.Add([]byte("001e# service=git-upload-pack\n0000" + pkt(someHash+" refs/heads/dev\x00multi_ack\n") + pkt(someHash+" refs/tags/main\n") + "0000"))
	f.Add([]byte("000eversion 1\n" + pkt(someHash+" HEAD\x00\n") + "0000"))
	f.Fuzz(func(t *testing.T, body []byte) {
		found, err := scanAdvertisement(bytes.NewReader(body), refCandidates("main"))
		if err != nil && found {
			t.Fatal("found, with an error")
		}
		if found && !bytes.Contains(body, []byte(" refs/heads/main")) && !bytes.Contains(body, []byte(" refs/tags/main")) {
			t.Fatal("found a name the body does not hold")
		}
	})
}
