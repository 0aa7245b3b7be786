package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

// With BENCH_SOAK_FAKE set, the test binary is a tiny service for the soak to judge:
// its API on SOAK_PUBLIC_ADDR, and on SOAK_INTERNAL_ADDR the platform's own internal
// handler (libs/server: /metrics with go_gc_heap_live_bytes, POST /debug/gc).
//
//	leak:      every request leaves a goroutine and 32 KiB of heap behind (a real leak)
//	keepalive: every open connection holds a goroutine and 256 KiB until it closes
//	           (what follows open keep-alive connections: not a leak); its requests
//	           take 20 ms, so the load keeps its whole pool of connections open
func TestMain(m *testing.M) {
	if mode := os.Getenv("BENCH_SOAK_FAKE"); mode != "" {
		os.Exit(fakeSoakService(mode))
	}
	os.Exit(m.Run())
}

func fakeSoakService(mode string) int {
	var mu sync.Mutex
	var leaked [][]byte
	never := make(chan struct{})
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mode == "leak" {
			mu.Lock()
			leaked = append(leaked, make([]byte, 32<<10))
			mu.Unlock()
			go func() { <-never }()
		}
		if mode == "keepalive" {
			time.Sleep(20 * time.Millisecond) // a slow answer, so every connection of the pool is used
		}
		w.WriteHeader(http.StatusNoContent)
	})
	pub := &http.Server{Handler: api}
	if mode == "keepalive" {
		var conns sync.Map // net.Conn -> chan struct{} closed with the connection
		pub.ConnState = func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				done := make(chan struct{})
				conns.Store(c, done)
				state := make([]byte, 256<<10)
				go func() { <-done; _ = state[0] }()
			case http.StateClosed, http.StateHijacked:
				if done, ok := conns.LoadAndDelete(c); ok {
					close(done.(chan struct{}))
				}
			}
		}
	}
	ln, err := net.Listen("tcp", os.Getenv("SOAK_PUBLIC_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	iln, err := net.Listen("tcp", os.Getenv("SOAK_INTERNAL_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = pub.Serve(ln) }()
	go func() { _ = http.Serve(iln, server.InternalHandler(obs.NewRegistry(), nil)) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return 0
}

// TestJudgeSoak: the rule on checkpoint figures. Growth that keeps scaling with the
// requests is a leak; a warm-up (growth in the first segment only), noise within what
// the connection pool can hold, and a level that moves up and down are not.
func TestJudgeSoak(t *testing.T) {
	lim := limitsFor(8) // 56 goroutines, 5 MiB
	const mib = 1 << 20
	for _, c := range []struct {
		name string
		c    [3]soakSample
		leak bool
	}{
		{"flat-ok", [3]soakSample{{60, 10 * mib, 30}, {60, 10 * mib, 30}, {60, 10 * mib, 30}}, false},
		{"warm-up-in-segment-a-only-ok", [3]soakSample{{60, 10 * mib, 30}, {130, 18 * mib, 30}, {130, 18 * mib, 30}}, false},
		{"pool-noise-within-the-limit-ok", [3]soakSample{{60, 10 * mib, 30}, {80, 12 * mib, 30}, {100, 14 * mib, 30}}, false},
		{"up-and-down-ok", [3]soakSample{{60, 10 * mib, 30}, {200, 30 * mib, 30}, {90, 11 * mib, 30}}, false},
		{"goroutines-grow-in-both-segments-leak", [3]soakSample{{60, 10 * mib, 30}, {100, 10 * mib, 30}, {140, 10 * mib, 30}}, true},
		{"heap-grows-in-both-segments-leak", [3]soakSample{{60, 10 * mib, 30}, {60, 14 * mib, 30}, {60, 18 * mib, 30}}, true},
	} {
		v := judgeSoak(c.c, 1000, lim)
		if v.leak != c.leak {
			t.Errorf("%s: leak = %v (%s), want %v", c.name, v.leak, v.reason, c.leak)
		}
	}
	v := judgeSoak([3]soakSample{{60, 0, 0}, {100, 0, 0}, {160, 0, 0}}, 2000, lim)
	if v.goroutinesPer1k != [2]float64{20, 30} {
		t.Errorf("goroutines per 1000 requests: %v, want [20 30]", v.goroutinesPer1k)
	}
}

// TestSoakTellsALeakFromKeepAliveConnections: the soak's whole method, from its
// connection pool to its checkpoints and forced collections, on two real processes:
// one that leaks a goroutine and 32 KiB per request is judged a leak; one whose every
// open keep-alive connection holds a goroutine and 256 KiB (far more than the leak per
// request, as long as the connection lives) is not.
func TestSoakTellsALeakFromKeepAliveConnections(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode string
		leak bool
	}{{"leak", true}, {"keepalive", false}} {
		t.Run(c.mode, func(t *testing.T) {
			pub, internal := devstack.FreeAddr(t), devstack.FreeAddr(t)
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), "BENCH_SOAK_FAKE="+c.mode, "SOAK_PUBLIC_ADDR="+pub, "SOAK_INTERNAL_ADDR="+internal)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			waitListening(t, ctx, "http://"+internal+"/metrics")

			load := newSoakLoad(8, 1000, func(tgt *vegeta.Target) error {
				*tgt = vegeta.Target{Method: http.MethodGet, URL: "http://" + pub + "/"}
				return nil
			})
			procs := []soakProcess{{name: c.mode, metricsURL: "http://" + internal + "/metrics"}}
			r, err := soakRun(ctx, load, procs, 300, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			printSoak(&out, "a test service that "+c.mode+"s", r, procs, options{soakRate: load.rate})
			t.Logf("\n%s", out.String())
			if r.metrics.Requests != 600 || r.metrics.Success != 1 {
				t.Fatalf("measured requests %d, success %v: want 600 and all", r.metrics.Requests, r.metrics.Success)
			}
			if v := r.verdicts[0]; v.leak != c.leak {
				t.Fatalf("%s: leak = %v (%s), want %v", c.mode, v.leak, v.reason, c.leak)
			}
			if c.mode != "keepalive" {
				return
			}
			// The control: with the pool's connections open, the same process holds a
			// goroutine per connection more than at the checkpoint. A soak that sampled
			// while connections were open would read their number, not a leak.
			var m vegeta.Metrics
			if err := load.run(ctx, 50, &m, nil); err != nil {
				t.Fatal(err)
			}
			open, err := scrapeRuntime(ctx, http.DefaultClient, procs[0].metricsURL)
			if err != nil {
				t.Fatal(err)
			}
			if atRest := r.at[2][0].goroutines; open.goroutines < atRest+8 {
				t.Errorf("goroutines with the pool open %v, at rest %v: want a goroutine per open connection more", open.goroutines, atRest)
			}
		})
	}
}

func waitListening(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered: %v", url, err)
		case <-time.After(20 * time.Millisecond): // poll interval, bounded by ctx
		}
	}
}
