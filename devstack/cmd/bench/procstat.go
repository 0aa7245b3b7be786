package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports (getconf CLK_TCK); reading it via
// sysconf would need cgo for a constant that does not vary.
const clockTicks = 100

// procStat is the part of /proc/<pid>/stat the bench needs.
type procStat struct {
	ppid         int
	utime, stime uint64 // clock ticks
}

func readProcStat(pid int) (procStat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// comm (field 2) may hold spaces and parentheses: split after the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(raw[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var s procStat
	if s.ppid, err = strconv.Atoi(f[1]); err != nil {
		return s, err
	}
	if s.utime, err = strconv.ParseUint(f[11], 10, 64); err != nil { // field 14
		return s, err
	}
	if s.stime, err = strconv.ParseUint(f[12], 10, 64); err != nil { // field 15
		return s, err
	}
	return s, nil
}

// cpuMicros is the user+system CPU time of pids in microseconds. A process that
// is gone contributes nothing (the round then shows an error anyway).
func cpuMicros(pids []int) float64 {
	var ticks uint64
	for _, pid := range pids {
		if s, err := readProcStat(pid); err == nil {
			ticks += s.utime + s.stime
		}
	}
	return float64(ticks) * 1e6 / clockTicks
}

// childrenOf returns the pids whose parent is ppid.
func childrenOf(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readProcStat(pid); err == nil && s.ppid == ppid {
			kids = append(kids, pid)
		}
	}
	return kids
}

// peakRSS is the sum of VmHWM over pids, in bytes.
func peakRSS(pids []int) (int64, error) {
	var sum int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, err
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			v, ok := strings.CutPrefix(line, "VmHWM:")
			if !ok {
				continue
			}
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmHWM %q", pid, v)
			}
			sum += kb << 10
		}
	}
	return sum, nil
}
