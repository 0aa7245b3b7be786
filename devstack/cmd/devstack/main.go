// Command devstack runs the local platform stack in the foreground: embedded
// FerretDB (behind the serialising proxy), NATS JetStream and redis-server,
// then every service binary from BIN_DIR, each prefixed in the output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/freeport"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// Usage is printed by -h.
const Usage = `devstack runs the local platform stack in the foreground (make run).

It starts embedded FerretDB (on a PostgreSQL child process, behind a serialising
wire-protocol proxy), NATS with JetStream and a redis-server child process, creates signing keys once
under $DATA_DIR/keys, then starts workspace-svc, embed-svc, dbtsync-svc, the
dbtsync worker and the gateway from $BIN_DIR, waits for each GET /readyz, and
writes $DATA_DIR/stack.json for the seeding CLI (platformctl seed). Ctrl-C
stops everything. A process that exits is restarted, as a cluster would, and the
console says so (after 1 s, 2 s, 4 s... at most 5 times within 10 minutes); one that
keeps exiting past that stops everything, and devstack exits 1.

Environment:
  DATA_DIR             data directory (default .data): mongo/ (mongo/postgres: the PostgreSQL
                       cluster), nats/, redis/, keys/, stack.json
  BIN_DIR              directory holding the service binaries (default bin)
  GATEWAY_ADDR         gateway listen address (default 127.0.0.1:8080)
  WORKSPACE_ADDR       workspace-svc listen address (default 127.0.0.1:8081)
  EMBED_ADDR           embed-svc listen address (default 127.0.0.1:8082)
  DBTSYNC_ADDR         dbtsync-svc listen address (default 127.0.0.1:8083)
  DBTSYNC_WORKER_ADDR  dbtsync worker (dbtsync-svc worker) HTTP address (default 127.0.0.1:8084)
  GATEWAY_INTERNAL_ADDR, WORKSPACE_INTERNAL_ADDR, EMBED_INTERNAL_ADDR,
  DBTSYNC_INTERNAL_ADDR, DBTSYNC_WORKER_INTERNAL_ADDR
                       each process's internal listener (/readyz, /metrics; its
                       INTERNAL_ADDR), default 127.0.0.1:9080 to :9084 in that
                       order; "random" = a free port. stack.json lists their
                       metrics URLs under "metrics".
  MONGODB_URI          use this MongoDB instead of starting embedded FerretDB
  NATS_URL             use this NATS instead of starting embedded nats-server
  REDIS_URL            use this Redis instead of starting redis-server
  LOG_LEVEL            passed to every service (default info); also devstack's own level
  DEVSTACK_MONGO_ADDR  embedded MongoDB (proxy) address (default 127.0.0.1:27018; "random" = free port)
  DEVSTACK_MONGO_ENGINE      what FerretDB stores in: postgresql (default; Debian's postgresql
                       package, run as the postgres account when devstack runs as root) or
                       sqlite (files in $DATA_DIR/mongo; every query scans its collection)
  DEVSTACK_MONGO_SERIALIZE   which commands the proxy runs one at a time: all (default),
                       collections (writes one at a time per collection, reads beside
                       them), interleave (collections, with writes of many documents run
                       one document at a time, as MongoDB does) or writes (every write
                       one at a time, reads beside them); for comparison (docs/local-stack.md, "The
                       embedded MongoDB is atomic")
  DEVSTACK_MONGO_GIN   0: no GIN indexes beside FerretDB's own (postgresql; for comparison only)
  DEVSTACK_NATS_ADDR   embedded NATS address (default 127.0.0.1:4223; "random" = free port)
  DEVSTACK_REDIS_ADDR  redis-server address (default 127.0.0.1:6380; "random" = free port)
  DEVSTACK_OBS         1: also run Debian's prometheus (make run OBS=1), scraping every
                       process, with the rules and alerts of deploy/prometheus/rules;
                       data and generated config in $DATA_DIR/prometheus
  DEVSTACK_PROMETHEUS_ADDR   its address (default 127.0.0.1:9090; "random" = free port)
  DEVSTACK_PROMETHEUS_RULES  the rules directory (default deploy/prometheus/rules)

Every service gets the parent environment plus MONGODB_URI, NATS_URL,
REDIS_URL, IDENTITY_SIGNING_KEY, LOG_LEVEL, OTEL_SERVICE_NAME and its own
variables (HTTP_ADDR, DBT_CREDENTIALS_KEY, EMBED_KEY_ENCRYPTION_KEY, the gateway's upstream URLs and
AUTH_JWT_* settings). redis-server and PostgreSQL must be installed
(apt-get install -y redis-server postgresql; make run does it when root).
`

// config is read from the environment once, in main.
type config struct {
	DataDir string
	BinDir  string

	GatewayAddr       string
	WorkspaceAddr     string
	EmbedAddr         string
	DBTSyncAddr       string
	DBTSyncWorkerAddr string
	// InternalAddrs are the processes' internal listeners (INTERNAL_ADDR), by name.
	InternalAddrs map[string]string

	// External servers; empty means start one embedded.
	MongoURI string
	NATSURL  string
	RedisURL string

	// Embedded servers' addresses; "" means a free port.
	MongoAddr string
	// MongoEngine and MongoSerialize configure the embedded MongoDB.
	MongoEngine    devstack.Engine
	MongoSerialize wireproxy.Mode
	MongoNoGIN     bool
	NATSAddr       string
	RedisAddr      string

	LogLevel string

	// Obs runs prometheus too (DEVSTACK_OBS), on PrometheusAddr with the rules of
	// PrometheusRules (absolute).
	Obs             bool
	PrometheusAddr  string
	PrometheusRules string
}

