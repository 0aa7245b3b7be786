package main

import (
	"strings"
	"testing"
	"time"
)

// TestSizeNotesJudgeEveryCreateAtItsOwnSize: the proof line passes when every create's
// p50 at 50,000 items of its own deployment is within the bar of its p50 at 100, and
// fails when one is not; each stack's counts print beside the request.
func TestSizeNotesJudgeEveryCreateAtItsOwnSize(t *testing.T) {
	c, base, own := engineCandidates[0], sizeVariants[0], sizeVariants[1]
	notes := func(slow time.Duration) []string {
		res := map[string]*Summary{}
		for _, op := range sizeOps {
			res[sizeKey(c, base, op.key)] = &Summary{P50: 10 * time.Millisecond, CPUPerReq: 100}
			res[sizeKey(c, own, op.key)] = &Summary{P50: 12 * time.Millisecond, CPUPerReq: 110}
		}
		res[sizeKey(c, own, "mkwb")].P50 = slow
		sizeCounts.Lock()
		sizeCounts.byKey[sizeKey(c, own, "mkwb")] = engineCounts{commands: 7, examined: true, statements: 5, documents: 6, heaviest: "find workspace.items 2"}
		sizeCounts.Unlock()
		return sizeNotes(engineCandidates[:1], sizeVariants[:2])(res)
	}
	proof := func(lines []string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "proof:") {
				return l
			}
		}
		t.Fatalf("no proof line in:\n%s", strings.Join(lines, "\n"))
		return ""
	}
	if p := proof(notes(14 * time.Millisecond)); !strings.HasSuffix(p, "[PASS]") || !strings.Contains(p, "create workbook 1.40x") {
		t.Errorf("creates within 1.5x: %s", p)
	}
	lines := notes(16 * time.Millisecond)
	if p := proof(lines); !strings.HasSuffix(p, "[FAIL]") {
		t.Errorf("a create at 1.6x: %s", p)
	}
	var counted bool
	for _, l := range lines {
		counted = counted || (strings.Contains(l, "@50k own") && strings.Contains(l, "7.0") && strings.Contains(l, "find workspace.items 2"))
	}
	if !counted {
		t.Errorf("the counts of create workbook @50k own are not printed:\n%s", strings.Join(lines, "\n"))
	}
}
