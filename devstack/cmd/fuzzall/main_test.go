package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestFuzztimeIsADurationOrACount(t *testing.T) {
	for s, want := range map[string]bool{
		"30s": true, "2m": true, "5000x": true, "1x": true,
		"0s": false, "-1s": false, "0x": false, "x": false, "5000": false, "5k": false, "": false, "10xs": false,
	} {
		if got := validFuzztime(s); got != want {
			t.Errorf("validFuzztime(%q) = %v, want %v", s, got, want)
		}
	}
}

// A failed run is reported as what its output shows, never as a kept crash it did not write.
func TestAFailedRunSaysWhetherItWroteAFailingInput(t *testing.T) {
	base := outcome{target: target{name: "FuzzX", dir: "/src/pkg"}}
	crash := base
	crash.output = "--- FAIL: FuzzX (0.31s)\n    panic: boom\n    Failing input written to testdata/fuzz/FuzzX/0123abcd\n"
	if got := crash.why(); !strings.Contains(got, "/src/pkg/testdata/fuzz/FuzzX") {
		t.Errorf("a written crash is reported as %q", got)
	}
	deadline := base
	deadline.output = "fuzz: elapsed: 2s, gathering baseline coverage: 140/171 completed\n--- FAIL: FuzzX (2.03s)\n    context deadline exceeded\nFAIL\n"
	if got := deadline.why(); !strings.Contains(got, "no failing input") || !strings.Contains(got, "75804") {
		t.Errorf("a deadline stop is reported as %q", got)
	}
	build := base
	build.output = "# pkg\n./x.go:3:1: syntax error\nFAIL\tpkg [build failed]\n"
	if got := build.why(); strings.Contains(got, "kept under") {
		t.Errorf("a build failure is reported as %q", got)
	}
}

// CI's pass is bounded by a count: a duration fails a target whose seed corpus is slower
// than the time, or that the deadline catches mid-call (see the package comment).
func TestCIFuzzesForACountNotADuration(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^fuzz-ci:\n\t.*fuzzall -fuzztime[ =](\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no fuzz-ci recipe running fuzzall -fuzztime in the Makefile")
	}
	if !countRE.Match(m[1]) {
		t.Errorf("make fuzz-ci fuzzes for %s: want a number of executions (Nx)", m[1])
	}
}
