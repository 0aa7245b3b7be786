package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/internal/proc"
	"github.com/analyticsco/platform/libs/identity"
)

const (
	jwtIssuer   = "https://auth.platform.local"
	jwtAudience = "platform-api"

	readyTimeout = 60 * time.Second
	// stopTimeout is how long children get between SIGTERM and SIGKILL.
	stopTimeout = 20 * time.Second
)

// process is one row of the process table: a binary from BIN_DIR with its
// arguments, its public address, the internal address its /readyz is polled on,
// and its own env.
type process struct {
	Name         string
	Binary       string
	Args         []string
	Addr         string
	InternalAddr string
	Env          []string
	// Tools from outside the repository (prometheus): Path is the binary (not in
	// BIN_DIR), ReadyPath its readiness URL path on InternalAddr (default /readyz), and
	// Bare keeps the platform's variables (secrets, URLs) out of its environment.
	Path      string
	ReadyPath string
	Bare      bool
}

// processes is the table of services, in start order. Add rows here.
func processes(cfg config, k keys) ([]process, error) {
	dbtEnv := func(addr string) []string {
		// file:// repositories are for the local stack only (DBT_SYNC_ALLOW_FILE_URLS).
		return []string{"HTTP_ADDR=" + addr, "DBT_CREDENTIALS_KEY=" + k.DBTCredentialsKey, "DBT_SYNC_ALLOW_FILE_URLS=true"}
	}
	ps := []process{
		{Name: "workspace-svc", Binary: "workspace-svc", Addr: cfg.WorkspaceAddr,
			Env: []string{"HTTP_ADDR=" + cfg.WorkspaceAddr}},
		{Name: "embed-svc", Binary: "embed-svc", Addr: cfg.EmbedAddr,
			Env: []string{"HTTP_ADDR=" + cfg.EmbedAddr, "EMBED_KEY_ENCRYPTION_KEY=" + k.EmbedKeyEncryption}},
		{Name: "dbtsync-svc", Binary: "dbtsync-svc", Addr: cfg.DBTSyncAddr,
			Env: dbtEnv(cfg.DBTSyncAddr)},
		{Name: "dbtsync-worker", Binary: "dbtsync-svc", Args: []string{"worker"}, Addr: cfg.DBTSyncWorkerAddr,
			Env: dbtEnv(cfg.DBTSyncWorkerAddr)},
		{Name: "gateway", Binary: "gateway", Addr: cfg.GatewayAddr,
			Env: []string{
				"GATEWAY_ADDR=" + cfg.GatewayAddr,
				"WORKSPACE_URL=http://" + cfg.WorkspaceAddr,
				"EMBED_URL=http://" + cfg.EmbedAddr,
				"DBTSYNC_URL=http://" + cfg.DBTSyncAddr,
				"AUTH_JWT_PUBLIC_KEYS_FILE=" + k.JWTPublicKeyFile,
				"AUTH_JWT_ISSUER=" + jwtIssuer,
				"AUTH_JWT_AUDIENCE=" + jwtAudience,
			}},
	}
	for i := range ps {
		// The gateway holds the identity key; each service only its own key derived from
		// it (it verifies what is sent to it, and can sign for no other service); the
		// worker, which runs untrusted repositories, none.
		switch name := ps[i].Name; name {
		case "gateway":
			ps[i].Env = append(ps[i].Env, "IDENTITY_SIGNING_KEY="+k.IdentitySigningKey)
		case "workspace-svc", "embed-svc", "dbtsync-svc":
			sk, err := identity.ServiceKey(k.IdentitySigningKey, name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.IdentityKeyFile, err)
			}
			ps[i].Env = append(ps[i].Env, "IDENTITY_SIGNING_KEY="+sk)
		}
		ps[i].InternalAddr = cfg.InternalAddrs[ps[i].Name]
		ps[i].Env = append(ps[i].Env, "INTERNAL_ADDR="+ps[i].InternalAddr)
	}
	return ps, nil
}

