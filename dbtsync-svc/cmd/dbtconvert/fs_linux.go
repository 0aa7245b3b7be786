package main

import "syscall"

// inMemory reports whether dir is on tmpfs or ramfs, where creating a file costs no I/O
// to overlap with decoding: creating the files ahead there only doubles the system
// calls.
func inMemory(dir string) bool {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return false
	}
	const tmpfsMagic, ramfsMagic = 0x01021994, 0x858458f6
	return st.Type == tmpfsMagic || st.Type == ramfsMagic
}
