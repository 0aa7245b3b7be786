package gitsource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// A clone is fetched as one pack, which is never handed to go-git's object storage: its
// index builder and its checkout inflate every object whole in memory, before anything
// could bound them. Instead the pack is read here once, object by
// object, and each object is inflated into one file of the job's own (objectStore)
// through writers that stop at the declared size. Every object's declared size is
// charged against the repository's byte limit from its header, before a byte of it is
// inflated: a compressed blob of zeros fails from its header, and memory stays a few
// buffers whatever the repository holds.

// errMalformedPack: the server's pack is not one this reader accepts.
var errMalformedPack = errors.New("malformed pack")

// storedObject is where an inflated object lives in the store's file.
type storedObject struct {
	typ    plumbing.ObjectType
	offset int64 // in the store's file
	size   int64
}

// objectStore holds the inflated objects of one fetched pack in one file, by hash.
type objectStore struct {
	file *os.File
	end  int64 // where the next object is appended
	objs map[plumbing.Hash]storedObject
}

// reader streams an object's content.
func (s *objectStore) reader(o storedObject) *io.SectionReader {
	return io.NewSectionReader(s.file, o.offset, o.size)
}

func (s *objectStore) Close() error { return s.file.Close() }

// packBudget is what a pack may cost once inflated.
type packBudget struct {
	bytes  int64 // left of the repository's byte limit
	limits Limits
}

func (b *packBudget) charge(n int64) error {
	if n < 0 || n > b.bytes {
		return overLimit("the repository's files are over the size limit of %d bytes", b.limits.MaxRepoBytes)
	}
	b.bytes -= n
	return nil
}

// limitError is a repository over one of the clone limits, or against the rules of what
// a clone may hold; its message names the limit (or the file) and is the job's error.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func overLimit(format string, args ...any) error {
	return &limitError{msg: fmt.Sprintf(format, args...)}
}

// maxPackObjects is how many objects a pack may hold: the files DBT_SYNC_MAX_FILES
// allows, as many directories, and the commit and tags.
func maxPackObjects(l Limits) uint32 { return uint32(2*l.MaxFiles + 16) }

// pendingDelta is a deltified object waiting for its base: its delta data is kept in the
// deltas file until the base is inflated.
type pendingDelta struct {
	offset     int64 // in the pack
	baseOffset int64 // OFS delta: the base's offset in the pack
	baseHash   plumbing.Hash
	ofs        bool
	data       storedObject // the delta data, in the deltas file
	target     int64        // the size the delta declares for its result
}

// explodePack inflates the pack at packPath into a new object store in dir, within the
// limits; ctx bounds its time.
func explodePack(ctx context.Context, packPath, dir string, l Limits) (*objectStore, error) {
	pack, err := os.Open(packPath)
	if err != nil {
		return nil, err
	}
	defer pack.Close()
	store, err := newObjectStore(dir)
	if err != nil {
		return nil, err
	}
	deltas, err := os.Create(filepath.Join(dir, "deltas"))
	if err != nil {
		store.Close()
		return nil, err
	}
	defer deltas.Close()
	x := &exploder{ctx: ctx, store: store, deltas: deltas, budget: packBudget{bytes: l.MaxRepoBytes, limits: l},
		byOffset: map[int64]plumbing.Hash{}}
	if err := x.scan(packfile.NewScanner(pack)); err != nil {
		store.Close()
		return nil, err
	}
	if err := x.resolveDeltas(); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

func newObjectStore(dir string) (*objectStore, error) {
	f, err := os.Create(filepath.Join(dir, "objects"))
	if err != nil {
		return nil, err
	}
	return &objectStore{file: f, objs: map[plumbing.Hash]storedObject{}}, nil
}

// exploder is the state of one pack being inflated.
type exploder struct {
	ctx       context.Context
	store     *objectStore
	deltas    *os.File
	deltasEnd int64
	budget    packBudget
	byOffset  map[int64]plumbing.Hash // pack offset -> hash of the object inflated from it
	pending   []*pendingDelta
}

// scan reads the pack once: whole objects are inflated into the store, deltas' data
// into the deltas file.
func (x *exploder) scan(sc *packfile.Scanner) error {
	_, count, err := sc.Header()
	if err != nil {
		return fmt.Errorf("%w: %v", errMalformedPack, err)
	}
	if limit := maxPackObjects(x.budget.limits); count > limit {
		return overLimit("the repository has more than %d files and directories (the limit is %d files and as many directories)", limit, x.budget.limits.MaxFiles)
	}
	for range count {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		h, err := sc.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("%w: %v", errMalformedPack, err)
		}
		switch h.Type {
		case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
			err = x.whole(sc, h)
		case plumbing.OFSDeltaObject, plumbing.REFDeltaObject:
			err = x.delta(sc, h)
		default:
			err = fmt.Errorf("%w: object type %v", errMalformedPack, h.Type)
		}
		if err != nil {
			return err
		}
	}
	if _, err := sc.Checksum(); err != nil {
		return fmt.Errorf("%w: %v", errMalformedPack, err)
	}
	return nil
}

