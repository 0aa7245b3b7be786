package gitsource

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// scanClone walks the checked-out tree without following links: it bounds the number of
// files and their bytes, and refuses a symlink that leads outside the clone (or to
// anything but a file or directory inside it), naming the file.
func scanClone(dir string, l Limits) error {
	files, bytes := 0, int64(0)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		files++
		if files > l.MaxFiles {
			return fmt.Errorf("the repository has more than %d files (DBT_SYNC_MAX_FILES)", l.MaxFiles)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return checkLink(dir, p, filepath.ToSlash(rel))
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("repository file %s is not a regular file", filepath.ToSlash(rel))
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		bytes += info.Size()
		if bytes > l.MaxRepoBytes {
			return fmt.Errorf("the repository's files are over %d bytes (DBT_SYNC_MAX_REPO_BYTES)", l.MaxRepoBytes)
		}
		return nil
	})
}

// checkLink refuses a symbolic link at p (rel in messages) unless it leads to a file or
// directory inside the clone at dir.
func checkLink(dir, p, rel string) error {
	target, err := filepath.EvalSymlinks(p)
	inside := err == nil && (target == dir || strings.HasPrefix(target, dir+string(filepath.Separator)))
	if !inside {
		return fmt.Errorf("repository file %s is a symbolic link that leads outside the repository; links must stay inside it", rel)
	}
	if st, err := os.Stat(target); err != nil || !(st.Mode().IsRegular() || st.IsDir()) {
		return fmt.Errorf("repository file %s is a symbolic link to something that is not a file or directory", rel)
	}
	return nil
}

// boundedFS is the checkout as the conversion reads it (through os.Root, so no path leads
// out of it): only regular files and directories, each file at most maxFile bytes. The
// first violation is kept, and fails the job naming the file.
type boundedFS struct {
	fsys      fs.FS
	maxFile   int64
	violation error
}

func (b *boundedFS) Open(name string) (fs.File, error) {
	f, err := b.fsys.Open(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && b.violation == nil {
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
		bad = fmt.Errorf("repository file %s is %d bytes, over the limit of %d bytes for a file the conversion reads (DBT_SYNC_MAX_FILE_BYTES)", name, st.Size(), b.maxFile)
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
