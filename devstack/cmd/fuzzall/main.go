// Command fuzzall finds every Go fuzz target of the repository (go test -list '^Fuzz' in
// each module of go.work) and runs each for a set time or number of executions in its
// package directory, then prints one summary table. With -save-corpus it copies the
// inputs the fuzzer found interesting (kept in the Go build cache) into the package's
// testdata/fuzz/<Target>/, where plain `go test` replays them as seeds: that is how the
// corpora get committed.
//
//	go run ./devstack/cmd/fuzzall                  # make fuzz: 30 s per target
//	go run ./devstack/cmd/fuzzall -fuzztime=5000x  # CI's brief run: 5000 executions each
//
// CI bounds each target by a count, not a duration. With a duration, go test stops the
// fuzzer through a context deadline: a deadline that falls while the seed corpus is still
// being replayed (a slow machine, a large corpus) or while a worker is mid-call
// (go.dev/issue/75804, fixed in Go 1.27) fails the target with a bare "context deadline
// exceeded" and no failing input. A count has no deadline, so on a slow machine it only
// takes longer. Such a failure is named in the report, so that it is not mistaken for a
// found crash.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
)

// target is one fuzz function and the package that declares it.
type target struct {
	name       string
	importPath string
	dir        string
}

// outcome is what one fuzzing run reported.
type outcome struct {
	target
	ok          bool
	execs       string
	interesting string
	saved       int
	elapsed     time.Duration
	output      string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fuzzall:", err)
		os.Exit(1)
	}
}

func run() error {
	fuzztime := flag.String("fuzztime", "30s", "how long each target is fuzzed: a duration (30s) or a number of executions (5000x), as go test -fuzztime")
	match := flag.String("run", "", "only targets whose name matches this regular expression")
	saveCorpus := flag.Bool("save-corpus", false, "copy the inputs found interesting into each package's testdata/fuzz/<Target>/")
	flag.Parse()
	if !validFuzztime(*fuzztime) {
		return fmt.Errorf("-fuzztime %q: want a duration (30s) or a number of executions (5000x)", *fuzztime)
	}
	filter, err := regexp.Compile(*match)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	root, err := workspaceRoot()
	if err != nil {
		return err
	}
	modules, err := workspaceModules(root)
	if err != nil {
		return err
	}
	var targets []target
	for _, m := range modules {
		found, err := listTargets(m)
		if err != nil {
			return err
		}
		for _, t := range found {
			if filter.MatchString(t.name) {
				targets = append(targets, t)
			}
		}
	}
	if len(targets) == 0 {
		return errors.New("no fuzz targets found")
	}
	cache, err := goEnv(root, "GOCACHE")
	if err != nil {
		return err
	}
	fmt.Printf("fuzzing %d targets for %s each\n", len(targets), *fuzztime)
	start := time.Now()
	var outcomes []outcome
	failed := 0
	for _, t := range targets {
		o := fuzz(t, *fuzztime)
		if *saveCorpus && o.ok {
			if o.saved, err = copyCorpus(filepath.Join(cache, "fuzz", t.importPath, t.name), filepath.Join(t.dir, "testdata", "fuzz", t.name)); err != nil {
				return err
			}
		}
		status := "ok"
		if !o.ok {
			status = "FAIL"
			failed++
		}
		fmt.Printf("%-4s %s %s (%s)\n", status, t.importPath, t.name, o.elapsed.Round(time.Second))
		outcomes = append(outcomes, o)
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TARGET\tPACKAGE\tRESULT\tEXECS\tNEW INTERESTING\tSAVED\tTIME")
	for _, o := range outcomes {
		result := "ok"
		if !o.ok {
			result = "FAIL"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", o.name, o.importPath, result, o.execs, o.interesting, o.saved, o.elapsed.Round(time.Second))
	}
	_ = w.Flush()
	fmt.Printf("\n%d targets fuzzed in %s\nfuzz: %d passed, %d failed\n", len(outcomes), time.Since(start).Round(time.Second), len(outcomes)-failed, failed)
	for _, o := range outcomes {
		if !o.ok {
			fmt.Printf("\n--- %s (%s) failed (%s):\n%s\n", o.name, o.importPath, o.why(), tail(o.output, 40))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d fuzz targets failed", failed, len(outcomes))
	}
	return nil
}

// workspaceRoot is the directory of the go.work that governs the current directory.
func workspaceRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	gowork := strings.TrimSpace(string(out))
	if gowork == "" || gowork == "off" {
		return "", errors.New("run fuzzall inside the repository (no go.work found)")
	}
	return filepath.Dir(gowork), nil
}

// workspaceModules lists the module directories of go.work.
func workspaceModules(root string) ([]string, error) {
	cmd := exec.Command("go", "work", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go work edit -json: %w", err)
	}
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &work); err != nil {
		return nil, err
	}
	var dirs []string
	for _, u := range work.Use {
		dirs = append(dirs, filepath.Join(root, u.DiskPath))
	}
	return dirs, nil
}

// listTargets runs `go test -list '^Fuzz' ./...` in a module: each package prints its
// matching test names, then its own "ok <import path>" line.
func listTargets(module string) ([]target, error) {
	cmd := exec.Command("go", "test", "-list", "^Fuzz", "./...")
	cmd.Dir = module
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -list in %s: %v\n%s%s", module, err, out, stderr.String())
	}
	var targets []target
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 2 && (fields[0] == "ok" || fields[0] == "?"):
			if len(names) == 0 {
				continue
			}
			dir, err := packageDir(module, fields[1])
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				targets = append(targets, target{name: n, importPath: fields[1], dir: dir})
			}
			names = nil
		case strings.HasPrefix(line, "Fuzz"):
			names = append(names, strings.TrimSpace(line))
		}
	}
	return targets, sc.Err()
}

