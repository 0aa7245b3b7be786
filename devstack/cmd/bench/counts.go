package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The issues' budgets count round trips, not time (FerretDB's timings say
// nothing about MongoDB). MongoDB commands and the documents they return are
// counted by every process's command monitor (mongodb_client_* on its internal
// /metrics), Redis commands by the server (INFO stats). The counts below are taken
// around serial requests while nothing else runs, so they include only the
// platform's background work of those few seconds (the gateway's revocation poll).

func redisCommands(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO stats has no total_commands_processed")
}

// countBulkMoveCommands sends 10 serial bulk moves of one set of 100 items
// (alternating two folders) and prints the database commands per item.
func countBulkMoveCommands(ctx context.Context, p platformInfo, c *apiClient, bearer string, dep int64, items []byte, a, b int64) {
	const moves = 10
	cmd0, doc0, err := platformMongoCounts(ctx, p)
	if err != nil {
		addCountLine("bulk move: database commands per item: not measured (%v)", err)
		return
	}
	for i := range moves {
		dest := b
		if i%2 == 1 {
			dest = a
		}
		body := fmt.Appendf(nil, `{"items":%s,"folderId":%d}`, items, dest)
		if err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/deployments/%d/workspace/bulk-move", dep), "Bearer "+bearer, rawJSON(body), http.StatusOK, nil); err != nil {
			addCountLine("bulk move: database commands per item: not measured (%v)", err)
			return
		}
	}
	cmd1, doc1, err := platformMongoCounts(ctx, p)
	if err != nil {
		addCountLine("bulk move: database commands per item: not measured (%v)", err)
		return
	}
	// The gateway's revocation poll adds a few commands a second, counted too.
	addCountLine("bulk move of 100 mixed: %.2f MongoDB commands and %.2f documents read per item (%.0f and %.0f for %d serial moves of 100, the processes' command monitors; budget of the bulk-move tests: 2N+10 commands per request)",
		(cmd1-cmd0)/(moves*100), (doc1-doc0)/(moves*100), cmd1-cmd0, doc1-doc0, moves)
}

// countWorkspaceReads prints the MongoDB commands and documents read of the workspace's
// everyday requests: a folder GET, a listing page of 20 (of a folder holding 100 items
// after countBulkMoveCommands), and a single move of a workbook between two folders.
func countWorkspaceReads(ctx context.Context, p platformInfo, c *apiClient, bearer string, dep, a, b int64) {
	base := fmt.Sprintf("/api/v1/deployments/%d", dep)
	get := func(path string) func(ctx context.Context, _ int) error {
		return func(ctx context.Context, _ int) error {
			return c.do(ctx, http.MethodGet, base+path, "Bearer "+bearer, nil, http.StatusOK, nil)
		}
	}
	countPerCall(ctx, p, "workspace folder GET", 20, nil, get(fmt.Sprintf("/folders/%d", a)))
	countPerCall(ctx, p, "workspace listing (a page of 20 of a folder of 100 items)", 20, nil, get(fmt.Sprintf("/workspace?folderId=%d&first=20", a)))
	wb, err := c.createItem(ctx, bearer, dep, "workbooks", "bench count move", a)
	if err != nil {
		addCountLine("workspace single move: not measured (%v)", err)
		return
	}
	countPerCall(ctx, p, "workspace single move (a workbook)", 20, nil, func(ctx context.Context, i int) error {
		dest := b
		if i%2 == 1 {
			dest = a
		}
		body := fmt.Appendf(nil, `{"type":"WORKBOOK","id":%d,"folderId":%d}`, wb, dest)
		return c.do(ctx, http.MethodPost, base+"/workspace/move", "Bearer "+bearer, rawJSON(body), http.StatusOK, nil)
	})
}

// countMintRoundTrips mints 50 sessions serially for known external users and
// prints the MongoDB and Redis commands per mint.
func countMintRoundTrips(ctx context.Context, p platformInfo, c *apiClient, apiKey string, dep int64) {
	const mints = 50
	opt, err := redis.ParseURL(p.Redis)
	if err != nil {
		addCountLine("generate-session: round trips per mint: see test (%v)", err)
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	// First lap: the users exist afterwards, so the counted mints are for known users.
	for i := range mints {
		if _, err := c.mint(ctx, apiKey, dep, fmt.Sprintf("bench-count-%d", i)); err != nil {
			addCountLine("generate-session: round trips per mint: not measured (%v)", err)
			return
		}
	}
	m0, d0, errM := platformMongoCounts(ctx, p)
	r0, errR := redisCommands(ctx, rdb)
	for i := range mints {
		if _, err := c.mint(ctx, apiKey, dep, fmt.Sprintf("bench-count-%d", i)); err != nil {
			addCountLine("generate-session: round trips per mint: not measured (%v)", err)
			return
		}
	}
	m1, d1, errM1 := platformMongoCounts(ctx, p)
	r1, errR1 := redisCommands(ctx, rdb)
	mongoPart, redisPart := "MongoDB: see test", "Redis: see test"
	if errM == nil && errM1 == nil {
		mongoPart = fmt.Sprintf("%.2f MongoDB commands (%.2f documents read)", (m1-m0)/mints, (d1-d0)/mints)
	}
	if errR == nil && errR1 == nil {
		redisPart = fmt.Sprintf("%.2f Redis commands", float64(r1-r0-1)/mints)
	}
	addCountLine("generate-session (known external user, no definitions): %s and %s per mint over %d serial mints, whole platform (budget: 4 and 2)",
		mongoPart, redisPart, mints)
}

// rawJSON is a request body that is already JSON.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// platformMongoCounts sums mongodb_client_commands_total and
// mongodb_client_documents_returned_total over every process of the platform (their
// command monitors): what the processes asked of the database and what it returned,
// whatever the database's own counters say (FerretDB has none).
func platformMongoCounts(ctx context.Context, p platformInfo) (commands, documents float64, err error) {
	c := &http.Client{Timeout: 5 * time.Second}
	for _, url := range p.Metrics {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, 0, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, 0, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		if err != nil {
			return 0, 0, err
		}
		for line := range strings.SplitSeq(string(body), "\n") {
			var dst *float64
			switch {
			case strings.HasPrefix(line, "mongodb_client_commands_total{"):
				dst = &commands
			case strings.HasPrefix(line, "mongodb_client_documents_returned_total{"):
				dst = &documents
			default:
				continue
			}
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				*dst += v
			}
		}
	}
	return commands, documents, nil
}
