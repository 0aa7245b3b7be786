package freeport

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMain lets the test binary hold ports for another process: FREEPORT_HOLD=n claims n
// ports, prints them and waits for its stdin to close.
func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv("FREEPORT_HOLD")); err == nil {
		for range n {
			a, err := Addr()
			if err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			fmt.Println(a)
		}
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func port(t *testing.T, addr string) int {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil || host != "127.0.0.1" {
		t.Fatalf("address %q", addr)
	}
	return n
}

func TestAddrsAreBindableDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	seen := map[string]bool{}
	for range 200 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		if p := port(t, a); p < lowest || (p >= lo && p <= hi) {
			t.Fatalf("%s: in the ephemeral range %d–%d or below %d", a, lo, hi, lowest)
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s cannot be bound: %v", a, err)
		}
		ln.Close()
	}
}

// A port another process holds is never handed out here, and is free again once that
// process is gone.
func TestAPortClaimedByAnotherProcessIsNotHandedOut(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "FREEPORT_HOLD=20")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var held []int
	for range 20 {
		if !sc.Scan() || strings.HasPrefix(sc.Text(), "error") {
			t.Fatalf("holder: %q %v", sc.Text(), sc.Err())
		}
		held = append(held, port(t, sc.Text()))
	}
	state.Lock()
	if state.lock == nil {
		if err := setUp(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range held {
		if state.taken[p] {
			continue
		}
		if ok, err := claim(p); err != nil || ok {
			t.Errorf("port %d, held by another process, was claimed here (%v)", p, err)
		}
	}
	state.Unlock()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	state.Lock()
	defer state.Unlock()
	for _, p := range held {
		if ok, err := claim(p); err != nil || !ok {
			t.Errorf("port %d is still claimed after its holder exited (%v)", p, err)
		}
	}
}

func TestABoundPortIsNotHandedOut(t *testing.T) {
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	state.Lock()
	defer state.Unlock()
	delete(state.taken, port(t, a))
	if ok, err := try(port(t, a)); err != nil || ok {
		t.Errorf("%s, bound by a listener, would be handed out (%v)", a, err)
	}
	if !state.taken[port(t, a)] {
		t.Errorf("%s was found bound but may be tried again", a)
	}
}
