package jetstream

import (
	"fmt"
	"testing"
	"time"
)

// A write id stays in the record for the retention however many writes follow it (a
// writer waiting out a leader change while others write must find its own), the last
// keptOps stay whatever their age, and no record holds more than maxOps.
func TestAJobRecordKeepsItsWriteIdsForTheirRetention(t *testing.T) {
	const retention = time.Minute
	t0 := time.UnixMilli(1_800_000_000_000)
	var r jobRecord
	for i := range 200 { // 200 writes in 20 s: 10 a second
		r = r.withOp(r.Ops, fmt.Sprintf("op%d", i), t0.Add(time.Duration(i)*100*time.Millisecond), retention)
	}
	if !r.hasOp("op0") || !r.hasOp("op199") || len(r.Ops) != 200 {
		t.Fatalf("after 200 writes in 20 s: %d ids kept, op0 %v; want all 200", len(r.Ops), r.hasOp("op0"))
	}
	if r.hasOp("op2000") || r.hasOp("op") {
		t.Fatal("hasOp matched an id that was never written")
	}

	// Two minutes later, one more write: only the last keptOps remain.
	r = r.withOp(r.Ops, "late", t0.Add(2*time.Minute), retention)
	if len(r.Ops) != keptOps || !r.hasOp("late") || !r.hasOp("op185") || r.hasOp("op184") {
		t.Fatalf("after a pause past the retention: %d ids (op185 %v, op184 %v); want the last %d", len(r.Ops), r.hasOp("op185"), r.hasOp("op184"), keptOps)
	}

	// A flood within the retention is capped.
	for i := range 2 * maxOps {
		r = r.withOp(r.Ops, fmt.Sprintf("flood%d", i), t0.Add(2*time.Minute+time.Duration(i)*time.Millisecond), retention)
	}
	if len(r.Ops) != maxOps || !r.hasOp(fmt.Sprintf("flood%d", 2*maxOps-1)) || r.hasOp("flood0") {
		t.Fatalf("after a flood: %d ids; want the newest %d", len(r.Ops), maxOps)
	}
}

// Ids written before they carried their time are matched and kept among the last
// keptOps.
func TestAJobRecordReadsWriteIdsWithoutATime(t *testing.T) {
	r := jobRecord{Ops: []string{"0123456789abcdef", "fedcba9876543210"}}
	if !r.hasOp("0123456789abcdef") || r.hasOp("0123") {
		t.Fatal("an id without a time is not matched exactly")
	}
	r = r.withOp(r.Ops, "next", time.Now(), time.Minute)
	if len(r.Ops) != 3 || !r.hasOp("0123456789abcdef") {
		t.Fatalf("old ids among the last %d: %v", keptOps, r.Ops)
	}
}
