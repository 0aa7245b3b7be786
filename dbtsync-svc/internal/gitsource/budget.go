package gitsource

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
)

// A clone's tree is read on a budget of work, not only within per-object limits: a few
// small objects can name each other into any amount of walking (one subtree named from
// thousands of directories, links whose targets name links). meter counts that work for
// one clone, whoever does it: the walk, the resolution of its links, and every lookup
// the conversion makes through treeFS afterwards.
//
//   - entries: every tree entry read, the ones skipped included (duplicates, ".", "..",
//     ".git", submodules), and a subtree counted each time a directory names it;
//   - path bytes: the full path of every entry read, and no path longer than
//     maxPathBytes;
//   - lookup steps: the path components walked resolving paths, the components of every
//     link target followed, and the directories a followed link starts from.
//
// Over a budget the clone fails with work_limit, naming the budget and its value; the
// first such failure is kept, so that a conversion that swallowed it still fails with it.

// workLimitError is a clone over one of its work budgets; its message names the budget
// and its value and is the job's error.
type workLimitError struct{ msg string }

func (e *workLimitError) Error() string { return e.msg }

// meter counts one clone's work against its limits. Safe for concurrent use.
type meter struct {
	limits    Limits
	entries   atomic.Int64
	pathBytes atomic.Int64
	steps     atomic.Int64
	over      atomic.Pointer[workLimitError] // the first budget passed
}

func newMeter(l Limits) *meter { return &meter{limits: l} }

// fail records (the first) and returns a work-limit failure.
func (m *meter) fail(format string, args ...any) error {
	e := &workLimitError{msg: fmt.Sprintf(format, args...)}
	m.over.CompareAndSwap(nil, e)
	return e
}

// err is the first budget the clone passed, or nil.
func (m *meter) err() *workLimitError { return m.over.Load() }

// ctxEvery: the context is looked at once per this many units of work.
const ctxEvery = 1024

// entry charges one tree entry, name, read in the directory at path dir.
func (m *meter) entry(ctx context.Context, dir, name string) error {
	n := m.entries.Add(1)
	if n > int64(m.limits.MaxTreeEntries) {
		return m.fail("the repository's trees hold more entries than the limit of %d tree entries read per clone (entries skipped, and subtrees read once per directory that names them, included)", m.limits.MaxTreeEntries)
	}
	length := len(name)
	if dir != "" {
		length += len(dir) + 1
	}
	if length > maxPathBytes {
		return m.fail("repository path %s... is %d bytes, over the limit of %d bytes for one path", truncate(dir, 64), length, maxPathBytes)
	}
	if m.pathBytes.Add(int64(length)) > m.limits.MaxPathBytes {
		return m.fail("the repository's paths are over the limit of %d bytes together (the full path of every tree entry read counts)", m.limits.MaxPathBytes)
	}
	if n%ctxEvery == 0 {
		return ctx.Err()
	}
	return nil
}

// step charges n path components walked by a lookup.
func (m *meter) step(ctx context.Context, n int) error {
	s := m.steps.Add(int64(n))
	if s > m.limits.MaxLookupSteps {
		return m.fail("resolving the repository's paths and symbolic links walked more than the limit of %d path components per clone", m.limits.MaxLookupSteps)
	}
	if s/ctxEvery != (s-int64(n))/ctxEvery {
		return ctx.Err()
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