// whole inflates a whole object into the store, hashing it on the way; its declared size
// is charged first.
func (x *exploder) whole(sc *packfile.Scanner, h *packfile.ObjectHeader) error {
	if err := x.budget.charge(h.Length); err != nil {
		return err
	}
	o := storedObject{typ: h.Type, offset: x.store.end, size: h.Length}
	hasher := plumbing.NewHasher(h.Type, h.Length)
	w := bufio.NewWriterSize(io.MultiWriter(hasher, &offsetWriter{f: x.store.file, off: o.offset}), 64<<10)
	// The scanner stops inflating past the declared size (ErrInflatedSizeMismatch).
	n, _, err := sc.NextObject(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil || n != h.Length {
		return fmt.Errorf("%w: object at %d inflates to %d bytes, declared %d (%v)", errMalformedPack, h.Offset, n, h.Length, err)
	}
	x.store.end += n
	x.add(h.Offset, hasher.Sum(), o)
	return nil
}

func (x *exploder) add(packOffset int64, hash plumbing.Hash, o storedObject) {
	if _, dup := x.store.objs[hash]; !dup {
		x.store.objs[hash] = o
	}
	x.byOffset[packOffset] = hash
}

// delta keeps a deltified object's data until its base is known; the size it declares
// for its result is charged, or its data's when larger.
func (x *exploder) delta(sc *packfile.Scanner, h *packfile.ObjectHeader) error {
	if err := x.budget.charge(h.Length); err != nil {
		return err
	}
	d := &pendingDelta{offset: h.Offset, baseOffset: h.OffsetReference, baseHash: h.Reference, ofs: h.Type == plumbing.OFSDeltaObject,
		data: storedObject{offset: x.deltasEnd, size: h.Length}}
	w := bufio.NewWriterSize(&offsetWriter{f: x.deltas, off: x.deltasEnd}, 64<<10)
	n, _, err := sc.NextObject(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil || n != h.Length {
		return fmt.Errorf("%w: delta at %d inflates to %d bytes, declared %d (%v)", errMalformedPack, h.Offset, n, h.Length, err)
	}
	x.deltasEnd += n
	br := bufio.NewReader(io.NewSectionReader(x.deltas, d.data.offset, d.data.size))
	if _, err := readDeltaSize(br); err != nil {
		return err
	}
	if d.target, err = readDeltaSize(br); err != nil {
		return err
	}
	if err := x.budget.charge(max(d.target-h.Length, 0)); err != nil {
		return err
	}
	x.pending = append(x.pending, d)
	return nil
}

// resolveDeltas applies every delta once its base is inflated, bases first: an OFS delta
// names its base by its place in the pack, a REF delta by its hash.
func (x *exploder) resolveDeltas() error {
	byBaseOffset := map[int64][]*pendingDelta{}
	byBaseHash := map[plumbing.Hash][]*pendingDelta{}
	for _, d := range x.pending {
		if d.ofs {
			byBaseOffset[d.baseOffset] = append(byBaseOffset[d.baseOffset], d)
		} else {
			byBaseHash[d.baseHash] = append(byBaseHash[d.baseHash], d)
		}
	}
	type done struct {
		offset int64
		hash   plumbing.Hash
	}
	var work []done
	for off, h := range x.byOffset {
		work = append(work, done{off, h})
	}
	resolved := 0
	for len(work) > 0 {
		base := work[len(work)-1]
		work = work[:len(work)-1]
		children := append(byBaseOffset[base.offset], byBaseHash[base.hash]...)
		delete(byBaseOffset, base.offset)
		delete(byBaseHash, base.hash)
		for _, d := range children {
			if err := x.ctx.Err(); err != nil {
				return err
			}
			h, err := x.apply(d, x.store.objs[base.hash])
			if err != nil {
				return err
			}
			resolved++
			work = append(work, done{d.offset, h})
		}
	}
	if resolved != len(x.pending) {
		return fmt.Errorf("%w: %d deltas name a base the pack does not hold", errMalformedPack, len(x.pending)-resolved)
	}
	return nil
}

// apply writes the result of delta d over base into the store.
func (x *exploder) apply(d *pendingDelta, base storedObject) (plumbing.Hash, error) {
	o := storedObject{typ: base.typ, offset: x.store.end, size: d.target}
	hasher := plumbing.NewHasher(base.typ, d.target)
	w := bufio.NewWriterSize(io.MultiWriter(hasher, &offsetWriter{f: x.store.file, off: o.offset}), 64<<10)
	if err := patchDelta(w, x.store.reader(base), bufio.NewReader(io.NewSectionReader(x.deltas, d.data.offset, d.data.size))); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Flush(); err != nil {
		return plumbing.ZeroHash, err
	}
	x.store.end += d.target
	h := hasher.Sum()
	x.add(d.offset, h, o)
	return h, nil
}

// offsetWriter writes at increasing offsets of f (the store's file is read at other
// offsets meanwhile).
type offsetWriter struct {
	f   *os.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// readDeltaSize reads one of the two sizes a delta starts with (little-endian base 128).
func readDeltaSize(r io.ByteReader) (int64, error) {
	var n int64
	for shift := uint(0); shift < 63; shift += 7 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("%w: truncated delta", errMalformedPack)
		}
		n |= int64(b&0x7f) << shift
		if b&0x80 == 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: delta size overflows", errMalformedPack)
}

// patchDelta writes to w the object that delta makes of base (git's delta format: the
// base's size, the result's size, then copies from the base and inserted bytes). The
// base is read at the offsets the delta names, never whole; every copy is checked against
// both sizes first.
func patchDelta(w io.Writer, base *io.SectionReader, delta *bufio.Reader) error {
	srcSize, err := readDeltaSize(delta)
	if err != nil {
		return err
	}
	left, err := readDeltaSize(delta)
	if err != nil {
		return err
	}
	if srcSize != base.Size() {
		return fmt.Errorf("%w: delta base is %d bytes, the delta expects %d", errMalformedPack, base.Size(), srcSize)
	}
	for left > 0 {
		cmd, err := delta.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: truncated delta", errMalformedPack)
		}
		var n int64
		var src io.Reader
		switch {
		case cmd&0x80 != 0:
			off, size, err := copyArgs(cmd, delta)
			if err != nil {
				return err
			}
			if off+size > srcSize {
				return fmt.Errorf("%w: delta copies past its base", errMalformedPack)
			}
			n, src = size, io.NewSectionReader(base, off, size)
		case cmd != 0:
			n, src = int64(cmd), delta
		default:
			return fmt.Errorf("%w: delta command 0", errMalformedPack)
		}
		if n > left {
			return fmt.Errorf("%w: delta writes past its declared size", errMalformedPack)
		}
		if c, err := io.CopyN(w, src, n); err != nil || c != n {
			return fmt.Errorf("%w: delta copy (%v)", errMalformedPack, err)
		}
		left -= n
	}
	if _, err := delta.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: delta longer than its result", errMalformedPack)
	}
	return nil
}

// copyArgs reads a copy command's offset and size (bytes present per bit of cmd; a size
// of 0 means 0x10000).
func copyArgs(cmd byte, r io.ByteReader) (off, size int64, err error) {
	for i := range 7 {
		if cmd&(1<<i) == 0 {
			continue
		}
		b, err := r.ReadByte()
		if err != nil {
			return 0, 0, fmt.Errorf("%w: truncated delta", errMalformedPack)
		}
		if i < 4 {
			off |= int64(b) << (8 * i)
		} else {
			size |= int64(b) << (8 * (i - 4))
		}
	}
	if size == 0 {
		size = 0x10000
	}
	return off, size, nil
}
