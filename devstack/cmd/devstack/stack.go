package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
)

// stopTimeout is how long children get between SIGTERM and SIGKILL.
const stopTimeout = 20 * time.Second

// layout is make run's process table: one of each process, on the configured addresses,
// with the parent's environment first (later entries win in os/exec, so the table
// overrides it).
func layout(cfg config, k platform.Keys, b *backing, mongoURI, natsURL, redisURL string) platform.Layout {
	addrs := map[string]string{"gateway": cfg.GatewayAddr, "workspace-svc": cfg.WorkspaceAddr, "embed-svc": cfg.EmbedAddr,
		"dbtsync-svc": cfg.DBTSyncAddr, "dbtsync-worker": cfg.DBTSyncWorkerAddr}
	l := platform.Layout{
		MongoURI: mongoURI, Redis: []string{"REDIS_URL=" + redisURL}, Keys: k,
		NATSURL:      func(string) string { return natsURL },
		Addr:         func(name string) string { return addrs[name] },
		InternalAddr: func(name string) string { return cfg.InternalAddrs[name] },
		Env:          append(os.Environ(), "LOG_LEVEL="+cfg.LogLevel),
	}
	if b.nats != nil {
		// Each process connects to the embedded NATS as its own user, with only its
		// subjects (devstack.NATSUsers); stack.json's URL is platformctl's.
		l.NATSURL = b.nats.UserURL
	}
	return l
}

// backing holds the embedded servers that were started (nil when external).
type backing struct {
	mongo *devstack.Mongo
	nats  *devstack.NATS
	redis *devstack.Redis
}

func (b *backing) stop(out *devstack.Console) {
	// Reverse start order; redis first as it is a child process that should
	// flush its AOF while the rest is still up.
	if b.redis != nil {
		if err := b.redis.Close(); err != nil {
			out.Printf("devstack", "stop redis: %v", err)
		}
	}
	if b.nats != nil {
		b.nats.Close()
	}
	if b.mongo != nil {
		if err := b.mongo.Close(); err != nil {
			out.Printf("devstack", "stop mongo: %v", err)
		}
	}
}

func run(ctx context.Context, cfg config, out *devstack.Console, logger *slog.Logger) (err error) {
	out.Printf("devstack", "data %s, binaries %s", cfg.DataDir, cfg.BinDir)
	k, err := platform.EnsureKeys(filepath.Join(cfg.DataDir, "keys"))
	if err != nil {
		return err
	}

	var b backing
	defer b.stop(out)
	mongoURI, natsURL, redisURL, err := startBacking(ctx, cfg, logger, &b)
	if err != nil {
		return err
	}
	shownNATS := natsURL
	if b.nats != nil {
		shownNATS = b.nats.URL + " (a user per process)" // the URLs with credentials are the processes' own
	}
	shownRedis := redisURL
	if b.redis != nil {
		shownRedis = "redis://" + b.redis.Addr + "/0 (its password in stack.json)"
	}
	out.Printf("devstack", "mongodb %s, nats %s, redis %s", mongoURI, shownNATS, shownRedis)

	table, err := platform.Table(layout(cfg, k, &b, mongoURI, natsURL, redisURL))
	if err != nil {
		return err
	}
	var children []*platform.Running
	// Buffered for the whole table so exit watchers never block.
	died := make(chan *platform.Running, len(table)+1)
	defer func() {
		for _, name := range platform.StopAll(children, stopTimeout) {
			out.Printf("devstack", "%s did not stop within %s; killed it", name, stopTimeout)
			err = errors.Join(err, fmt.Errorf("killed after %s: %s", stopTimeout, name))
		}
	}()
	for _, p := range table {
		c, err := startChild(cfg, p, out, died)
		if err != nil {
			return err
		}
		children = append(children, c)
	}

	if err := waitReady(ctx, children, out); err != nil {
		return err
	}
	services := children
	promURL := ""
	if cfg.Obs {
		c, err := startPrometheus(ctx, cfg, table, out, died)
		if c != nil {
			children = append(children, c)
		}
		if err != nil {
			return err
		}
		promURL = "http://" + cfg.PrometheusAddr
	}
	urls := backingURLs{mongo: mongoURI, nats: natsURL, redis: redisURL, prometheus: promURL}
	stackPath, err := writeStackFile(cfg, k, urls, &b, children, services)
	if err != nil {
		return err
	}
	defer os.Remove(stackPath)
	out.Printf("devstack", "ready: gateway http://%s", cfg.GatewayAddr)

	select {
	case <-ctx.Done():
		out.Printf("devstack", "shutting down")
		return nil
	case c := <-died:
		_, how := c.Exited()
		out.Printf("devstack", "%s exited unexpectedly (%s); shutting down", c.Name, how)
		return fmt.Errorf("%s: %w", c.Name, errChildDied)
	}
}

// waitReady is platform.WaitReady for make run: each process is announced as it gets
// ready, and a signal during startup shuts down cleanly.
func waitReady(ctx context.Context, rs []*platform.Running, out *devstack.Console) error {
	err := platform.WaitReady(ctx, platform.ReadyTimeout, rs, func(r *platform.Running) { out.Printf("devstack", "%s ready", r.Name) })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// startPrometheus runs Debian's prometheus scraping the table's processes (make run OBS=1).
func startPrometheus(ctx context.Context, cfg config, table []platform.Proc, out *devstack.Console, died chan<- *platform.Running) (*platform.Running, error) {
	pp, err := prometheusProcess(cfg, table)
	if err != nil {
		return nil, err
	}
	c, err := startChild(cfg, pp, out, died)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, []*platform.Running{c}, out); err != nil {
		return c, err
	}
	url := "http://" + cfg.PrometheusAddr
	out.Printf("devstack", "prometheus %s (alerts %s/alerts, rules from %s)", url, url, cfg.PrometheusRules)
	return c, nil
}

