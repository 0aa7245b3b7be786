// Package freeport hands out 127.0.0.1 addresses for processes that bind their own
// listener: a child service, redis-server, nats-server, nginx.
//
// Listening on port 0 and closing is not enough. Nothing holds the port until the child
// binds it, and in that gap the kernel offers the same port to the next bind(":0") or
// outgoing connection of any process on the machine: the embedded MongoDB proxy of the
// very stack being started, or another test package's stack running in parallel. So a
// port is drawn at random from outside the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), where the kernel never picks one itself, and
// is claimed for the life of this process by a lock on its byte in one lock file shared
// by every process of the user (fcntl locks go away with their process). A port that
// another process has claimed, or that something is bound to, is skipped.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// lowest is the lowest port handed out: below it are the usual fixed ports of local
// services (PostgreSQL 5432, Redis 6379, the stack's 8080–9090).
const lowest = 15000

var state struct {
	sync.Mutex
	lock   *os.File     // the shared lock file, open for the life of the process
	lo, hi int          // the ports handed out: [lo, hi]
	taken  map[int]bool // tried by this process (its own locks do not exclude it)
}

// Addr returns "127.0.0.1:<port>" for a port that is bound by nothing, claimed by no
// other process and never handed out before by this one.
func Addr() (string, error) {
	state.Lock()
	defer state.Unlock()
	if state.lock == nil {
		if err := setUp(); err != nil {
			return "", err
		}
	}
	for range 1000 {
		p := state.lo + rand.IntN(state.hi-state.lo+1)
		if state.taken[p] {
			continue
		}
		ok, err := try(p)
		if err != nil {
			return "", err
		}
		if ok {
			return "127.0.0.1:" + strconv.Itoa(p), nil
		}
	}
	return "", fmt.Errorf("freeport: no free port in %d–%d after 1000 tries", state.lo, state.hi)
}

// try claims p and checks that nothing is bound to it; true when p can be handed out.
// A port found bound stays claimed and taken, so it is not tried again.
func try(p int) (bool, error) {
	claimed, err := claim(p)
	if err != nil || !claimed {
		return false, err
	}
	state.taken[p] = true
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false, nil
	}
	_ = ln.Close()
	return true, nil
}

// minPorts is the fewest ports a range below or above the ephemeral one must have.
const minPorts = 1000

func setUp() error {
	// Below the ephemeral range (15000–32767 with Linux's default) if it is wide enough:
	// a port there plus 10000 (a Redis Cluster node's default bus port) stays a port.
	ephLo, ephHi := ephemeralRange()
	switch {
	case ephLo-lowest >= minPorts:
		state.lo, state.hi = lowest, ephLo-1
	case 65535-ephHi >= minPorts:
		state.lo, state.hi = ephHi+1, 65535
	default:
		return fmt.Errorf("freeport: the ephemeral range %d–%d leaves fewer than %d ports outside it above %d", ephLo, ephHi, minPorts, lowest)
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("platform-freeport-%d.lock", os.Getuid())), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return fmt.Errorf("freeport: %w", err)
	}
	state.lock = f
	state.taken = map[int]bool{}
	return nil
}

// ephemeralRange is the kernel's range for port-0 binds and outgoing connections, or
// Linux's default when it cannot be read.
func ephemeralRange() (int, int) {
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				lo, hi = l, h
			}
		}
	}
	return lo, hi
}

// claim takes the write lock on byte p of the lock file without waiting; false when
// another process holds it.
func claim(p int) (bool, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(p), Len: 1}
	err := syscall.FcntlFlock(state.lock.Fd(), syscall.F_SETLK, &lk)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EACCES):
		return false, nil
	default:
		return false, fmt.Errorf("freeport: lock port %d: %w", p, err)
	}
}
