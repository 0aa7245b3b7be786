package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The soak's method (docs/operations.md, "The soak and its verdict"). A leak is growth that scales
// with the requests served; goroutines and heap that follow open connections, pools
// filling up or a warm-up are not. So:
//
//   - the load comes from a fixed pool of keep-alive connections (soakLoad): however
//     slow the machine, at most `conns` requests are in flight, so every pool behind
//     the gateway is bounded by the same number;
//   - the requests are counted, not timed: a warm-up of N requests, then two segments
//     of N each, so "per 1000 requests" is exact whatever the rate achieved;
//   - each checkpoint is taken at equal connection counts: the load has stopped and its
//     connections are closed (zero client connections every time), the processes' own
//     goroutines have settled, and a collection has been forced (POST /debug/gc on the
//     internal listener) before go_goroutines and go_gc_heap_live_bytes are read;
//   - a process leaks when, between the checkpoint after the warm-up and the last, a
//     figure grew by more than the pools could account for (soakLimits, from `conns`)
//     and grew in both segments. Machine load changes how fast the requests go, not
//     how many there are nor how many connections they used, so it cannot move a
//     figure across the limit; a warm-up grows in the first segment only.

// soakSample is one process's figures at a checkpoint.
type soakSample struct {
	goroutines, heapLive, openFDs float64
}

// soakLimits are the growth over the two measured segments that connection pools can
// account for; more is a leak.
type soakLimits struct {
	goroutines float64
	heapBytes  float64
}

// limitsFor bounds what a fixed pool of conns client connections can make the platform
// hold: the gateway keeps an upstream connection (two transport goroutines, two 32 KiB
// buffers) per concurrent request to each of three services, each service a server
// goroutine per connection; plus a few background goroutines (timers, refreshes) and
// 2 MiB of caches and driver buffers settling.
func limitsFor(conns int) soakLimits {
	return soakLimits{goroutines: float64(6*conns + 8), heapBytes: float64(2<<20 + 3*conns*128<<10)}
}

// soakVerdict judges one process from its checkpoints: c[0] after the warm-up, c[1]
// and c[2] after each measured segment of perSegment requests.
type soakVerdict struct {
	goroutinesPer1k, heapPer1k [2]float64 // growth per 1000 requests in segments A and B
	leak                       bool
	reason                     string
}

func judgeSoak(c [3]soakSample, perSegment int, lim soakLimits) soakVerdict {
	k := float64(perSegment) / 1000
	v := soakVerdict{
		goroutinesPer1k: [2]float64{(c[1].goroutines - c[0].goroutines) / k, (c[2].goroutines - c[1].goroutines) / k},
		heapPer1k:       [2]float64{(c[1].heapLive - c[0].heapLive) / k, (c[2].heapLive - c[1].heapLive) / k},
	}
	grows := func(a, b, cc, limit float64) bool { return cc-a > limit && b > a && cc > b }
	var why []string
	if grows(c[0].goroutines, c[1].goroutines, c[2].goroutines, lim.goroutines) {
		why = append(why, fmt.Sprintf("goroutines +%.0f > %.0f", c[2].goroutines-c[0].goroutines, lim.goroutines))
	}
	if grows(c[0].heapLive, c[1].heapLive, c[2].heapLive, lim.heapBytes) {
		why = append(why, fmt.Sprintf("live heap +%.1f MiB > %.1f MiB", (c[2].heapLive-c[0].heapLive)/(1<<20), lim.heapBytes/(1<<20)))
	}
	v.leak = len(why) > 0
	v.reason = strings.Join(why, ", ")
	return v
}

// soakLoad sends requests from a fixed pool of keep-alive connections.
type soakLoad struct {
	mu       sync.Mutex // the targeter keeps sequence state
	conns    int
	rate     int // requests/s; fewer when all connections are busy
	client   *http.Client
	next     func(*vegeta.Target) error // the targeter: each call is the next request
	onResult func(*vegeta.Result)       // optional, called from the workers
	// opOf, when set, names a result's operation: the measured segments' figures are
	// kept per operation too (soakResult.perOp).
	opOf func(*vegeta.Result) string
	// onMeasure, when set, is called before the first measured segment (begin) and
	// after the last.
	onMeasure func(ctx context.Context, begin bool) error
}

func newSoakLoad(conns, rate int, next func(*vegeta.Target) error) *soakLoad {
	return &soakLoad{conns: conns, rate: rate, next: next, client: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:       nil, // never an HTTP_PROXY from the environment
			DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
			// The pool: never more than conns connections, all kept between requests.
			MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, MaxIdleConns: conns,
		},
	}}
}

// run sends exactly n requests, paced at rate, each by one of conns workers, adding
// the results to m, and to perOp by operation when perOp and l.opOf are set.
func (l *soakLoad) run(ctx context.Context, n int, m *vegeta.Metrics, perOp map[string]*vegeta.Metrics) error {
	ticks := make(chan struct{})
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for range l.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ticks {
				res, err := l.hit(ctx)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if res != nil {
					m.Add(res)
					if perOp != nil && l.opOf != nil {
						op := l.opOf(res)
						if perOp[op] == nil {
							perOp[op] = &vegeta.Metrics{}
						}
						perOp[op].Add(res)
					}
				}
				mu.Unlock()
			}
		}()
	}
	pace := time.NewTicker(time.Second / time.Duration(max(l.rate, 1)))
	defer pace.Stop()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case <-pace.C:
		case <-ctx.Done():
		}
		select {
		case ticks <- struct{}{}: // blocks while every connection is busy
		case <-ctx.Done():
		}
	}
	close(ticks)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return firstErr
}