// backingURLs are the addresses of what the stack runs besides the services.
type backingURLs struct{ mongo, nats, redis, prometheus string }

// writeStackFile writes $DATA_DIR/stack.json and returns its path.
func writeStackFile(cfg config, k platform.Keys, u backingURLs, b *backing, children, services []*platform.Running) (string, error) {
	sf := platform.StackFile{
		Gateway:                "http://" + cfg.GatewayAddr,
		MongoDBURI:             u.mongo,
		NATSURL:                u.nats,
		RedisURL:               u.redis,
		JWTPrivateKeyFile:      k.JWTPrivateKeyFile,
		JWTIssuer:              platform.JWTIssuer,
		JWTAudience:            platform.JWTAudience,
		IdentitySigningKeyFile: k.IdentityKeyFile,
		PIDs:                   map[string]int{},
		Metrics:                map[string]string{},
		Prometheus:             u.prometheus,
	}
	for _, c := range children {
		sf.PIDs[c.Name] = c.Pid()
	}
	for _, c := range services {
		sf.Metrics[c.Name] = "http://" + c.InternalAddr + "/metrics"
	}
	if b.redis != nil {
		sf.PIDs["redis"] = b.redis.Pid()
	}
	if b.mongo != nil && b.mongo.Postgres != nil {
		sf.PIDs["postgres"] = b.mongo.Postgres.Pid()
		sf.PostgresURL = b.mongo.PostgresURL()
	}
	path := filepath.Join(cfg.DataDir, "stack.json")
	stackFileMu.Lock()
	defer stackFileMu.Unlock()
	return path, platform.WriteStackFile(path, sf)
}

func startBacking(ctx context.Context, cfg config, logger *slog.Logger, b *backing) (mongoURI, natsURL, redisURL string, err error) {
	mongoURI, natsURL, redisURL = cfg.MongoURI, cfg.NATSURL, cfg.RedisURL
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if mongoURI == "" {
		addr := cfg.MongoAddr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		b.mongo, err = devstack.StartMongoWith(startCtx, devstack.MongoConfig{Dir: filepath.Join(cfg.DataDir, "mongo"), Addr: addr,
			Engine: cfg.MongoEngine, Serialize: cfg.MongoSerialize, NoGIN: cfg.MongoNoGIN, Logger: logger})
		if err != nil {
			return "", "", "", err
		}
		mongoURI = b.mongo.URI
	}
	if natsURL == "" {
		if b.nats, err = devstack.StartNATS(startCtx, filepath.Join(cfg.DataDir, "nats"), cfg.NATSAddr, logger, devstack.NATSUsersOnly()); err != nil {
			return "", "", "", err
		}
		// What is not a process of the table (platformctl, through stack.json) connects as
		// platformctl.
		natsURL = b.nats.UserURL("platformctl")
	}
	if redisURL == "" {
		if b.redis, err = devstack.StartRedis(startCtx, filepath.Join(cfg.DataDir, "redis"), cfg.RedisAddr, logger); err != nil {
			return "", "", "", err
		}
		redisURL = b.redis.URL
	}
	return mongoURI, natsURL, redisURL, nil
}

// stackFileMu serializes the rewrites of stack.json by restarts.
var stackFileMu sync.Mutex

// refreshStackPID records a restarted process's new pid in $DATA_DIR/stack.json, so the
// tools that signal the stack's processes (the bench pauses and resumes them) find the
// one that runs. Before the stack is ready there is no stack.json yet, and nothing to do.
func refreshStackPID(cfg config, r *platform.Running) error {
	stackFileMu.Lock()
	defer stackFileMu.Unlock()
	path := filepath.Join(cfg.DataDir, "stack.json")
	sf, err := platform.ReadStackFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := sf.PIDs[r.Name]; !ok {
		return nil
	}
	sf.PIDs[r.Name] = r.Pid()
	return platform.WriteStackFile(path, sf)
}

// startChild starts p with its output prefixed by its name and restarts it when it
// exits, as a cluster would (platform.DefaultRestarts), saying so; one that keeps
// exiting past that budget is reported on died.
func startChild(cfg config, p platform.Proc, out *devstack.Console, died chan<- *platform.Running) (*platform.Running, error) {
	w := out.Writer(p.Name)
	r, err := platform.Start(p, cfg.BinDir, w)
	if err != nil {
		return nil, err
	}
	out.Printf("devstack", "started %s (pid %d) on %s (internal %s)", p.Name, r.Pid(), p.Addr, p.InternalAddr)
	go platform.Supervise(context.Background(), r, platform.DefaultRestarts, // until the stack's StopAll
		func(line string) {
			// stack.json first: whoever reads the line finds the new pid there.
			if err := refreshStackPID(cfg, r); err != nil {
				out.Printf("devstack", "stack.json keeps %s's old pid: %v", r.Name, err)
			}
			out.Printf("devstack", "%s", line)
		},
		func(r *platform.Running, why string) { out.Printf("devstack", "%s", why); died <- r })
	return r, nil
}
