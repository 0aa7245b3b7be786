package server

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryLimitPercent is the share of its cgroup's memory limit a process gives the Go
// runtime as its soft limit (GOMEMLIMIT): the collector works harder as the heap nears
// it, and the rest is left to what the runtime does not count (stacks of threads, cgo,
// the kernel's page cache charged to the cgroup).
const MemoryLimitPercent = 90

// noCgroupLimit: a cgroup v1 limit this high is the kernel's "unlimited"
// (9223372036854771712, the largest page multiple below 2^63).
const noCgroupLimit = 1 << 60

// MemoryLimit is what SetMemoryLimit decided: the soft limit set (0: none) and why.
type MemoryLimit struct {
	Bytes  int64
	Reason string
}

// SetMemoryLimit sets the Go runtime's soft memory limit to MemoryLimitPercent of the
// memory limit of the process's cgroup, read under root (/sys/fs/cgroup: v2's
// memory.max, else v1's memory/memory.limit_in_bytes). A GOMEMLIMIT in the environment
// (getenv) wins: the runtime has read it already and it is left alone. No cgroup, or a
// cgroup without a limit ("max", or v1's huge "unlimited"), sets none.
func SetMemoryLimit(root string, getenv func(string) string) MemoryLimit {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return MemoryLimit{Bytes: debug.SetMemoryLimit(-1), Reason: "GOMEMLIMIT=" + v + " set in the environment"}
	}
	limit, file, err := cgroupMemoryLimit(root)
	switch {
	case err != nil:
		return MemoryLimit{Reason: err.Error() + "; no memory limit set"}
	case limit == 0:
		return MemoryLimit{Reason: file + " sets no limit; no memory limit set"}
	}
	soft := limit / 100 * MemoryLimitPercent
	debug.SetMemoryLimit(soft)
	return MemoryLimit{Bytes: soft, Reason: fmt.Sprintf("%d%% of %s (%d bytes)", MemoryLimitPercent, file, limit)}
}

// CgroupMemoryLimit is the memory limit of this process's cgroup (/sys/fs/cgroup, v2 or
// v1) in bytes: 0 when it sets none or none can be read.
func CgroupMemoryLimit() int64 {
	n, _, _ := cgroupMemoryLimit("/sys/fs/cgroup")
	return n
}

// cgroupMemoryLimit reads the cgroup's memory limit under root: 0 when it sets none.
func cgroupMemoryLimit(root string) (limit int64, file string, err error) {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		path := filepath.Join(root, f)
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, path, fmt.Errorf("read %s: %w", path, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, path, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, path, fmt.Errorf("%s holds %q, not a limit in bytes", path, v)
		}
		if n >= noCgroupLimit {
			return 0, path, nil
		}
		return n, path, nil
	}
	return 0, "", fmt.Errorf("no cgroup memory limit file under %s", root)
}