func packageDir(module, importPath string) (string, error) {
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", importPath)
	cmd.Dir = module
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w", importPath, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func goEnv(dir, name string) (string, error) {
	cmd := exec.Command("go", "env", name)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

var (
	execsRE       = regexp.MustCompile(`execs: (\d+)`)
	interestingRE = regexp.MustCompile(`new interesting: (\d+)`)
)

var countRE = regexp.MustCompile(`^[1-9][0-9]*x$`)

// validFuzztime reports whether s is a -fuzztime go test accepts: a positive duration or
// a positive number of executions followed by x.
func validFuzztime(s string) bool {
	if countRE.MatchString(s) {
		return true
	}
	d, err := time.ParseDuration(s)
	return err == nil && d > 0
}

// why says what a failed run's output shows: a failing input go test wrote to
// testdata/fuzz/<Target>/, a stop by the fuzzing deadline with no input (see the package
// comment), or neither (a build or setup failure; the output says).
func (o outcome) why() string {
	switch {
	case strings.Contains(o.output, "Failing input written to"):
		return fmt.Sprintf("a failing input is kept under %s/testdata/fuzz/%s", o.dir, o.name)
	case strings.Contains(o.output, "context deadline exceeded"):
		return "stopped by the -fuzztime deadline with no failing input: go test's duration race (go.dev/issue/75804) or a seed corpus slower than the time; a count (5000x) has no deadline"
	default:
		return "no failing input was written: the output says why"
	}
}

func fuzz(t target, fuzztime string) outcome {
	cmd := exec.Command("go", "test", "-run=^$", "-fuzz=^"+t.name+"$", "-fuzztime="+fuzztime, ".")
	cmd.Dir = t.dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	o := outcome{target: t, ok: err == nil, elapsed: time.Since(start), output: string(out), execs: "-", interesting: "-"}
	// The fuzzer prints running totals; the last line that has them is the final count.
	if m := execsRE.FindAllStringSubmatch(o.output, -1); len(m) > 0 {
		o.execs = m[len(m)-1][1]
	}
	if m := interestingRE.FindAllStringSubmatch(o.output, -1); len(m) > 0 {
		o.interesting = m[len(m)-1][1]
	}
	return o
}

// copyCorpus copies the cached corpus entries that are not in dst yet and returns how
// many it copied. The entries are content-addressed, so a name present is the same input.
func copyCorpus(src, dst string) (int, error) {
	entries, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	copied := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		to := filepath.Join(dst, e.Name())
		if _, err := os.Stat(to); err == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return copied, err
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return copied, err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return copied, err
		}
		copied++
	}
	return copied, nil
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
