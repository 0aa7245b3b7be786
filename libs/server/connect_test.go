package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/redisx"
	"github.com/analyticsco/platform/libs/server"
)

// closedAddr is an address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// A process whose MongoDB, NATS and Redis are not up yet still starts (NATS keeps
// retrying); /readyz names each connection unavailable and /metrics has each one's metrics.
func TestConnectionsNotUpAreNotReadyAndHaveMetrics(t *testing.T) {
	reg := obs.NewRegistry()
	ctx := context.Background()
	mc, mongoReady, err := server.ConnectMongo(ctx, "mongodb://"+closedAddr(t)+"/?serverSelectionTimeoutMS=500", reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Disconnect(ctx) })
	nc, natsReady, err := server.ConnectNATS("nats://"+closedAddr(t), "test-svc", reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	rdb, redisReady, err := server.OpenRedis(redisx.RedisConfig{Mode: "single", URL: "redis://" + closedAddr(t) + "/0"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })

	srv := httptest.NewServer(server.InternalHandler(reg, []server.Check{mongoReady, natsReady, redisReady}))
	t.Cleanup(srv.Close)
	res, err := srv.Client().Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	want := map[string]string{"mongodb": "unavailable", "nats": "unavailable", "redis": "unavailable"}
	if res.StatusCode != 503 || len(body.Checks) != 3 || body.Checks["mongodb"] != want["mongodb"] ||
		body.Checks["nats"] != want["nats"] || body.Checks["redis"] != want["redis"] {
		t.Fatalf("/readyz = %d %+v, want 503 %v", res.StatusCode, body, want)
	}

	res, err = srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	for _, m := range []string{"mongodb_client_heartbeat_failures_total", "nats_client_connected 0",
		`nats_client_errors_total{kind="disconnect"}`, "redis_client_commands_total"} {
		if !strings.Contains(string(metrics), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

func TestOpenRedisRefusesAnUnknownMode(t *testing.T) {
	_, _, err := server.OpenRedis(redisx.RedisConfig{Mode: "galaxy", URL: "redis://127.0.0.1:6379/0"}, obs.NewRegistry())
	if err == nil || !strings.Contains(err.Error(), "REDIS_MODE") {
		t.Fatalf("err = %v, want one naming REDIS_MODE", err)
	}
}

// TestConnectNATSOnceRefusesAServerThatIsNotUp: a one-shot command's connect fails when
// NATS does not answer (ConnectNATS would hand back a connection that keeps retrying),
// and its metrics are registered like a process's.
func TestConnectNATSOnceRefusesAServerThatIsNotUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	nc, err := server.ConnectNATSOnce("nats://"+closedAddr(t), "test-cli", time.Second, reg)
	if err == nil {
		nc.Close()
		t.Fatal("connected to a NATS that is not up")
	}
	if !strings.Contains(err.Error(), "NATS_URL") {
		t.Errorf("err = %v, want one naming NATS_URL", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	if !slices.Contains(names, "nats_client_errors_total") {
		t.Errorf("the command's registry has %v, want nats_client_errors_total among them", names)
	}
}

// A process's connection takes its NATS user's own inbox prefix (natsx.InboxPrefix) from
// NATS_URL, a one-shot command's too, so its replies arrive where no other user may
// subscribe.
func TestConnectNATSTakesTheUsersInboxPrefix(t *testing.T) {
	nc, _, err := server.ConnectNATS("nats://dbtsync-worker:pw@"+closedAddr(t), "dbtsync-worker", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if got := nc.Opts.InboxPrefix; got != natsx.InboxPrefix("dbtsync-worker") {
		t.Errorf("inbox prefix %q, want %q", got, natsx.InboxPrefix("dbtsync-worker"))
	}
	if !strings.HasPrefix(nc.NewInbox(), natsx.InboxPrefix("dbtsync-worker")+".") {
		t.Errorf("NewInbox %q is not under the user's prefix", nc.NewInbox())
	}
	if _, _, err := server.ConnectNATS("nats://a*b:pw@"+closedAddr(t), "x", prometheus.NewRegistry()); err == nil || !strings.Contains(err.Error(), "NATS_URL") {
		t.Errorf("a user name no subject can start with: %v, want an error naming NATS_URL", err)
	}
}