func (l *soakLoad) hit(ctx context.Context) (*vegeta.Result, error) {
	var tgt vegeta.Target
	l.mu.Lock()
	err := l.next(&tgt)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	req, err := tgt.Request()
	if err != nil {
		return nil, err
	}
	res := &vegeta.Result{Method: tgt.Method, URL: tgt.URL, Timestamp: time.Now()}
	resp, err := l.client.Do(req.WithContext(ctx))
	if err != nil {
		res.Error, res.Latency = err.Error(), time.Since(res.Timestamp)
		return res, nil
	}
	res.Body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	res.Code, res.Latency = uint16(resp.StatusCode), time.Since(res.Timestamp)
	if err != nil {
		res.Error = err.Error()
	} else if resp.StatusCode < 200 || resp.StatusCode > 299 {
		res.Error = resp.Status
	}
	if l.onResult != nil {
		l.onResult(res)
	}
	return res, nil
}

// measure calls onMeasure, if any.
func (l *soakLoad) measure(ctx context.Context, begin bool) error {
	if l.onMeasure == nil {
		return nil
	}
	return l.onMeasure(ctx, begin)
}

// soakProcess is one sampled process: its metrics URL on the internal listener.
type soakProcess struct{ name, metricsURL string }

// checkpoint closes the load's connections, then samples every process at rest.
func (l *soakLoad) checkpoint(ctx context.Context, procs []soakProcess) ([]soakSample, error) {
	l.client.CloseIdleConnections() // no request is in flight: this closes the whole pool
	mc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	out := make([]soakSample, len(procs))
	for i, p := range procs {
		s, err := sampleAtRest(ctx, mc, p)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// sampleAtRest waits until the process's goroutine count holds still (the goroutines
// of the connections just closed exit on their own time), forces a collection and
// reads its figures.
func sampleAtRest(ctx context.Context, c *http.Client, p soakProcess) (soakSample, error) {
	prev, stable := -1.0, 0
	for deadline := time.Now().Add(5 * time.Second); stable < 3 && time.Now().Before(deadline); {
		s, err := scrapeRuntime(ctx, c, p.metricsURL)
		if err != nil {
			return soakSample{}, err
		}
		if s.goroutines == prev {
			stable++
		} else {
			prev, stable = s.goroutines, 0
		}
		select {
		case <-ctx.Done():
			return soakSample{}, ctx.Err()
		case <-time.After(100 * time.Millisecond): // the interval between reads
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.metricsURL, "/metrics")+"/debug/gc", nil)
	if err != nil {
		return soakSample{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return soakSample{}, fmt.Errorf("%s: force a collection: %w", p.name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return soakSample{}, fmt.Errorf("%s: POST /debug/gc answered %s", p.name, resp.Status)
	}
	return scrapeRuntime(ctx, c, p.metricsURL)
}

// scrapeRuntime reads go_goroutines, go_gc_heap_live_bytes and process_open_fds from a
// process's metrics URL.
func scrapeRuntime(ctx context.Context, c *http.Client, url string) (soakSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return soakSample{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return soakSample{}, err
	}
	defer resp.Body.Close()
	var s soakSample
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "go_goroutines":
			dst = &s.goroutines
		case "go_gc_heap_live_bytes":
			dst = &s.heapLive
		case "process_open_fds":
			dst = &s.openFDs
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(value, 64); err != nil {
			return soakSample{}, err
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return soakSample{}, err
	}
	if found < 3 {
		return soakSample{}, errors.New(url + ": no go_goroutines, go_gc_heap_live_bytes or process_open_fds")
	}
	return s, nil
}

// soakResult is a soak's figures: the checkpoints (after the warm-up, after segment A,
// after segment B) of every process and the verdicts.
type soakResult struct {
	perSegment int
	at         [3][]soakSample            // by checkpoint, then process
	metrics    vegeta.Metrics             // the measured segments' requests (not the warm-up's)
	perOp      map[string]*vegeta.Metrics // the same by operation, when the load names them
	wall       time.Duration              // of the measured segments
	verdicts   []soakVerdict
	limits     soakLimits
}

// soakRun runs the method on procs: a warm-up of perSegment requests, then two
// segments of perSegment requests, with a checkpoint after each.
func soakRun(ctx context.Context, l *soakLoad, procs []soakProcess, perSegment int, logf func(string, ...any)) (*soakResult, error) {
	r := &soakResult{perSegment: perSegment, limits: limitsFor(l.conns), perOp: map[string]*vegeta.Metrics{}}
	var warm vegeta.Metrics
	logf("soak: warm-up, %d requests", perSegment)
	if err := l.run(ctx, perSegment, &warm, nil); err != nil {
		return nil, err
	}
	for i := range r.at {
		if i > 0 {
			logf("soak: segment %c, %d requests at %d/s on %d connections", 'A'+i-1, perSegment, l.rate, l.conns)
			if i == 1 {
				if err := l.measure(ctx, true); err != nil {
					return nil, err
				}
			}
			segStart := time.Now()
			if err := l.run(ctx, perSegment, &r.metrics, r.perOp); err != nil {
				return nil, err
			}
			r.wall += time.Since(segStart)
			if i == len(r.at)-1 {
				if err := l.measure(ctx, false); err != nil {
					return nil, err
				}
			}
		}
		s, err := l.checkpoint(ctx, procs)
		if err != nil {
			return nil, err
		}
		r.at[i] = s
	}
	r.metrics.Close()
	for p := range procs {
		r.verdicts = append(r.verdicts, judgeSoak([3]soakSample{r.at[0][p], r.at[1][p], r.at[2][p]}, perSegment, r.limits))
	}
	return r, nil
}
