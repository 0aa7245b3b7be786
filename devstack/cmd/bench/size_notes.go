package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgStatements sums pg_stat_statements over the database: calls, rows and shared
// buffers hit or read. Nothing ("" url: not PostgreSQL) is zeros.
func pgStatements(ctx context.Context, url string) ([3]float64, error) {
	var out [3]float64
	if url == "" {
		return out, nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return out, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(rows), 0)::float8,
		coalesce(sum(shared_blks_hit + shared_blks_read), 0)::float8
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&out[0], &out[1], &out[2])
	return out, err
}

// sizeBar is the size table's bar: a request costs at most this much more at 50,000 items.
const sizeBar = 1.5

// sizeNotes prints, per candidate and request, each stack's counts per request and its
// p50 and CPU over the first stack's, judged against the bar; then the proof (every
// create at 50,000 items of its own deployment within the bar of one at 100), the fills
// and the items each measured deployment held at the end.
func sizeNotes(cands []engineCandidate, variants []sizeVariant) func(res map[string]*Summary) []string {
	return func(res map[string]*Summary) []string {
		base := variants[0]
		lines := []string{
			fmt.Sprintf("per request: p50 and cpu over %s's (bar %.1fx); MongoDB commands the services sent; what MongoDB would read under the declared", base.Label, sizeBar),
			"indexes (the proxy's planner model): statements judged, documents their index bounds admit, collection scans, the heaviest kind; PostgreSQL rows",
			fmt.Sprintf("  %-16s %-10s %6s %6s %-6s %6s %6s %9s %6s %8s  %s", "request", "stack", "p50", "cpu", "", "cmds", "stmts", "examined", "scans", "pg rows", "heaviest (documents per request)"),
		}
		sizeCounts.Lock()
		defer sizeCounts.Unlock()
		var proof []string
		proofOK := true
		for _, c := range cands {
			for _, op := range sizeOps {
				if len(cands) > 1 && !op.core {
					continue
				}
				first := true
				for _, v := range variants {
					if !v.AllOps && !op.core {
						continue
					}
					label := ""
					if first {
						label = op.label
						if len(cands) > 1 {
							label = c.Key + ": " + op.label
						}
					}
					first = false
					key := sizeKey(c, v, op.key)
					p50, cpu, verdict := "-", "-", ""
					s, l := res[sizeKey(c, base, op.key)], res[key]
					ok := s != nil && l != nil && s.Err == nil && l.Err == nil && s.P50 > 0 && s.CPUPerReq > 0
					if v.Key != base.Key {
						if ok {
							rp, rc := float64(l.P50)/float64(s.P50), l.CPUPerReq/s.CPUPerReq
							p50, cpu, verdict = fmt.Sprintf("%.2fx", rp), fmt.Sprintf("%.2fx", rc), "PASS"
							if rp > sizeBar || rc > sizeBar {
								verdict = "FAIL"
							}
							if v.Key == "own" && strings.HasPrefix(op.key, "mk") {
								proof = append(proof, fmt.Sprintf("%s %.2fx", op.label, rp))
								proofOK = proofOK && rp <= sizeBar
							}
						} else {
							p50, cpu, verdict = "n/a", "n/a", ""
							if v.Key == "own" && strings.HasPrefix(op.key, "mk") {
								proof = append(proof, op.label+" n/a")
								proofOK = false
							}
						}
					}
					ec, counted := sizeCounts.byKey[key]
					cmds, stmts, examined, scans, rows, heaviest := "-", "-", "-", "-", "-", ""
					if counted {
						cmds = fmt.Sprintf("%.1f", ec.commands)
						if ec.examined {
							stmts, examined, scans, heaviest = fmt.Sprintf("%.1f", ec.statements), fmt.Sprintf("%.0f", ec.documents), fmt.Sprintf("%.2f", ec.scans), ec.heaviest
						}
						if ec.postgres {
							rows = fmt.Sprintf("%.0f", ec.rows)
						}
					}
					lines = append(lines, fmt.Sprintf("  %-16s %-10s %6s %6s %-6s %6s %6s %9s %6s %8s  %s", label, v.Label, p50, cpu, verdict, cmds, stmts, examined, scans, rows, heaviest))
				}
			}
		}
		if len(proof) > 0 {
			verdict := "PASS"
			if !proofOK {
				verdict = "FAIL"
			}
			lines = append(lines, fmt.Sprintf("proof: a create at 50,000 items of its own deployment within %.1fx of one at 100 (p50): %s [%s]", sizeBar, strings.Join(proof, ", "), verdict))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range sizeCounts.stacks {
			held := "?"
			if n, err := s.itemsStored(ctx); err == nil {
				held = fmt.Sprint(n)
			}
			lines = append(lines, fmt.Sprintf("stack %s %s: filled %s; the measured deployment held %s items at the end",
				s.candidate.Key, s.variant.Label, strings.Join(s.fills, ", "), held))
		}
		return lines
	}
}

var sizeLegend = []string{
	"legend: each stack is bin/devstack with its own data. @100: acme's first deployment (the measured one) holds 100 items; @50k own: it",
	"        holds 50,000; @50k other: it holds 100 and initech's deployment 50,000. Items are written in bulk by devstack.FillWorkspace",
	"        (a fifth folders, 10 wide and 4 deep, the rest workbooks) before the working set, created through the gateway: folder A",
	"        with 50 workbooks (GET, listed: page 1 and page 3 of 20), two sets of 10 (4 folders, 3 workbooks, 3 reports) bulk-moved",
	"        between folders C and D, a folder with a subfolder moved between them, a folder, a workbook and a report renamed, the",
	"        folder's permissions set to none, the workbook favorited and unfavorited, a workbook with a draft published and unpublished.",
	"        Creates make folders at the root and in a root folder, workbooks and reports in a root folder; deletes delete items the",
	fmt.Sprintf("        creates made. Creates and deletes send at most %d requests a run (the deployment grows by hundreds, printed at", sizeRunCap),
	"        the end). Workers: GET and lists 4, writes 1. cpu_us/req is every process of the stack, PostgreSQL's included. The",
	fmt.Sprintf("        counts under the table are per request, over %d serial requests at set-up: cmds from the services' command", countedRequests),
	"        monitors; stmts, examined and scans from the wire proxy's examination (wireproxy's ExamineCommand, on only for those",
	"        requests): for each query statement, the index MongoDB's planner would choose under the declared indexes (devstack/",
	"        mongoplan) and the documents its bounds admit (the statement's predicates on the index's bounded leading fields,",
	"        counted upstream; a scan counts the whole collection), an upper bound on what MongoDB examines. FerretDB's GIN indexes",
	"        serve only each index's leading field, so a filter that skips it is slow here too. Counts do not depend on the",
	"        machine's load; timings do (compare ratios within the run).",
}
