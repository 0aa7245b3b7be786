//go:build unix

package main

import (
	"os"
	"syscall"
)

// writeFile is os.WriteFile(path, content, 0o644) in three system calls: os.OpenFile also
// tries to register every file with the network poller, one failing call per file, and
// thousands of small files make the calls the cost.
func writeFile(path string, content []byte) error {
	fd, err := openFile(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC)
	if err != nil {
		return err
	}
	b := content
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			_ = syscall.Close(fd)
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		b = b[n:]
	}
	if err := syscall.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

// createEmpty creates path if it does not exist yet and reports whether it did.
func createEmpty(path string) bool {
	fd, err := openFile(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL)
	if err != nil {
		return false
	}
	_ = syscall.Close(fd)
	return true
}

func openFile(path string, mode int) (int, error) {
	for {
		fd, err := syscall.Open(path, mode|syscall.O_CLOEXEC, 0o644)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}
