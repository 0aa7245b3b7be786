//go:build !linux

package isolate

import (
	"os/exec"
	"time"
)

// setLimits sets nothing off Linux: the child is still killed on a cancel or the job's
// deadline, but neither its CPU time nor its memory is capped by the kernel.
func setLimits(time.Duration, int64) error { return nil }

// Supported reports whether children get their limits here.
const Supported = false

func childAttrs(*exec.Cmd) {}

func preferOOMKill() {}

func resident() (int64, bool) { return 0, false }