// stackFile is $DATA_DIR/stack.json, read by `platformctl seed`.
type stackFile struct {
	Gateway    string `json:"gateway"`
	MongoDBURI string `json:"mongodbUri"`
	NATSURL    string `json:"natsUrl"`
	RedisURL   string `json:"redisUrl"`
	// PostgresURL is the PostgreSQL database under the embedded FerretDB (engine
	// postgresql), for looking at what the engine does (psql, pg_stat_statements).
	PostgresURL            string         `json:"postgresUrl,omitempty"`
	JWTPrivateKeyFile      string         `json:"jwtPrivateKeyFile"`
	JWTIssuer              string         `json:"jwtIssuer"`
	JWTAudience            string         `json:"jwtAudience"`
	IdentitySigningKeyFile string         `json:"identitySigningKeyFile"`
	PIDs                   map[string]int `json:"pids"`
	// Metrics are the processes' metrics URLs (on their internal listeners), by name.
	Metrics map[string]string `json:"metrics"`
	// Prometheus is the local Prometheus's URL with OBS=1, empty otherwise.
	Prometheus string `json:"prometheus,omitempty"`
}

// child is a running process of the table.
type child struct {
	process
	cmd  *exec.Cmd
	out  *devstack.LineWriter
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
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
	k, err := ensureKeys(filepath.Join(cfg.DataDir, "keys"))
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
	out.Printf("devstack", "mongodb %s, nats %s, redis %s", mongoURI, shownNATS, redisURL)

	common := []string{
		"MONGODB_URI=" + mongoURI,
		"NATS_URL=" + natsURL,
		"REDIS_URL=" + redisURL,
		"LOG_LEVEL=" + cfg.LogLevel,
	}

	table, err := processes(cfg, k)
	if err != nil {
		return err
	}
	var children []*child
	// Buffered for the whole table so exit watchers never block.
	died := make(chan *child, len(table))
	defer func() {
		if stopErr := stopChildren(children, out); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	for _, p := range table {
		if b.nats != nil {
			// Each process connects to the embedded NATS as its own user, with only its
			// subjects (devstack.NATSUsers); the common NATS_URL is platformctl's.
			p.Env = append(p.Env, "NATS_URL="+b.nats.UserURL(p.Name))
		}
		c, err := startChild(cfg, p, common, out, died)
		if err != nil {
			return err
		}
		children = append(children, c)
	}

	if err := waitReady(ctx, children, died, out); err != nil {
		return err
	}
	services := children
	promURL := ""
	if cfg.Obs {
		c, err := startPrometheus(ctx, cfg, table, out, died)
		if err != nil {
			return err
		}
		children = append(children, c)
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
		out.Printf("devstack", "%s exited unexpectedly (%s); shutting down", c.Name, exitStatus(c.err))
		return fmt.Errorf("%s: %w", c.Name, errChildDied)
	}
}

// startPrometheus runs Debian's prometheus scraping the table's processes (make run OBS=1).
func startPrometheus(ctx context.Context, cfg config, table []process, out *devstack.Console, died chan<- *child) (*child, error) {
	pp, err := prometheusProcess(cfg, table)
	if err != nil {
		return nil, err
	}
	c, err := startChild(cfg, pp, nil, out, died)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, []*child{c}, nil, out); err != nil {
		return c, err
	}
	url := "http://" + cfg.PrometheusAddr
	out.Printf("devstack", "prometheus %s (alerts %s/alerts, rules from %s)", url, url, cfg.PrometheusRules)
	return c, nil
}

// backingURLs are the addresses of what the stack runs besides the services.
type backingURLs struct{ mongo, nats, redis, prometheus string }

