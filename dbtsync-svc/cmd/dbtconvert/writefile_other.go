//go:build !unix

package main

import "os"

func writeFile(path string, content []byte) error { return os.WriteFile(path, content, 0o644) }

// createEmpty creates path if it does not exist yet and reports whether it did.
func createEmpty(path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}
