package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"

	"github.com/analyticsco/platform/devstack/wireproxy"
)

// ferretNewMu serialises ferretdb.New: it writes process-global state
// (version.Get().Package), which races when parallel tests start instances.
var ferretNewMu sync.Mutex

// Engine is what FerretDB stores its documents in.
type Engine string

const (
	// EnginePostgres is FerretDB's PostgreSQL handler on a PostgreSQL child process
	// (Debian's package) whose every index on a document field is joined by a GIN index
	// (postgres_gin.go): the filters FerretDB sends are jsonb containment, which only GIN
	// serves. The default.
	EnginePostgres Engine = "postgresql"
	// EngineSQLite is FerretDB's SQLite handler (files in the data directory), which
	// pushes down no filter but a lone _id: every query scans its collection.
	EngineSQLite Engine = "sqlite"
)

// ParseEngine reads DEVSTACK_MONGO_ENGINE's values; "" is the default.
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(s); e {
	case "":
		return EnginePostgres, nil
	case EnginePostgres, EngineSQLite:
		return e, nil
	}
	return "", fmt.Errorf("unknown MongoDB engine %q: want %s or %s", s, EnginePostgres, EngineSQLite)
}

// MongoConfig says how to run the embedded MongoDB.
type MongoConfig struct {
	// Dir holds the data: the PostgreSQL cluster (postgresql) or the SQLite files.
	Dir string
	// Addr is the proxy's address; "" or "127.0.0.1:0" picks a free port.
	Addr string
	// Engine is EnginePostgres when empty.
	Engine Engine
	// Serialize is which commands the proxy runs one at a time: wireproxy.All (the
	// zero value), wireproxy.Collections or wireproxy.Writes (for comparison, see
	// wireproxy).
	Serialize wireproxy.Mode
	// NoGIN leaves FerretDB's PostgreSQL tables with its btree indexes only: what
	// FerretDB does by itself, for comparison (make bench -only engines).
	NoGIN bool
	// CommandTimeout is how long the proxy waits for FerretDB's reply to a command;
	// 0 is wireproxy.DefaultCommandTimeout. Past it the client gets an error and
	// FerretDB is restarted (see replaceFerret).
	CommandTimeout time.Duration
	// Standalone has the proxy show FerretDB as it is, a standalone server. By default
	// the proxy presents it as the one-node replica set ReplicaSetName, so clients use
	// sessions and retryable writes as against MongoDB in production, and Stepdown can
	// take its primary away.
	Standalone bool
	Logger     *slog.Logger

	// shared, when set, is a running PostgreSQL server this Mongo does not own: it uses
	// its own database in it (MongoForTest's per-process cluster).
	shared *Postgres
}

// ReplicaSetName is the name of the replica set the proxy presents (MongoConfig.Standalone).
const ReplicaSetName = "rs0"

// Mongo is an in-process FerretDB v1 behind a wire-protocol proxy that serialises
// commands; URI points at the proxy, naming its replica set unless Standalone. With
// EnginePostgres it runs (or shares) a PostgreSQL child process.
type Mongo struct {
	URI string // mongodb://127.0.0.1:<proxyport>/?replicaSet=rs0, or without the query when standalone
	Dir string

	// UpstreamURI is FerretDB itself, bypassing the proxy. Only for tests
	// that demonstrate why the proxy exists.
	UpstreamURI string

	// Engine and Serialize are as configured.
	Engine    Engine
	Serialize wireproxy.Mode

	logger         *slog.Logger
	proxyAddr      string
	replicaSet     *wireproxy.ReplicaSet // nil when standalone; kept across restarts
	commandTimeout time.Duration

	// Postgres is the server under FerretDB (EnginePostgres), owned unless shared.
	Postgres   *Postgres
	ownsPG     bool
	pgDatabase string

	mu      sync.Mutex
	running bool
	closed  bool
	proxy   *wireproxy.Proxy
	ferret  *ferretRun
}

// ferretRun is a running FerretDB.
type ferretRun struct {
	uri, addr string
	cancel    context.CancelFunc
	done      chan struct{}
}

// stop cancels the run and waits for it to end. FerretDB cancels the contexts of the
// commands in flight 3 s after its own.
func (f *ferretRun) stop() error {
	f.cancel()
	select {
	case <-f.done:
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("devstack: FerretDB did not stop within 30s")
	}
}

// StartMongo starts the embedded MongoDB with its data in dir and the proxy on a
// random port. ctx bounds startup only.
func StartMongo(ctx context.Context, dir string, logger *slog.Logger) (*Mongo, error) {
	return StartMongoWith(ctx, MongoConfig{Dir: dir, Logger: logger})
}

// StartMongoAt is StartMongo with a fixed proxy address, so a restarted or
// re-run stack keeps its URI.
func StartMongoAt(ctx context.Context, dir, proxyAddr string, logger *slog.Logger) (*Mongo, error) {
	return StartMongoWith(ctx, MongoConfig{Dir: dir, Addr: proxyAddr, Logger: logger})
}

