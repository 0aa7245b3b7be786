package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// stdout is where the tables print. While a table runs it also copies into that
// table's record, which becomes docs/bench/<table>.md.
var stdout io.Writer = os.Stdout

// benchDoc is one table's run as its docs file records it.
type benchDoc struct {
	Name, Title        string
	Date               time.Time
	Machine            string // cores, OS/arch, Go version
	Args               []string
	LoadStart, LoadEnd string // 1-minute load average when the table began and ended
	Baseline           string
	Rows               []*Summary // nil for the soak and the noisy-neighbour run
	Output             string     // the table exactly as it was printed
}

// machine describes the machine a run measured on, as the printed header does.
func machine() string {
	return fmt.Sprintf("%d CPU cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// docsDirFor resolves -docs-dir: a relative one is under the repository root, so the
// files land in docs/bench whichever directory the bench ran from. "" writes none.
func docsDirFor(dir, root string) string {
	if dir == "" || filepath.IsAbs(dir) {
		return dir
	}
	return filepath.Join(root, dir)
}

// writeBenchDoc writes d as <dir>/<name>.md, replacing the previous run's.
func writeBenchDoc(dir string, d benchDoc) (string, error) {
	if dir == "" {
		return "", nil
	}
	if !validDocName.MatchString(d.Name) {
		return "", fmt.Errorf("bench doc: bad table name %q", d.Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, d.Name+".md")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, renderBenchDoc(d), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

var validDocName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// renderBenchDoc is the file's content: when and where the run was, its rows as a
// markdown table when it has them, and the printed output whole.
func renderBenchDoc(d benchDoc) []byte {
	var b bytes.Buffer
	title := d.Title
	if title == "" {
		title = d.Name
	}
	fmt.Fprintf(&b, "# bench: %s\n\n", title)
	fmt.Fprintf(&b, "Written by `make bench` (`go run ./devstack/cmd/bench -only %s`). Refresh it when you change what it measures; CI does not check it. Figures from another machine, or at another load, do not compare; ratios within one run do.\n\n", d.Name)
	b.WriteString("| run | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n", d.Date.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "| machine | %s |\n", mdCell(d.Machine))
	fmt.Fprintf(&b, "| load average (1 min) | %s at start, %s at end |\n", mdCell(d.LoadStart), mdCell(d.LoadEnd))
	if len(d.Args) > 0 {
		fmt.Fprintf(&b, "| flags | `%s` |\n", mdCell(strings.Join(d.Args, " ")))
	}
	if len(d.Rows) > 0 {
		b.WriteString("\n## Figures\n\n")
		base := ""
		if d.Baseline != "" {
			base = " vs " + d.Baseline
		}
		fmt.Fprintf(&b, "| variant | req/s | p50 | p99 | errors | cpu_us/req | rps%s | cpu%s |\n|---|---:|---:|---:|---:|---:|---:|---:|\n", base, base)
		var baseSum *Summary
		for _, s := range d.Rows {
			if s.Key == d.Baseline {
				baseSum = s
			}
		}
		for _, s := range d.Rows {
			if s.Err != nil {
				var skip ErrSkip
				if errors.As(s.Err, &skip) {
					fmt.Fprintf(&b, "| %s | skipped: %s | | | | | | |\n", mdCell(s.Name), mdCell(skip.Reason))
				} else {
					fmt.Fprintf(&b, "| %s | failed: %s | | | | | | |\n", mdCell(s.Name), mdCell(firstLine(s.Err.Error())))
				}
				continue
			}
			rps, cpu := "-", "-"
			if baseSum != nil && baseSum.Err == nil && baseSum.RPS > 0 {
				rps = fmt.Sprintf("%.2fx", s.RPS/baseSum.RPS)
				if baseSum.CPUPerReq > 0 {
					cpu = fmt.Sprintf("%.2fx", s.CPUPerReq/baseSum.CPUPerReq)
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %.1f | %s | %s |\n",
				mdCell(s.Name), fmtRate(s.RPS), fmtDur(s.P50), fmtDur(s.P99), s.Errors, s.CPUPerReq, rps, cpu)
		}
	}
	b.WriteString("\n## As printed\n\n```text\n")
	b.WriteString(strings.TrimRight(d.Output, "\n"))
	b.WriteString("\n```\n")
	return b.Bytes()
}

// mdCell keeps a value inside its table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
