package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The soak: mixed traffic on the real platform, in globex's deployment (the operations
// table works in acme's), from a fixed pool of keep-alive connections, every failure
// counted, and each process's goroutines and live heap judged by the method of
// soak_judge.go: compared at checkpoints of equal connection count after a forced
// collection, as growth per thousand requests.

// soakMix is one lap of the traffic: each entry is one request.
var soakMix = []string{
	"read", "read", "read", "read", "read", "read", "read", "read",
	"move", "move", "move", "move",
	"create-workbook", "create-workbook", "create-folder",
	"mint", "mint", "mint", "exchange", "exchange",
}

// soakConns is the soak's connection pool: enough to keep 20 requests/s flowing when a
// bulk of writes queues behind FerretDB, few enough to bound what pools can hold.
const soakConns = 8

func runSoak(ctx context.Context, env *Env, o options) (bool, error) {
	logf("soak: setting up")
	var p platformInfo
	var err error
	if o.soakSerialize != "" {
		p, err = env.platformWith(ctx, "soak-"+o.soakSerialize, "DEVSTACK_MONGO_SERIALIZE="+o.soakSerialize)
	} else {
		p, err = env.Platform(ctx)
	}
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

	targeter, sessions := soakTraffic(p.Gateway, dep, bearer, apiKey, a, b, items)

	// Sampled processes: those that answer /metrics (not a paused worker).
	var procs []soakProcess
	for _, pp := range platformProcesses {
		if pp.name == "dbtsync-worker" && workerPaused.Load() {
			continue
		}
		if u, ok := p.Metrics[pp.name]; ok {
			procs = append(procs, soakProcess{name: pp.name, metricsURL: u})
		}
	}
	load := newSoakLoad(soakConns, o.soakRate, targeter)
	defer load.client.CloseIdleConnections()
	load.onResult = func(res *vegeta.Result) {
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
	}
	load.opOf = func(res *vegeta.Result) string { return soakOp(res.Method, res.URL) }
	var before, after proxyStats
	load.onMeasure = func(ctx context.Context, begin bool) error {
		s, err := readProxyStats(ctx, p.Mongo)
		if begin {
			before = s
		} else {
			after = s
		}
		return err
	}
	perSegment := max(int(o.soak.Seconds()*float64(o.soakRate))/3, 20)
	r, err := soakRun(ctx, load, procs, perSegment, logf)
	if err != nil {
		return false, err
	}
	printSoak(stdout, "mixed traffic on the real platform (globex's deployment)", r, procs, o)
	printSoakOps(stdout, r.perOp)
	printProxyStats(stdout, diffProxyStats(before, after), r.wall)
	failed := r.metrics.Requests - uint64(r.metrics.Success*float64(r.metrics.Requests)+0.5)
	ok := failed == 0 && r.metrics.Requests > 0
	for _, v := range r.verdicts {
		ok = ok && !v.leak
	}
	if workerPaused.Load() {
		fmt.Fprintln(stdout, "dbtsync-worker: paused since the operations table's dbt-sync row (not sampled; the soak sends no dbt-sync)")
	}
	return ok, nil
}

// soakTraffic is the soak's targeter, one lap of soakMix after another in globex's
// deployment dep (folders a and b, the workbooks items), and the pool of minted session
// ids that its exchanges consume (fill it from the results).
func soakTraffic(gateway string, dep int64, bearer, apiKey string, a, b int64, items []int64) (func(*vegeta.Target) error, *sessionPool) {
	base := fmt.Sprintf("%s/api/v1/deployments/%d", gateway, dep)
	bearerHdr, keyHdr := jsonHeader("Bearer "+bearer), jsonHeader("Api-Key "+apiKey)
	plainHdr := http.Header{"Content-Type": {"application/json"}}
	var sessions sessionPool
	var seq, moves, created atomic.Int64
	mint := func(tgt *vegeta.Target) {
		*tgt = vegeta.Target{Method: http.MethodPost, URL: gateway + "/api/v1/embed/generate-session", Header: keyHdr,
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
			*tgt = vegeta.Target{Method: http.MethodPost, URL: gateway + "/api/v1/embed/session/exchange", Header: plainHdr,
				Body: fmt.Appendf(nil, `{"sessionId":%q}`, sid)}
		}
		return nil
	}
	return targeter, &sessions
}

