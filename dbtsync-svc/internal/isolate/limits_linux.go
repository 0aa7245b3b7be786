//go:build linux

package isolate

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// setLimits caps this process's CPU time (the kernel kills it with SIGKILL at the limit:
// soft and hard limits are equal) and its address space.
func setLimits(cpu time.Duration, addressSpace int64) error {
	if cpu > 0 {
		secs := uint64(math.Ceil(cpu.Seconds()))
		if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: secs, Max: secs}); err != nil {
			return fmt.Errorf("set RLIMIT_CPU: %w", err)
		}
	}
	if addressSpace > 0 {
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(addressSpace), Max: uint64(addressSpace)}); err != nil {
			return fmt.Errorf("set RLIMIT_AS: %w", err)
		}
	}
	return nil
}

// Supported reports whether children get their limits here.
const Supported = true

// childAttrs kills the child when the worker's thread that started it dies with the worker.
func childAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// preferOOMKill makes this child the kernel's first choice when its cgroup runs out of
// memory, before the worker that runs it (raising one's own score needs no privilege).
func preferOOMKill() { _ = os.WriteFile("/proc/self/oom_score_adj", []byte("500"), 0) }

// resident reads the resident set from /proc/self/statm (its second field, in pages).
func resident() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	return pages * int64(os.Getpagesize()), err == nil
}
