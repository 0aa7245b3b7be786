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

// Mongo is an in-process FerretDB v1 (SQLite files in Dir) behind a
// serialising wire-protocol proxy; URI points at the proxy.
type Mongo struct {
	URI string // mongodb://127.0.0.1:<proxyport>/
	Dir string

	// UpstreamURI is FerretDB itself, bypassing the proxy. Only for tests
	// that demonstrate why the proxy exists.
	UpstreamURI string

	logger    *slog.Logger
	proxyAddr string

	mu      sync.Mutex
	running bool
	closed  bool
	proxy   *wireproxy.Proxy
	cancel  context.CancelFunc
	runDone chan struct{}
}

// StartMongo starts FerretDB on 127.0.0.1:0 with its SQLite files in dir, and
// the proxy on a random port. ctx bounds startup only.
func StartMongo(ctx context.Context, dir string, logger *slog.Logger) (*Mongo, error) {
	return StartMongoAt(ctx, dir, "127.0.0.1:0", logger)
}

// StartMongoAt is StartMongo with a fixed proxy address, so a restarted or
// re-run stack keeps its URI.
func StartMongoAt(ctx context.Context, dir, proxyAddr string, logger *slog.Logger) (*Mongo, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: mongo dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("devstack: mongo dir: %w", err)
	}
	m := &Mongo{Dir: abs, logger: logger.With("component", "mongo"), proxyAddr: proxyAddr}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startLocked(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// startLocked starts FerretDB and the proxy; m.mu must be held.
func (m *Mongo) startLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// FerretDB logs every connection at Info and every client disconnect at
	// Warn; only its errors are worth seeing in test and stack output.
	flog := slog.New(levelFilter{min: slog.LevelError, Handler: m.logger.Handler()}).With("component", "ferretdb")
	ferretNewMu.Lock()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:  "sqlite",
		// The trailing slash matters: FerretDB wants a directory URI.
		SQLiteURL: "file:" + m.Dir + "/",
		Logger:    flog,
	})
	ferretNewMu.Unlock()
	if err != nil {
		return fmt.Errorf("devstack: start FerretDB in %s: %w", m.Dir, err)
	}
	// New already listens, so the URI is known before Run (MongoDBURI only
	// blocks until the listener exists).
	upstreamURI := f.MongoDBURI()
	runCtx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = f.Run(runCtx)
	}()
	upstreamAddr, err := hostOf(upstreamURI)
	if err == nil {
		var p *wireproxy.Proxy
		p, err = wireproxy.Listen(m.proxyAddr, upstreamAddr, m.logger)
		if err == nil {
			m.proxy, m.cancel, m.runDone, m.running = p, cancel, runDone, true
			m.proxyAddr = p.Addr().String()
			m.URI = "mongodb://" + m.proxyAddr + "/"
			m.UpstreamURI = upstreamURI
			return nil
		}
	}
	cancel()
	<-runDone
	return fmt.Errorf("devstack: mongo proxy: %w", err)
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

func (m *Mongo) stopLocked() error {
	if !m.running {
		return nil
	}
	m.running = false
	// Proxy first: closing its upstream connections lets FerretDB's Run
	// return at once instead of waiting out its 3 s grace for clients.
	err := m.proxy.Close()
	m.cancel()
	select {
	case <-m.runDone:
	case <-time.After(30 * time.Second):
		err = errors.Join(err, errors.New("devstack: FerretDB did not stop within 30s"))
	}
	return err
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
	return m.startLocked(ctx)
}

// Close stops everything for good; it is idempotent.
func (m *Mongo) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return m.stopLocked()
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
