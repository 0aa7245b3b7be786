package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

func printTable(w io.Writer, t *Table, rows []*row, res map[string]*Summary, o options) {
	printHeader(w, t, o)
	printRows(w, t, rows, res)
	printRatios(w, t, res)
	if t.Notes != nil {
		for _, l := range t.Notes(res) {
			fmt.Fprintln(w, l)
		}
	}
	printRSS(w, rows)
	for _, r := range rows {
		if r.sum.Errors > 0 {
			fmt.Fprintf(w, "errors %s: %s\n", r.sum.Name, strings.Join(r.sum.ErrSample, "; "))
		}
	}
	legend := t.Legend
	if legend == nil {
		legend = defaultLegend
	}
	for _, l := range legend {
		fmt.Fprintln(w, l)
	}
}

var defaultLegend = []string{
	"legend: req/s = successful responses/s, p50/p99 = latency; both medians over the rounds, errors summed.",
	"        cpu_us/req = user+system CPU of the measured process (for (a) the backend; nginx: master+workers)",
	"        from /proc/<pid>/stat around each round / requests, median over rounds; gen_us/req = the load",
	"        generator's own CPU, which shares the cores. Ratios divide medians.",
}

// printHeader says how the table was measured: the machine, the rounds, the load.
func printHeader(w io.Writer, t *Table, o options) {
	rate := "max (closed loop)"
	if o.rate > 0 {
		rate = fmt.Sprintf("%d/s", o.rate)
	}
	fmt.Fprintf(w, "# %s\n", t.Title)
	fmt.Fprintf(w, "# one run on %d CPU cores (%s/%s, %s): %d rounds x %s per variant, interleaved (warm-up %s); rate %s, %d workers/connections; load generator on the same machine\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), o.rounds, o.duration, o.warmup, rate, o.workers)
	// Other work on the machine skews every figure; interleaving spreads it evenly,
	// the load average says how much there was.
	fmt.Fprintf(w, "# load average (1 min) at start %s, at end %s\n", o.loadBefore, loadAvg())
}

// printRows prints one line per variant, with its ratios to the table's baseline.
func printRows(w io.Writer, t *Table, rows []*row, res map[string]*Summary) {
	base := res[t.Baseline]
	hasBase := base != nil && base.Err == nil && base.RPS > 0
	fmt.Fprintf(w, "%-26s %9s %9s %9s %7s %11s %9s %9s %11s\n",
		"variant", "req/s", "p50", "p99", "errors", "cpu_us/req", "rps_vs_"+t.Baseline, "cpu_vs_"+t.Baseline, "gen_us/req")
	for _, r := range rows {
		s := r.sum
		if s.Err != nil {
			var skip ErrSkip
			if errors.As(s.Err, &skip) {
				fmt.Fprintf(w, "%-26s skipped: %s\n", s.Name, skip.Reason)
			} else {
				fmt.Fprintf(w, "%-26s FAILED: %s\n", s.Name, firstLine(s.Err.Error()))
			}
			continue
		}
		rpsRatio, cpuRatio := "-", "-"
		if hasBase {
			rpsRatio = fmt.Sprintf("%.2fx", s.RPS/base.RPS)
			if base.CPUPerReq > 0 {
				cpuRatio = fmt.Sprintf("%.2fx", s.CPUPerReq/base.CPUPerReq)
			}
		}
		fmt.Fprintf(w, "%-26s %9s %9s %9s %7d %11.1f %9s %9s %11.1f\n",
			s.Name, fmtRate(s.RPS), fmtDur(s.P50), fmtDur(s.P99), s.Errors, s.CPUPerReq, rpsRatio, cpuRatio, s.GenPerReq)
	}
}

// printRatios prints the ratios the table names between two of its variants.
func printRatios(w io.Writer, t *Table, res map[string]*Summary) {
	var ratios []string
	for _, rt := range t.Ratios {
		n, d := res[rt.Num], res[rt.Den]
		if n == nil || d == nil || n.Err != nil || d.Err != nil || d.RPS == 0 || d.CPUPerReq == 0 {
			ratios = append(ratios, fmt.Sprintf("(%s)/(%s) n/a", rt.Num, rt.Den))
			continue
		}
		ratios = append(ratios, fmt.Sprintf("(%s)/(%s) rps=%.2fx cpu=%.2fx", rt.Num, rt.Den, n.RPS/d.RPS, n.CPUPerReq/d.CPUPerReq))
	}
	if len(ratios) > 0 {
		fmt.Fprintf(w, "ratios: %s\n", strings.Join(ratios, "  "))
	}
}

// printRSS prints the peak RSS once per distinct process (the gateway serves (d) and (e)).
func printRSS(w io.Writer, rows []*row) {
	var rss []string
	seen := map[*Proc]bool{}
	for _, r := range rows {
		procs := []*Proc{r.sum.Proc}
		if r.target != nil && r.target.RSS != nil {
			procs = r.target.RSS
		}
		for _, p := range procs {
			if p == nil || seen[p] {
				continue
			}
			seen[p] = true
			if b, err := peakRSS(p.PIDs()); err == nil {
				rss = append(rss, fmt.Sprintf("%s %.1f MiB", p.Label, float64(b)/(1<<20)))
			}
		}
	}
	if len(rss) > 0 {
		fmt.Fprintf(w, "peak RSS (VmHWM): %s\n", strings.Join(rss, ", "))
	}
}

// fmtRate keeps two significant digits for slow rows (a conversion, a bulk move).
func fmtRate(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.2f", r)
	}
	return fmt.Sprintf("%.0f", r)
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%dus", d.Microseconds())
	}
}

func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
