package convert

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"strconv"
)

// smallNames is how many names an object has before they are indexed by hash: below
// it, a scan of their fingerprints is faster (a node has some twenty members).
const smallNames = 32

// nameSeed hashes member names (one seed per process: an input cannot aim at it).
var nameSeed = maphash.MakeSeed()

// nameStack holds the member names of the open objects, to refuse a name its object
// already has, as jsontext does: names are compared whole, after unescaping.
type nameStack struct {
	names  []byte   // the names, back to back
	ends   []int    // where each name ends in names
	hashes []uint64 // each name's fingerprint, or its hash once its object is indexed
	levels []nameLevel
	spare  map[uint64]int // an index kept for the next large object
	// max is the most names the open objects may hold together (0: no limit): past it
	// the scan fails with a *ManifestLimitError.
	max     int
	collide bool   // every hash is 0 (a test of collisions)
	scratch []byte // key's unescaped name
}

// nameLevel is one open object's names.
type nameLevel struct {
	first int            // its first name's index
	index map[uint64]int // hash to name index, once it has smallNames names
	more  []int          // names whose hash an earlier name has (a collision)
}

func (ns *nameStack) open() { ns.levels = append(ns.levels, nameLevel{first: len(ns.ends)}) }

func (ns *nameStack) close() {
	lv := &ns.levels[len(ns.levels)-1]
	if lv.index != nil {
		clear(lv.index)
		ns.spare = lv.index
	}
	k := lv.first
	if k > 0 {
		ns.names = ns.names[:ns.ends[k-1]]
	} else {
		ns.names = ns.names[:0]
	}
	ns.ends, ns.hashes = ns.ends[:k], ns.hashes[:k]
	ns.levels = ns.levels[:len(ns.levels)-1]
}

// reset empties the stack, keeping its storage.
func (ns *nameStack) reset() {
	for len(ns.levels) > 0 {
		ns.close()
	}
}

func (ns *nameStack) name(k int) []byte {
	from := 0
	if k > 0 {
		from = ns.ends[k-1]
	}
	return ns.names[from:ns.ends[k]]
}

// add records name (read at input offset at) in the innermost open object and returns
// its index (for name), failing when that object already has it.
func (ns *nameStack) add(name []byte, at int64) (int, error) {
	lv := &ns.levels[len(ns.levels)-1]
	k := len(ns.ends)
	if lv.index == nil && k-lv.first >= smallNames {
		lv.index, ns.spare = ns.spare, nil
		if lv.index == nil {
			lv.index = make(map[uint64]int, 2*smallNames)
		}
		for i := lv.first; i < k; i++ {
			ns.hashes[i] = ns.hash(ns.name(i))
			ns.index(lv, i)
		}
	}
	var h uint64
	if lv.index == nil {
		h = ns.fingerprint(name)
		for i := lv.first; i < k; i++ {
			if ns.hashes[i] == h && bytes.Equal(ns.name(i), name) {
				return 0, duplicateName(name, at)
			}
		}
	} else {
		h = ns.hash(name)
		if i, ok := lv.index[h]; ok {
			if bytes.Equal(ns.name(i), name) {
				return 0, duplicateName(name, at)
			}
			for _, i := range lv.more {
				if ns.hashes[i] == h && bytes.Equal(ns.name(i), name) {
					return 0, duplicateName(name, at)
				}
			}
		}
	}
	if ns.max > 0 && k >= ns.max {
		return 0, &ManifestLimitError{Limit: "member names of the objects open at once", Value: int64(ns.max)}
	}
	ns.names = append(ns.names, name...)
	ns.ends = append(ns.ends, len(ns.names))
	ns.hashes = append(ns.hashes, h)
	if lv.index != nil {
		ns.index(lv, k)
	}
	return k, nil
}

// hash is name's hash in an indexed object: seeded, so that no input can aim at it.
func (ns *nameStack) hash(name []byte) uint64 {
	if ns.collide {
		return 0
	}
	return maphash.Bytes(nameSeed, name)
}

// fingerprint tells most names of a small object apart at little cost: their length
// and their first and last eight bytes (equal ones are compared whole).
func (ns *nameStack) fingerprint(name []byte) uint64 {
	if ns.collide {
		return 0
	}
	n := len(name)
	if n >= 8 {
		return binary.LittleEndian.Uint64(name) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(name[n-8:]), 29) ^ uint64(n)<<58
	}
	var f uint64
	for i, c := range name {
		f |= uint64(c) << (8 * i)
	}
	return f ^ uint64(n)<<58
}

// index puts name i into lv's index.
func (ns *nameStack) index(lv *nameLevel, i int) {
	if _, taken := lv.index[ns.hashes[i]]; taken {
		lv.more = append(lv.more, i)
		return
	}
	lv.index[ns.hashes[i]] = i
}

// ErrDuplicateName is a member name its object already has (wrapped in ErrNotJSON).
var ErrDuplicateName = errors.New("duplicate member name")

func duplicateName(name []byte, at int64) error {
	return fmt.Errorf("%w: %w %s%s", ErrNotJSON, ErrDuplicateName, strconv.Quote(string(name)), atOffset(at, 0))
}

// atOffset says where in the input buf[i] of a window at base is ("" when the window's
// bytes are not the input's: noOffset).
func atOffset(base int64, i int) string {
	if base < 0 {
		return ""
	}
	return " at offset " + strconv.FormatInt(base+int64(i), 10)
}

// noOffset is the base of a scanner whose bytes are no stretch of the input (a node's
// members the splitter handed on).
const noOffset = -1 << 62

// FieldError is a manifest that cannot be read at one field: Path is where, from the
// manifest's root (nodes["model.p.m"].columns.id.name, metadata).
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// atMember places err at the member name (inside any place err already has).
func atMember(name []byte, err error) error {
	seg := string(name)
	if !isIdentifier(name) {
		seg = "[" + strconv.Quote(seg) + "]"
	}
	return atPath(seg, err)
}

// atPath places err at seg, a path segment (a name, or [index] or ["name"]).
func atPath(seg string, err error) error {
	switch fe, ok := err.(*FieldError); {
	case err == errStopped:
		return err
	case !ok:
		return &FieldError{Path: seg, Err: err}
	case fe.Path[0] == '[':
		fe.Path = seg + fe.Path
	default:
		fe.Path = seg + "." + fe.Path
	}
	return err
}

// isIdentifier is whether name can stand in a path as .name.
func isIdentifier(name []byte) bool {
	for i, c := range name {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return len(name) > 0
}

// ManifestLimitError is a manifest read that passed one of its ManifestLimits: its
// message names the limit and its value.
type ManifestLimitError struct {
	Limit string // what is counted, as the message says it
	Value int64  // the limit
}

func (e *ManifestLimitError) Error() string {
	return fmt.Sprintf("the manifest read is over its limit of %d %s", e.Value, e.Limit)
}

// Names refuses a duplicate member name as the scanner does, for a JSON reader of its
// own (the API's, which streams an upload token by token): Open and Close each object,
// Add each of its names.
type Names struct{ ns nameStack }

// NewNames is a Names that holds at most max names in the open objects together (0: no
// limit); past it Add fails with a *ManifestLimitError.
func NewNames(max int) *Names { return &Names{ns: nameStack{max: max}} }

func (n *Names) Open()  { n.ns.open() }
func (n *Names) Close() { n.ns.close() }

// Add records name, unescaped, in the innermost open object; a name that object already
// has fails with ErrDuplicateName.
func (n *Names) Add(name []byte) error {
	_, err := n.ns.add(name, noOffset)
	return err
}
