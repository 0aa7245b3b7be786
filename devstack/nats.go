package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS is an in-process nats-server with JetStream storing on disk.
type NATS struct {
	URL string // nats://127.0.0.1:<port>

	storeDir string
	host     string
	port     int
	logger   *slog.Logger

	mu     sync.Mutex
	srv    *server.Server
	closed bool
}

// StartNATS starts nats-server with JetStream in storeDir, listening on addr
// ("" picks a random port on 127.0.0.1). ctx bounds startup only.
func StartNATS(ctx context.Context, storeDir, addr string, logger *slog.Logger) (*NATS, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(storeDir)
	if err != nil {
		return nil, fmt.Errorf("devstack: nats store dir %q: %w", storeDir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("devstack: nats store dir: %w", err)
	}
	n := &NATS{storeDir: abs, host: "127.0.0.1", port: server.RANDOM_PORT, logger: logger.With("component", "nats")}
	if addr != "" {
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("devstack: nats addr %q: %w", addr, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return nil, fmt.Errorf("devstack: nats addr %q: %w", addr, err)
		}
		if host != "" {
			n.host = host
		}
		if port != 0 {
			n.port = port
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.startLocked(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *NATS) startLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	opts := &server.Options{
		ServerName: "devstack",
		Host:       n.host,
		Port:       n.port,
		JetStream:  true,
		StoreDir:   n.storeDir,
		// No HTTP monitoring, no signal handlers (the runner owns signals),
		// no logger configured: nats-server is silent unless told otherwise.
		HTTPPort: 0,
		NoSigs:   true,
		NoLog:    true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("devstack: nats-server: %w", err)
	}
	go s.Start()
	deadline := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d)
	}
	if !s.ReadyForConnections(deadline) {
		s.Shutdown()
		s.WaitForShutdown()
		return fmt.Errorf("devstack: nats-server on %s:%d not ready within %s", n.host, n.port, deadline)
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		s.WaitForShutdown()
		return errors.New("devstack: nats-server started without JetStream")
	}
	// Pin the port the first start picked so Restart keeps the URL.
	tcp, ok := s.Addr().(*net.TCPAddr)
	if !ok {
		s.Shutdown()
		s.WaitForShutdown()
		return fmt.Errorf("devstack: nats-server address %v is not TCP", s.Addr())
	}
	n.port = tcp.Port
	n.URL = "nats://" + net.JoinHostPort(n.host, strconv.Itoa(n.port))
	n.srv = s
	n.logger.Debug("nats-server ready", "url", n.URL, "store", n.storeDir)
	return nil
}

// Stop shuts the server down (for fault tests); idempotent.
func (n *NATS) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked()
}

func (n *NATS) stopLocked() {
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// Restart starts the server again on the same port with the same store.
func (n *NATS) Restart(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("devstack: nats is closed")
	}
	n.stopLocked()
	return n.startLocked(ctx)
}

// Close stops the server for good; idempotent.
func (n *NATS) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	n.stopLocked()
}