func configFromEnv() (config, error) {
	get := func(key, def string) string {
		if v := os.Getenv(key); v != "" {
			return v
		}
		return def
	}
	embeddedAddr := func(key, def string) string {
		v := get(key, def)
		if v == "random" {
			return ""
		}
		return v
	}
	cfg := config{
		DataDir:           get("DATA_DIR", ".data"),
		BinDir:            get("BIN_DIR", "bin"),
		GatewayAddr:       get("GATEWAY_ADDR", "127.0.0.1:8080"),
		WorkspaceAddr:     get("WORKSPACE_ADDR", "127.0.0.1:8081"),
		EmbedAddr:         get("EMBED_ADDR", "127.0.0.1:8082"),
		DBTSyncAddr:       get("DBTSYNC_ADDR", "127.0.0.1:8083"),
		DBTSyncWorkerAddr: get("DBTSYNC_WORKER_ADDR", "127.0.0.1:8084"),
		MongoURI:          os.Getenv("MONGODB_URI"),
		NATSURL:           os.Getenv("NATS_URL"),
		RedisURL:          os.Getenv("REDIS_URL"),
		MongoAddr:         embeddedAddr("DEVSTACK_MONGO_ADDR", "127.0.0.1:27018"),
		NATSAddr:          embeddedAddr("DEVSTACK_NATS_ADDR", "127.0.0.1:4223"),
		RedisAddr:         embeddedAddr("DEVSTACK_REDIS_ADDR", "127.0.0.1:6380"),
		LogLevel:          get("LOG_LEVEL", "info"),
		InternalAddrs:     map[string]string{},
		PrometheusAddr:    get("DEVSTACK_PROMETHEUS_ADDR", "127.0.0.1:9090"),
		PrometheusRules:   get("DEVSTACK_PROMETHEUS_RULES", filepath.Join("deploy", "prometheus", "rules")),
	}
	var err error
	if cfg.MongoEngine, err = devstack.ParseEngine(os.Getenv("DEVSTACK_MONGO_ENGINE")); err != nil {
		return cfg, fmt.Errorf("DEVSTACK_MONGO_ENGINE: %w", err)
	}
	if cfg.MongoSerialize, err = wireproxy.ParseMode(os.Getenv("DEVSTACK_MONGO_SERIALIZE")); err != nil {
		return cfg, fmt.Errorf("DEVSTACK_MONGO_SERIALIZE: %w", err)
	}
	switch v := os.Getenv("DEVSTACK_MONGO_GIN"); v {
	case "", "1":
	case "0":
		cfg.MongoNoGIN = true
	default:
		return cfg, fmt.Errorf("DEVSTACK_MONGO_GIN=%q: want 1 or 0", v)
	}
	switch v := os.Getenv("DEVSTACK_OBS"); v {
	case "", "0", "false":
	case "1", "true":
		cfg.Obs = true
	default:
		return cfg, fmt.Errorf("DEVSTACK_OBS=%q: want 1 or 0", v)
	}
	// A "random" internal address is a free port that is none of the configured ones
	// (nothing binds those yet, so the kernel could offer one of them again).
	taken := map[string]bool{cfg.GatewayAddr: true, cfg.WorkspaceAddr: true, cfg.EmbedAddr: true, cfg.DBTSyncAddr: true, cfg.DBTSyncWorkerAddr: true, cfg.PrometheusAddr: true}
	for i, name := range []string{"gateway", "workspace-svc", "embed-svc", "dbtsync-svc", "dbtsync-worker"} {
		key := strings.ToUpper(strings.ReplaceAll(strings.TrimSuffix(name, "-svc"), "-", "_")) + "_INTERNAL_ADDR"
		addr, err := randomAddr(key, get(key, fmt.Sprintf("127.0.0.1:%d", 9080+i)), taken)
		if err != nil {
			return cfg, err
		}
		cfg.InternalAddrs[name] = addr
	}
	if cfg.PrometheusAddr, err = randomAddr("DEVSTACK_PROMETHEUS_ADDR", cfg.PrometheusAddr, taken); err != nil {
		return cfg, err
	}
	// Absolute paths: they are handed to children and written to stack.json.
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return cfg, err
	}
	if cfg.BinDir, err = filepath.Abs(cfg.BinDir); err != nil {
		return cfg, err
	}
	if cfg.PrometheusRules, err = filepath.Abs(cfg.PrometheusRules); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// randomAddr is addr, or for "random" a free port that is none of taken (see package
// freeport); the result joins taken.
func randomAddr(key, addr string, taken map[string]bool) (string, error) {
	if addr == "random" {
		for attempt := 0; addr == "random" || taken[addr]; attempt++ {
			if attempt == 100 {
				return "", fmt.Errorf("%s: no free port", key)
			}
			a, err := freeport.Addr()
			if err != nil {
				return "", fmt.Errorf("%s: %w", key, err)
			}
			addr = a
		}
	}
	taken[addr] = true
	return addr, nil
}

func main() {
	flag.Usage = func() { fmt.Fprint(flag.CommandLine.Output(), Usage) }
	flag.Parse()

	out := devstack.NewConsole(os.Stdout)
	cfg, err := configFromEnv()
	if err != nil {
		out.Printf("devstack", "config: %v", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	logger := slog.New(slog.NewTextHandler(out.Writer("devstack"), &slog.HandlerOptions{Level: parseLevel(cfg.LogLevel)}))
	if err := run(ctx, cfg, out, logger); err != nil {
		out.Printf("devstack", "error: %v", err)
		os.Exit(1)
	}
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return slog.LevelInfo
	}
	return l
}

// errChildDied is returned by run after shutting down because a child exited.
var errChildDied = errors.New("a process exited unexpectedly")