// ferretDatabase is the PostgreSQL database of an owned cluster that FerretDB keeps its
// data in (each MongoDB database a schema of it).
const ferretDatabase = "ferretdb"

// StartMongoWith starts the embedded MongoDB as cfg says. ctx bounds startup only.
func StartMongoWith(ctx context.Context, cfg MongoConfig) (*Mongo, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	engine, err := ParseEngine(string(cfg.Engine))
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: mongo dir %q: %w", cfg.Dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("devstack: mongo dir: %w", err)
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	m := &Mongo{Dir: abs, Engine: engine, Serialize: cfg.Serialize, logger: logger.With("component", "mongo"), proxyAddr: addr,
		commandTimeout: cfg.CommandTimeout}
	if !cfg.Standalone {
		m.replicaSet = wireproxy.NewReplicaSet(ReplicaSetName)
	}
	if engine == EnginePostgres {
		if err := m.preparePostgres(ctx, cfg.shared, cfg.NoGIN); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startLocked(ctx); err != nil {
		m.closed = true
		return nil, errors.Join(err, m.releasePostgres())
	}
	return m, nil
}

// preparePostgres starts the cluster in Dir (or takes the shared server) and creates
// FerretDB's database with the GIN trigger in it.
func (m *Mongo) preparePostgres(ctx context.Context, shared *Postgres, noGIN bool) error {
	if shared != nil {
		m.Postgres = shared
		m.pgDatabase = "m_" + randomHex(6)
		if err := shared.Exec(ctx, "postgres", "CREATE DATABASE "+m.pgDatabase+" TEMPLATE "+ferretTemplate); err != nil {
			return err
		}
		return nil
	}
	pg, err := StartPostgres(ctx, filepath.Join(m.Dir, "postgres"), m.logger)
	if err != nil {
		return err
	}
	m.Postgres, m.ownsPG, m.pgDatabase = pg, true, ferretDatabase
	if err := prepareFerretDatabase(ctx, pg, ferretDatabase, noGIN); err != nil {
		_ = pg.Close()
		return err
	}
	return nil
}

// startLocked starts FerretDB and the proxy; m.mu must be held.
func (m *Mongo) startLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := m.startFerret()
	if err != nil {
		return err
	}
	p, err := wireproxy.ListenWith(m.proxyAddr, f.addr, wireproxy.Options{Mode: m.Serialize, EscapeNUL: m.Engine == EnginePostgres,
		CommandTimeout: m.commandTimeout, OnCommandTimeout: m.replaceFerret, ReplicaSet: m.replicaSet, Logger: m.logger})
	if err != nil {
		return errors.Join(fmt.Errorf("devstack: mongo proxy: %w", err), f.stop())
	}
	m.proxy, m.ferret, m.running = p, f, true
	m.proxyAddr = p.Addr().String()
	m.URI = "mongodb://" + m.proxyAddr + "/"
	if m.replicaSet != nil {
		m.URI += "?replicaSet=" + m.replicaSet.Name()
	}
	m.UpstreamURI = f.uri
	return nil
}

// startFerret starts FerretDB on a random port.
func (m *Mongo) startFerret() (*ferretRun, error) {
	// FerretDB logs every connection at Info and every client disconnect at
	// Warn; only its errors are worth seeing in test and stack output.
	flog := slog.New(levelFilter{min: slog.LevelError, Handler: m.logger.Handler()}).With("component", "ferretdb")
	fc := &ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:  string(m.Engine),
		Logger:   flog,
	}
	if m.Engine == EnginePostgres {
		fc.PostgreSQLURL = m.Postgres.URL(m.pgDatabase)
	} else {
		// The trailing slash matters: FerretDB wants a directory URI.
		fc.SQLiteURL = "file:" + m.Dir + "/"
	}
	ferretNewMu.Lock()
	f, err := ferretdb.New(fc)
	ferretNewMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("devstack: start FerretDB (%s) in %s: %w", m.Engine, m.Dir, err)
	}
	// New already listens, so the URI is known before Run (MongoDBURI only
	// blocks until the listener exists).
	run := &ferretRun{uri: f.MongoDBURI(), done: make(chan struct{})}
	var runCtx context.Context
	runCtx, run.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(run.done)
		_ = f.Run(runCtx)
	}()
	if run.addr, err = hostOf(run.uri); err != nil {
		return nil, errors.Join(err, run.stop())
	}
	return run, nil
}