// printSoak prints the soak's figures and verdicts, and the rule; what says what ran.
func printSoak(w io.Writer, what string, r *soakResult, procs []soakProcess, o options) {
	m := r.metrics
	failed := m.Requests - uint64(m.Success*float64(m.Requests)+0.5)
	fmt.Fprintf(w, "# soak: %s, from a fixed pool of %d keep-alive connections\n", what, soakConns)
	if o.soakSerialize != "" {
		fmt.Fprintf(w, "# the wire proxy's mode: DEVSTACK_MONGO_SERIALIZE=%s\n", o.soakSerialize)
	}
	fmt.Fprintf(w, "# one run on %d CPU cores (%s) at %d req/s: a warm-up and two measured segments of %d requests each; per lap of %d\n",
		runtime.NumCPU(), runtime.Version(), o.soakRate, r.perSegment, len(soakMix))
	fmt.Fprintf(w, "# requests: 8 listings, 4 single moves, 2 workbook and 1 folder creations, 3 generate-session, 2 exchanges; load average %s\n", loadAvg())
	fmt.Fprintf(w, "requests %d in %s (%.0f/s), p50 %s, p99 %s, errors %d [need 0: %s]\n",
		m.Requests, r.wall.Round(time.Millisecond), float64(m.Requests)/r.wall.Seconds(), fmtDur(m.Latencies.P50), fmtDur(m.Latencies.P99), failed, passFail(failed == 0))
	if len(m.Errors) > 0 {
		fmt.Fprintf(w, "errors: %s\n", strings.Join(m.Errors[:min(3, len(m.Errors))], "; "))
	}
	fmt.Fprintf(w, "%-15s %18s %15s %25s %17s %5s %s\n", "process", "goroutines c0/c1/c2", "per 1000 A/B", "live heap MiB c0/c1/c2", "KiB/1000 A/B", "fds", "verdict")
	for i, p := range procs {
		c0, c1, c2 := r.at[0][i], r.at[1][i], r.at[2][i]
		v := r.verdicts[i]
		verdict := "ok"
		if v.leak {
			verdict = "LEAK: " + v.reason
		}
		fmt.Fprintf(w, "%-15s %6.0f/%5.0f/%5.0f %7.1f/%7.1f %8.2f/%7.2f/%7.2f %8.0f/%8.0f %5.0f %s\n", p.name,
			c0.goroutines, c1.goroutines, c2.goroutines, v.goroutinesPer1k[0], v.goroutinesPer1k[1],
			c0.heapLive/(1<<20), c1.heapLive/(1<<20), c2.heapLive/(1<<20), v.heapPer1k[0]/1024, v.heapPer1k[1]/1024, c2.openFDs, verdict)
	}
	fmt.Fprintf(w, "legend: c0, c1, c2 = checkpoints after the warm-up and after segments A and B, each with the load stopped and its\n")
	fmt.Fprintf(w, "        connections closed, goroutines settled and a forced collection (POST /debug/gc); per 1000 = growth per 1000\n")
	fmt.Fprintf(w, "        requests in A and in B; fds = open descriptors at c2. LEAK = grew in A and in B and by more than a pool of %d\n", soakConns)
	fmt.Fprintf(w, "        connections can hold from c0 to c2 (%.0f goroutines, %.1f MiB): the smallest leak it reports is %.1f goroutines or\n",
		r.limits.goroutines, r.limits.heapBytes/(1<<20), r.limits.goroutines*1000/float64(2*r.perSegment))
	fmt.Fprintf(w, "        %.0f KiB per 1000 requests (make soak DURATION=10m sees smaller ones). Errors need 0.\n", r.limits.heapBytes*1000/float64(2*r.perSegment)/1024)
}

// workerPaused is set once the dbt-sync row has paused the worker.
var workerPaused atomic.Bool
