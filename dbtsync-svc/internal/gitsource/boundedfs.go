package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// boundedFS is the fetched tree as the conversion reads it (treeFS: no path leads out
// of it): only regular files and directories, each file at most maxFile bytes. The
// first violation is kept, and fails the job naming the file (a lookup that stopped on the
// context or the clone's work budget is not one: treeFS.stopped reports those).
type boundedFS struct {
	fsys      fs.FS
	maxFile   int64
	violation error
}

func (b *boundedFS) Open(name string) (fs.File, error) {
	f, err := b.fsys.Open(name)
	if err != nil {
		var work *workLimitError
		stopped := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &work)
		if !errors.Is(err, fs.ErrNotExist) && !stopped && b.violation == nil {
			b.violation = fmt.Errorf("repository file %s cannot be read: it leads outside the repository or is not a file", name)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	var bad error
	switch {
	case st.IsDir():
	case !st.Mode().IsRegular():
		bad = fmt.Errorf("repository file %s is not a regular file", name)
	case st.Size() > b.maxFile:
		bad = fmt.Errorf("repository file %s is %d bytes, over the limit of %d bytes for a file the conversion reads", name, st.Size(), b.maxFile)
	}
	if bad != nil {
		f.Close()
		if b.violation == nil {
			b.violation = bad
		}
		return nil, bad
	}
	return f, nil
}
