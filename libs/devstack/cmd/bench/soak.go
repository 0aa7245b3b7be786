package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The soak: mixed traffic at a fixed rate on the real platform, in globex's
// deployment (the operations table works in acme's), with every failure counted
// and each process's goroutines and heap compared between the first and the last
// window (issue 6: zero errors, growth at most 10 percent).

// soakMix is one lap of the traffic: each entry is one request.
var soakMix = []string{
	"read", "read", "read", "read", "read", "read", "read", "read",
	"move", "move", "move", "move",
	"create-workbook", "create-workbook", "create-folder",
	"mint", "mint", "mint", "exchange", "exchange",
}

const (
	soakGrowthLimit = 0.10
	soakHeapSlack   = 1 << 20 // bytes of live-heap growth below which a percentage means nothing
)

type soakSample struct {
	at                  time.Duration
	goroutines, heapUse float64 // heapUse: the live heap after the last collection (go_gc_heap_live_bytes)
}

func runSoak(ctx context.Context, env *Env, o options) (bool, error) {
	logf("soak: setting up")
	p, err := env.Platform(ctx)
	if err != nil {
		return false, err
	}
	globex := p.Seed.Accounts["globex"]
	dep, bearer, apiKey := globex.Deployments[0].ID, globex.Users["admin"].Bearer, globex.APIKeys["admin"]
	c := newAPIClient(p.Gateway)
	a, err := c.createFolder(ctx, bearer, dep, "soak A", 0)
	if err != nil {
		return false, err
	}
	b, err := c.createFolder(ctx, bearer, dep, "soak B", 0)
	if err != nil {
		return false, err
	}
	items := make([]int64, 64)
	if err := parallel(ctx, len(items), 8, func(ctx context.Context, i int) error {
		var err error
		items[i], err = c.createItem(ctx, bearer, dep, "workbooks", fmt.Sprintf("soak workbook %d", i), a)
		return err
	}); err != nil {
		return false, err
	}

	base := fmt.Sprintf("%s/api/v1/deployments/%d", p.Gateway, dep)
	bearerHdr, keyHdr := jsonHeader("Bearer "+bearer), jsonHeader("Api-Key "+apiKey)
	plainHdr := http.Header{"Content-Type": {"application/json"}}
	var sessions sessionPool
	var seq, moves, created atomic.Int64
	mint := func(tgt *vegeta.Target) {
		*tgt = vegeta.Target{Method: http.MethodPost, URL: p.Gateway + "/api/v1/embed/generate-session", Header: keyHdr,
			Body: fmt.Appendf(nil, `{"deploymentId":%d,"externalId":"soak-user-%d"}`, dep, seq.Load()%externalUsers)}
	}
	targeter := func(tgt *vegeta.Target) error {
		switch soakMix[int(seq.Add(1)-1)%len(soakMix)] {
		case "read":
			*tgt = vegeta.Target{Method: http.MethodGet, URL: fmt.Sprintf("%s/workspace?folderId=%d&first=20", base, a), Header: bearerHdr}
		case "move":
			i := int(moves.Add(1) - 1)
			dest := b
			if (i/len(items))%2 == 1 {
				dest = a
			}
			*tgt = vegeta.Target{Method: http.MethodPost, URL: base + "/workspace/move", Header: bearerHdr,
				Body: fmt.Appendf(nil, `{"type":"WORKBOOK","id":%d,"folderId":%d}`, items[i%len(items)], dest)}
		case "create-workbook":
			*tgt = vegeta.Target{Method: http.MethodPost, URL: base + "/workbooks", Header: bearerHdr,
				Body: fmt.Appendf(nil, `{"name":"soak created %d","folderId":%d}`, created.Add(1), b)}
		case "create-folder":
			*tgt = vegeta.Target{Method: http.MethodPost, URL: base + "/folders", Header: bearerHdr,
				Body: fmt.Appendf(nil, `{"name":"soak folder %d","parentId":%d}`, created.Add(1), b)}
		case "mint":
			mint(tgt)
		case "exchange":
			sid, ok := sessions.take()
			if !ok {
				// No minted id yet: this slot mints instead.
				mint(tgt)
				return nil
			}
			*tgt = vegeta.Target{Method: http.MethodPost, URL: p.Gateway + "/api/v1/embed/session/exchange", Header: plainHdr,
				Body: fmt.Appendf(nil, `{"sessionId":%q}`, sid)}
		}
		return nil
	}

	// Sampled processes: those that answer /metrics (not a paused worker).
	type sampled struct {
		name, url string
		samples   []soakSample
	}
	var procs []*sampled
	for _, pp := range platformProcesses {
		if pp.name == "dbtsync-worker" && workerPaused.Load() {
			continue
		}
		if u, ok := p.Metrics[pp.name]; ok {
			procs = append(procs, &sampled{name: pp.name, url: u})
		}
	}
	window := min(10*time.Second, o.soak/3)
	metricsClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer metricsClient.CloseIdleConnections()

	workers := uint64(64)
	client := loadClient(int(workers))
	newAttacker := func() *vegeta.Attacker {
		return vegeta.NewAttacker(vegeta.Client(client), vegeta.Workers(16), vegeta.MaxWorkers(workers), vegeta.KeepAlive(true))
	}
	// A warm-up at the same rate first, not measured: connection pools, caches and the
	// runtime settle, so the first window is not the start-up ramp.
	warm := min(5*time.Second, o.soak/3)
	logf("soak: warm-up %s at %d req/s", warm, o.soakRate)
	for range newAttacker().Attack(targeter, vegeta.Rate{Freq: o.soakRate, Per: time.Second}, warm, "soak-warm-up") {
	}
	atk := newAttacker() // one attacker per attack: a finished one does not start again
	logf("soak: %s at %d req/s", o.soak, o.soakRate)
	start := time.Now()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			at := time.Since(start)
			for _, sp := range procs {
				if g, h, err := scrapeRuntime(sampleCtx, metricsClient, sp.url); err == nil {
					sp.samples = append(sp.samples, soakSample{at: at, goroutines: g, heapUse: h})
				}
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			atk.Stop()
		case <-stopped:
		}
	}()
	var m vegeta.Metrics
	for res := range atk.Attack(targeter, vegeta.Rate{Freq: o.soakRate, Per: time.Second}, o.soak, "soak") {
		if res.Code == http.StatusOK && strings.HasSuffix(res.URL, "/generate-session") {
			var out struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(res.Body, &out) == nil && out.SessionID != "" {
				sessions.mu.Lock()
				sessions.ids = append(sessions.ids, out.SessionID)
				sessions.mu.Unlock()
			}
		}
		m.Add(res)
	}
	wall := time.Since(start)
	close(stopped)
	stopSampling()
	wg.Wait()
	m.Close()
	if err := ctx.Err(); err != nil {
		return false, err
	}

	ok := m.Success == 1 && m.Requests > 0
	failed := m.Requests - uint64(m.Success*float64(m.Requests)+0.5)
	w := os.Stdout
	fmt.Fprintf(w, "# soak: mixed traffic at a fixed rate on the real platform (globex's deployment)\n")
	fmt.Fprintf(w, "# one run on %d CPU cores (%s): %s at %d req/s; per lap of %d requests: 8 listings, 4 single moves, 2 workbook and\n",
		runtime.NumCPU(), runtime.Version(), o.soak, o.soakRate, len(soakMix))
	fmt.Fprintf(w, "# 1 folder creations, 3 generate-session, 2 exchanges of ids minted earlier in the soak; load average %s\n", loadAvg())
	fmt.Fprintf(w, "requests %d in %s (%.0f/s), p50 %s, p99 %s, errors %d [need 0: %s]\n",
		m.Requests, wall.Round(time.Millisecond), float64(m.Requests)/wall.Seconds(), fmtDur(m.Latencies.P50), fmtDur(m.Latencies.P99), failed, passFail(failed == 0))
	if len(m.Errors) > 0 {
		fmt.Fprintf(w, "errors: %s\n", strings.Join(m.Errors[:min(3, len(m.Errors))], "; "))
	}
	fmt.Fprintf(w, "%-16s %12s %12s %8s %14s %14s %8s %s\n", "process", "goroutines_1", "goroutines_2", "growth", "heap_live_1", "heap_live_2", "growth", "verdict")
	for _, sp := range procs {
		var first, last []soakSample
		for _, s := range sp.samples {
			if s.at < window {
				first = append(first, s)
			}
			if s.at >= wall-window {
				last = append(last, s)
			}
		}
		if len(first) == 0 || len(last) == 0 {
			fmt.Fprintf(w, "%-16s no samples in one of the windows [MISSED]\n", sp.name)
			ok = false
			continue
		}
		g1, g2 := medianOf(first, func(s soakSample) float64 { return s.goroutines }), medianOf(last, func(s soakSample) float64 { return s.goroutines })
		h1, h2 := medianOf(first, func(s soakSample) float64 { return s.heapUse }), medianOf(last, func(s soakSample) float64 { return s.heapUse })
		gg, hg := g2/g1-1, h2/h1-1
		// A live heap of a few MiB moves by more than 10 percent as libraries settle
		// (buffers grown to size, first collections); growth within soakHeapSlack of the
		// first window is not evidence of a leak. No collection yet in the first window
		// (live 0) leaves nothing to compare against.
		heapOK := hg <= soakGrowthLimit || h2-h1 <= soakHeapSlack || h1 == 0
		pass := gg <= soakGrowthLimit && heapOK
		ok = ok && pass
		fmt.Fprintf(w, "%-16s %12.1f %12.1f %7.1f%% %11.1f MiB %10.1f MiB %7.1f%% %s\n",
			sp.name, g1, g2, 100*gg, h1/(1<<20), h2/(1<<20), 100*hg, passFail(pass))
	}
	if workerPaused.Load() {
		fmt.Fprintln(w, "dbtsync-worker: paused since the operations table's dbt-sync row (not sampled; the soak sends no dbt-sync)")
	}
	fmt.Fprintf(w, "legend: samples once a second of go_goroutines and go_gc_heap_live_bytes (the heap the last collection found\n")
	fmt.Fprintf(w, "        alive: what a leak grows; the in-use heap mostly shows garbage awaiting the next collection) from each\n")
	fmt.Fprintf(w, "        process's /metrics, after a %s warm-up; _1 = median of the first %s, _2 = of the last %s;\n", warm, window, window)
	fmt.Fprintf(w, "        growth = _2/_1 - 1, needs <= %.0f%% for both (the live heap may also grow by at most %d MiB: a few-MiB\n", 100*soakGrowthLimit, soakHeapSlack>>20)
	fmt.Fprintf(w, "        heap moves more than 10%% while libraries settle; 0 = no collection yet). Errors need 0.\n")
	return ok, nil
}

// medianOf is the median of f over the samples.
func medianOf(s []soakSample, f func(soakSample) float64) float64 {
	v := make([]float64, len(s))
	for i, x := range s {
		v[i] = f(x)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// scrapeRuntime reads go_goroutines and go_memstats_heap_inuse_bytes from a
// process's metrics URL.
func scrapeRuntime(ctx context.Context, c *http.Client, url string) (goroutines, heapGoal float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_goroutines":
			goroutines, err = strconv.ParseFloat(value, 64)
		case "go_gc_heap_live_bytes":
			heapGoal, err = strconv.ParseFloat(value, 64)
		default:
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		found++
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if found < 2 {
		return 0, 0, fmt.Errorf("%s: no go_goroutines or go_gc_heap_live_bytes", url)
	}
	return goroutines, heapGoal, sc.Err()
}

// workerPaused is set once the dbt-sync row has paused the worker.
var workerPaused atomic.Bool
