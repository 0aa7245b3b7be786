package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	mongooptions "go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The issues' budgets count round trips, not time (FerretDB's timings say
// nothing about MongoDB). Both servers count the commands they execute, for
// every client: FerretDB in serverStatus metrics.commands, Redis in INFO stats.
// The counts below are taken around serial requests while nothing else runs,
// so they include only the platform's background work of those few seconds
// (the gateway's revocation poll: a few commands a second).

// mongoCommands is the number of commands FerretDB has executed, or an error
// when its serverStatus does not say.
func mongoCommands(ctx context.Context, client *mongo.Client) (int64, error) {
	var st bson.M
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st); err != nil {
		return 0, err
	}
	metrics, _ := st["metrics"].(bson.M)
	cmds, _ := metrics["commands"].(bson.M)
	if len(cmds) == 0 {
		return 0, fmt.Errorf("serverStatus has no metrics.commands")
	}
	var total int64
	for _, v := range cmds {
		m, _ := v.(bson.M)
		switch n := m["total"].(type) {
		case int64:
			total += n
		case int32:
			total += int64(n)
		}
	}
	return total, nil
}

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

func connectMongo(ctx context.Context, uri string) (*mongo.Client, error) {
	return mongo.Connect(mongooptions.Client().ApplyURI(uri).SetTimeout(10 * time.Second))
}

// countBulkMoveCommands sends 10 serial bulk moves of one set of 100 items
// (alternating two folders) and prints the database commands per item.
func countBulkMoveCommands(ctx context.Context, p platformInfo, c *apiClient, bearer string, dep int64, items []byte, a, b int64) {
	const moves = 10
	client, err := connectMongo(ctx, p.Mongo)
	if err != nil {
		addCountLine("bulk move: database commands per item: see test (%v)", err)
		return
	}
	defer client.Disconnect(context.Background())
	before, err := mongoCommands(ctx, client)
	if err != nil {
		addCountLine("bulk move: database commands per item: see test (TestBulkMoveRoundTrips in workspace-svc; %v)", err)
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
	after, err := mongoCommands(ctx, client)
	if err != nil {
		addCountLine("bulk move: database commands per item: not measured (%v)", err)
		return
	}
	// The two serverStatus calls are commands too.
	n := after - before - 1
	addCountLine("bulk move of 100 mixed: %.2f database commands per item (%d commands for %d serial moves of 100, FerretDB serverStatus; budget of issue 3's test: 2N+10 per request)",
		float64(n)/(moves*100), n, moves)
}

// countMintRoundTrips mints 50 sessions serially for known external users and
// prints the MongoDB and Redis commands per mint.
func countMintRoundTrips(ctx context.Context, p platformInfo, c *apiClient, apiKey string, dep int64) {
	const mints = 50
	client, err := connectMongo(ctx, p.Mongo)
	if err != nil {
		addCountLine("generate-session: round trips per mint: see test (%v)", err)
		return
	}
	defer client.Disconnect(context.Background())
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
	m0, errM := mongoCommands(ctx, client)
	r0, errR := redisCommands(ctx, rdb)
	for i := range mints {
		if _, err := c.mint(ctx, apiKey, dep, fmt.Sprintf("bench-count-%d", i)); err != nil {
			addCountLine("generate-session: round trips per mint: not measured (%v)", err)
			return
		}
	}
	m1, errM1 := mongoCommands(ctx, client)
	r1, errR1 := redisCommands(ctx, rdb)
	mongoPart, redisPart := "MongoDB: see test", "Redis: see test"
	if errM == nil && errM1 == nil {
		mongoPart = fmt.Sprintf("%.2f MongoDB commands", float64(m1-m0-1)/mints)
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
