package isolate

import (
	"fmt"
	"os"
	"runtime/metrics"
	"time"
)

// overMemory is what a child that its memory watch stops writes to stderr first.
const overMemory = "convert child: over its memory limit"

// exitOverMemory is the status of a child that its memory watch stopped.
const exitOverMemory = 4

// watchMemory stops this process, within a tick, once its resident memory passes limit:
// GOMEMLIMIT only makes the collector work harder, and RLIMIT_AS stops a heap only well
// above the limit (the runtime's reservations count against it), so the watch is what
// holds a child to its limit. The goroutine is preempted like any other, so a loop
// elsewhere does not stop it.
func watchMemory(limit int64, tick time.Duration) {
	for range time.Tick(tick) {
		if used := residentBytes(); used > limit {
			fmt.Fprintf(os.Stderr, "%s: %d bytes resident, the limit is %d\n", overMemory, used, limit)
			os.Exit(exitOverMemory)
		}
	}
}

// residentBytes is the process's resident set (Linux), else the memory the Go runtime
// has mapped and not released.
func residentBytes() int64 {
	if n, ok := resident(); ok {
		return n
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