// writeStackFile writes $DATA_DIR/stack.json, which platformctl, the bench and the
// developer read to find the running stack, and returns its path.
func writeStackFile(cfg config, k keys, u backingURLs, b *backing, children, services []*child) (string, error) {
	sf := stackFile{
		Gateway:                "http://" + cfg.GatewayAddr,
		MongoDBURI:             u.mongo,
		NATSURL:                u.nats,
		RedisURL:               u.redis,
		JWTPrivateKeyFile:      k.JWTPrivateKeyFile,
		JWTIssuer:              jwtIssuer,
		JWTAudience:            jwtAudience,
		IdentitySigningKeyFile: k.IdentityKeyFile,
		PIDs:                   map[string]int{},
		Metrics:                map[string]string{},
		Prometheus:             u.prometheus,
	}
	for _, c := range children {
		sf.PIDs[c.Name] = c.cmd.Process.Pid
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
	return path, writeJSON(path, sf)
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

func startChild(cfg config, p process, common []string, out *devstack.Console, died chan<- *child) (*child, error) {
	path := p.Path
	if path == "" {
		path = filepath.Join(cfg.BinDir, p.Binary)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %s not found (build it with `make build`): %w", p.Name, path, err)
	}
	cmd := exec.Command(path, p.Args...)
	// Later entries win in os/exec, so the table overrides the parent env.
	env := os.Environ()
	if p.Bare {
		common = nil
	}
	for _, kv := range common {
		// The dbt worker runs untrusted repositories and serves no API: it never gets the
		// key that signs forwarded identities.
		if p.Name == "dbtsync-worker" && strings.HasPrefix(kv, "IDENTITY_SIGNING_KEY=") {
			continue
		}
		env = append(env, kv)
	}
	if !p.Bare {
		env = append(env, "OTEL_SERVICE_NAME="+p.Name)
	}
	cmd.Env = append(env, p.Env...)
	w := out.Writer(p.Name)
	cmd.Stdout, cmd.Stderr = w, w
	// A grandchild holding the output pipe must not block Wait forever.
	cmd.WaitDelay = 5 * time.Second
	exited, err := proc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	out.Printf("devstack", "started %s (pid %d) on %s (internal %s)", p.Name, cmd.Process.Pid, p.Addr, p.InternalAddr)
	c := &child{process: p, cmd: cmd, out: w, done: make(chan struct{})}
	go func() {
		c.err = <-exited
		c.out.Flush()
		close(c.done)
		died <- c
	}()
	return c, nil
}

// waitReady polls every child's GET /readyz until 200, failing on a signal,
// a child's death or the deadline (naming the services not ready).
func waitReady(ctx context.Context, children []*child, died <-chan *child, out *devstack.Console) error {
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	ready := make(map[string]bool)
	for {
		var waiting []string
		for _, c := range children {
			if ready[c.Name] {
				continue
			}
			if isReady(ctx, client, c.InternalAddr, c.ReadyPath) {
				ready[c.Name] = true
				out.Printf("devstack", "%s ready", c.Name)
				continue
			}
			waiting = append(waiting, c.Name)
		}
		if len(waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // a signal during startup: shut down cleanly
		case c := <-died:
			return fmt.Errorf("%s exited during startup (%s): %w", c.Name, exitStatus(c.err), errChildDied)
		case <-deadline.C:
			return fmt.Errorf("not ready after %s (GET /readyz never returned 200): %v", readyTimeout, waiting)
		case <-tick.C:
		}
	}
}

func isReady(ctx context.Context, client *http.Client, addr, path string) bool {
	if path == "" {
		path = "/readyz"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stopChildren sends SIGTERM to every live child, gives them stopTimeout in
// total, then SIGKILLs the rest; it reports the children that had to be killed.
func stopChildren(children []*child, out *devstack.Console) error {
	for _, c := range children {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(stopTimeout)
	expired := false
	var killed []string
	for _, c := range children {
		if !expired {
			select {
			case <-c.done:
				continue
			case <-deadline:
				expired = true
			}
		}
		select {
		case <-c.done:
		default:
			out.Printf("devstack", "%s did not stop within %s; killing it", c.Name, stopTimeout)
			_ = c.cmd.Process.Kill()
			<-c.done
			killed = append(killed, c.Name)
		}
	}
	if len(killed) > 0 {
		return fmt.Errorf("killed after %s: %v", stopTimeout, killed)
	}
	return nil
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.ProcessState.String()
	default:
		return err.Error()
	}
}

// writeJSON writes v to path via a rename so readers never see half a file.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