// replaceFerret replaces the FerretDB at upstream, which left a command unanswered past
// the proxy's deadline, by a new one, unless that was done already. A FerretDB command
// can wait for ever (an update of 50 statements waiting for its own pool did, before the
// proxy forwarded them in batches) and keep what it holds, which dropping its client
// connection does not release: only stopping FerretDB cancels it. The proxy's clients
// keep the proxy's address; their next command goes to the new FerretDB.
func (m *Mongo) replaceFerret(upstream string) {
	go func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.running || m.ferret.addr != upstream {
			return
		}
		f, err := m.startFerret()
		if err != nil {
			m.logger.Error("replacing FerretDB after a command went unanswered failed", "err", err)
			return
		}
		old := m.ferret
		m.proxy.SetUpstream(f.addr)
		m.ferret, m.UpstreamURI = f, f.uri
		m.logger.Warn("FerretDB replaced after a command went unanswered past the proxy's deadline", "old", old.addr, "new", f.addr)
		if err := old.stop(); err != nil {
			m.logger.Error("stopping the replaced FerretDB", "err", err)
		}
	}()
}

// ProxyCounts are the commands the proxy has forwarded, and of them those it ran one
// at a time (since the last start).
func (m *Mongo) ProxyCounts() (forwarded, serialised int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proxy == nil {
		return 0, 0
	}
	return m.proxy.Counts()
}

// errStandalone: a replica-set control was asked of a standalone Mongo.
var errStandalone = errors.New("devstack: mongo is standalone (MongoConfig.Standalone): it has no replica set")

// Stepdown steps the replica set's primary down for d: clients' commands are refused
// with the errors of a node that is no longer primary (writes NotWritablePrimary,
// labelled RetryableWriteError), hello says secondary, and after d the node is primary
// again with a new election. It returns at once.
func (m *Mongo) Stepdown(d time.Duration) error {
	if m.replicaSet == nil {
		return errStandalone
	}
	return m.replicaSet.Stepdown(d)
}

// LoseWriteReplies makes the next n retryable writes apply and then lose their reply
// (the client's connection closes), so the client retries them; the proxy answers each
// retry with the recorded reply, so each lands exactly once.
func (m *Mongo) LoseWriteReplies(n int) error {
	if m.replicaSet == nil {
		return errStandalone
	}
	m.replicaSet.LoseWriteReplies(n)
	return nil
}

// ReplicaSetCounts are what the replica set did so far (stepdowns, refused commands,
// retries answered from their record, replies lost); zero when standalone.
func (m *Mongo) ReplicaSetCounts() wireproxy.ReplicaSetCounts {
	if m.replicaSet == nil {
		return wireproxy.ReplicaSetCounts{}
	}
	return m.replicaSet.Counts()
}

func hostOf(uri string) (string, error) {
	const prefix = "mongodb://"
	if len(uri) < len(prefix) || uri[:len(prefix)] != prefix {
		return "", fmt.Errorf("unexpected FerretDB URI %q", uri)
	}
	host := uri[len(prefix):]
	for i, c := range host {
		if c == '/' || c == '?' {
			host = host[:i]
			break
		}
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		return "", fmt.Errorf("unexpected FerretDB URI %q: %w", uri, err)
	}
	return host, nil
}

// Stop stops the proxy and FerretDB, so clients see connection refused (for
// fault tests). It is idempotent; Restart brings both back.
func (m *Mongo) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopLocked()
}

func (m *Mongo) stopLocked() (err error) {
	if !m.running {
		return nil
	}
	m.running = false
	defer func() {
		if m.ownsPG {
			err = errors.Join(err, m.Postgres.Stop())
		}
	}()
	// Proxy first: closing its upstream connections lets FerretDB's Run
	// return at once instead of waiting out its 3 s grace for clients; the
	// database under it last.
	return errors.Join(m.proxy.Close(), m.ferret.stop())
}

// Restart starts FerretDB again on the same dir and the proxy on the same
// address, so URI stays valid.
func (m *Mongo) Restart(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("devstack: mongo is closed")
	}
	if err := m.stopLocked(); err != nil {
		return err
	}
	if m.ownsPG {
		if err := m.Postgres.Restart(ctx); err != nil {
			return err
		}
	}
	return m.startLocked(ctx)
}

// Close stops everything for good; it is idempotent.
func (m *Mongo) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return errors.Join(m.stopLocked(), m.releasePostgres())
}

// releasePostgres closes an owned server, or drops this Mongo's database from a shared
// one (FerretDB's connections are closed by then).
func (m *Mongo) releasePostgres() error {
	switch {
	case m.ownsPG:
		return m.Postgres.Close()
	case m.Postgres != nil && m.pgDatabase != "":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db := m.pgDatabase
		m.pgDatabase = ""
		return m.Postgres.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
	}
	return nil
}

// levelFilter drops records below min before they reach Handler.
type levelFilter struct {
	min slog.Level
	slog.Handler
}

func (h levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return levelFilter{min: h.min, Handler: h.Handler.WithAttrs(as)}
}

func (h levelFilter) WithGroup(name string) slog.Handler {
	return levelFilter{min: h.min, Handler: h.Handler.WithGroup(name)}
}

// PostgresURL is the URL of the PostgreSQL database FerretDB keeps its data in, "" on
// SQLite.
func (m *Mongo) PostgresURL() string {
	if m.Postgres == nil {
		return ""
	}
	return m.Postgres.URL(m.pgDatabase)
}
