package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	mongooptions "go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack/wireproxy"
)

// Where the soak's time goes: its latencies per operation, and from the MongoDB wire
// proxy, per command and collection, how long commands waited for their turn and how long
// they then took (wireproxy.StatsCommand), over the measured segments.

// soakOp names the operation of one of the soak's requests from its method and path.
func soakOp(method, url string) string {
	switch {
	case method == http.MethodGet:
		return "list"
	case strings.HasSuffix(url, "/workspace/move"):
		return "move"
	case strings.HasSuffix(url, "/workbooks"):
		return "create-workbook"
	case strings.HasSuffix(url, "/folders"):
		return "create-folder"
	case strings.HasSuffix(url, "/generate-session"):
		return "mint"
	case strings.HasSuffix(url, "/session/exchange"):
		return "exchange"
	}
	return "other"
}

// printSoakOps prints p50/p99 and errors per operation.
func printSoakOps(w io.Writer, perOp map[string]*vegeta.Metrics) {
	ops := make([]string, 0, len(perOp))
	for op := range perOp {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	fmt.Fprintf(w, "%-16s %8s %9s %9s %9s %7s\n", "operation", "requests", "p50", "p99", "max", "errors")
	for _, op := range ops {
		m := perOp[op]
		m.Close()
		failed := m.Requests - uint64(m.Success*float64(m.Requests)+0.5)
		fmt.Fprintf(w, "%-16s %8d %9s %9s %9s %7d\n", op, m.Requests, fmtDur(m.Latencies.P50), fmtDur(m.Latencies.P99), fmtDur(m.Latencies.Max), failed)
	}
}

// proxyStats is the wire proxy's answer to wireproxy.StatsCommand.
type proxyStats struct {
	BoundsMicros []int64 `bson:"boundsMicros"`
	Commands     map[string]struct {
		Count         int64   `bson:"count"`
		Wait          []int64 `bson:"wait"`
		Exec          []int64 `bson:"exec"`
		WaitSumMicros int64   `bson:"waitSumMicros"`
		ExecSumMicros int64   `bson:"execSumMicros"`
	} `bson:"commands"`
}

// readProxyStats asks the proxy at uri for its figures.
func readProxyStats(ctx context.Context, uri string) (proxyStats, error) {
	c, err := mongo.Connect(mongooptions.Client().ApplyURI(uri).SetTimeout(10 * time.Second))
	if err != nil {
		return proxyStats{}, err
	}
	defer func() { _ = c.Disconnect(context.Background()) }()
	var s proxyStats
	err = c.Database("admin").RunCommand(ctx, bson.D{{Key: wireproxy.StatsCommand, Value: 1}}).Decode(&s)
	return s, err
}

// wireRow is one command × collection's figures between two readings.
type wireRow struct {
	key                string
	count              int64
	wait, exec         []int64
	waitSum, execSum   time.Duration
	bounds             []int64
	waitP99, execP99   time.Duration
	waitMean, execMean time.Duration
}

// diffProxyStats is what happened between readings a and b, busiest first (time taken).
func diffProxyStats(a, b proxyStats) []wireRow {
	var rows []wireRow
	for k, cb := range b.Commands {
		ca := a.Commands[k]
		r := wireRow{key: k, count: cb.Count - ca.Count, bounds: b.BoundsMicros,
			waitSum: time.Duration(cb.WaitSumMicros-ca.WaitSumMicros) * time.Microsecond,
			execSum: time.Duration(cb.ExecSumMicros-ca.ExecSumMicros) * time.Microsecond}
		if r.count == 0 {
			continue
		}
		r.wait, r.exec = subBuckets(cb.Wait, ca.Wait), subBuckets(cb.Exec, ca.Exec)
		r.waitP99, r.execP99 = bucketQuantile(r.wait, r.bounds, 0.99), bucketQuantile(r.exec, r.bounds, 0.99)
		r.waitMean, r.execMean = r.waitSum/time.Duration(r.count), r.execSum/time.Duration(r.count)
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y wireRow) int { return int((y.execSum + y.waitSum) - (x.execSum + x.waitSum)) })
	return rows
}

func subBuckets(b, a []int64) []int64 {
	out := slices.Clone(b)
	for i := range min(len(a), len(out)) {
		out[i] -= a[i]
	}
	return out
}

// bucketQuantile is the upper bound of the bucket holding quantile q (the last bound
// doubled for the overflow bucket).
func bucketQuantile(buckets, bounds []int64, q float64) time.Duration {
	var total int64
	for _, n := range buckets {
		total += n
	}
	if total == 0 || len(bounds) == 0 {
		return 0
	}
	want := int64(q*float64(total) + 0.999999)
	var seen int64
	for i, n := range buckets {
		seen += n
		if seen >= want {
			if i < len(bounds) {
				return time.Duration(bounds[i]) * time.Microsecond
			}
			break
		}
	}
	return 2 * time.Duration(bounds[len(bounds)-1]) * time.Microsecond
}

// printProxyStats prints the busiest command × collection rows and the totals: the time
// commands spent waiting for their turn against the time they ran upstream.
func printProxyStats(w io.Writer, rows []wireRow, wall time.Duration) {
	var n int64
	var wait, exec time.Duration
	for _, r := range rows {
		n, wait, exec = n+r.count, wait+r.waitSum, exec+r.execSum
	}
	fmt.Fprintf(w, "# MongoDB wire proxy over the measured segments: %d commands, waiting for their turn %s in all, running %s (%.0f%% of the wall time busy upstream)\n",
		n, wait.Round(time.Millisecond), exec.Round(time.Millisecond), 100*exec.Seconds()/wall.Seconds())
	fmt.Fprintf(w, "%-40s %7s %9s %9s %9s %9s %10s\n", "command collection", "count", "wait avg", "wait p99", "run avg", "run p99", "run total")
	for i, r := range rows {
		if i == 12 {
			fmt.Fprintf(w, "(%d more rows)\n", len(rows)-i)
			break
		}
		fmt.Fprintf(w, "%-40s %7d %9s %9s %9s %9s %10s\n", r.key, r.count, fmtDur(r.waitMean), "≤"+fmtDur(r.waitP99),
			fmtDur(r.execMean), "≤"+fmtDur(r.execP99), r.execSum.Round(time.Millisecond))
	}
}
