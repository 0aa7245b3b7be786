package main

import (
	"context"
	"time"

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
	// Notes, when set, adds lines under the ratios (for example the bars a table is
	// judged against).
	Notes func(results map[string]*Summary) []string
	// Legend, when set, replaces the gateway table's legend lines.
	Legend []string
	// OptIn tables run only when -only names them.
	OptIn bool
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
	// RSS, when set, lists the processes whose peak RSS is printed under the table
	// instead of Proc (Proc may sum several processes; RSS names each).
	RSS []*Proc
	// Workers, when above zero, replaces -workers for this row: operations that
	// contend on one record by design are measured at a concurrency they are
	// meant for.
	Workers int
	// Prepare, when set, runs before every run of the row (warm-up and rounds),
	// untimed, with the run's length: it creates what the row's requests consume
	// (session ids to exchange or revoke).
	Prepare func(ctx context.Context, d time.Duration) error
	// Check, when set, judges a response that has a success status (a bulk move
	// answers 200 even when items fail); an error makes it a failed request.
	Check func(body []byte) error
	// Measure, when set, replaces the vegeta run: one measurement per round of
	// something that is not an HTTP request (a conversion by a child process).
	Measure func(ctx context.Context) (roundResult, error)
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
