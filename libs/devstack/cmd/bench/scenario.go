package main

import (
	"context"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// A Table is a set of scenarios measured together, interleaved round by round,
// and printed as one table. Later issues register more tables (or more rows in
// an existing one) from their own file's init.
type Table struct {
	Name      string // what -only selects
	Title     string
	Scenarios []Scenario
	Baseline  string  // key of the row the ratio columns divide by
	Ratios    []Ratio // printed under the table
	// Notes, when set, adds lines under the ratios (for example the bars).
	Notes func(results map[string]*Summary) []string
}

// A Scenario is one row: a name, a setup that starts what it needs in env and
// returns the load to send and the process to charge.
type Scenario struct {
	Key   string // short id used by ratios, e.g. "b"
	Name  string // row label, e.g. "(b) bare ReverseProxy"
	Setup func(ctx context.Context, env *Env) (*Target, error)
}

// Target is what a set-up scenario measures.
type Target struct {
	Targeter vegeta.Targeter
	// Proc is the process (or processes) whose CPU is charged to the row; rows
	// that share a process share a *Proc, so its peak RSS is printed once.
	Proc *Proc
}

// Proc names the measured processes. PIDs is called before and after every round,
// so it may discover processes (nginx's workers) at run time.
type Proc struct {
	Label string
	PIDs  func() []int
}

// Ratio is "Num/Den" of requests/s and of CPU per request.
type Ratio struct{ Num, Den string }

// ErrSkip wraps a reason a scenario cannot run on this machine; the row says why
// and the rest of the table still runs.
type ErrSkip struct{ Reason string }

func (e ErrSkip) Error() string { return e.Reason }

var tables []*Table

// registerTable adds a table; call it from init.
func registerTable(t *Table) { tables = append(tables, t) }
