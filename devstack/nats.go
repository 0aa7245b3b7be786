package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS is an in-process nats-server with JetStream storing on disk, with the platform's
// users (NATSUsers): each process connects as its own (UserURL) and may use only its
// subjects. URL connects without credentials as the devstack's own user, which may do
// anything (tests and tools), unless the server was started with NATSUsersOnly.
type NATS struct {
	URL string // nats://127.0.0.1:<port>

	storeDir  string
	host      string
	port      int
	logger    *slog.Logger
	usersOnly bool
	passwords map[string]string // by user; fixed for the server's life, restarts included
	denied    []*server.User    // NATSUserDenied's users

	mu     sync.Mutex
	srv    *server.Server
	closed bool
}

// NATSOption configures StartNATS.
type NATSOption func(*NATS)

// NATSUsersOnly makes every connection name a user of NATSUsers (UserURL): nothing
// connects without credentials, so the subject permissions hold for everything that
// runs on the stack (bin/devstack, the stack tests).
func NATSUsersOnly() NATSOption { return func(n *NATS) { n.usersOnly = true } }

// NATSUserDenied adds a user (connecting with UserURL(name)) that may do anything but
// publish to the subjects deny. The server drops such a publish: a JetStream API call
// among them is a request it never answers, as a cluster's server lost mid-call does,
// for tests of what a caller does when an answer never comes. StartNATS only.
func NATSUserDenied(name string, deny ...string) NATSOption {
	return func(n *NATS) {
		n.passwords[name] = randomHex(24)
		n.denied = append(n.denied, &server.User{Username: name, Password: n.passwords[name],
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Deny: deny}}})
	}
}

// adminUser is the devstack's own user: every subject, for tests and tools.
const adminUser = "devstack"

// JetStreamMaxStore is the file storage every devstack nats-server offers JetStream,
// whatever the disk has free (1 TiB, nats-server's own guess when it cannot tell).
const JetStreamMaxStore = server.JetStreamMaxStoreDefault

// StartNATS starts nats-server with JetStream in storeDir, listening on addr
// ("" picks a random port on 127.0.0.1). ctx bounds startup only.
func StartNATS(ctx context.Context, storeDir, addr string, logger *slog.Logger, opts ...NATSOption) (*NATS, error) {
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
	n := &NATS{storeDir: abs, host: "127.0.0.1", port: server.RANDOM_PORT, logger: logger.With("component", "nats"),
		passwords: map[string]string{adminUser: randomHex(24)}}
	for _, u := range NATSUsers() {
		n.passwords[u.Name] = randomHex(24)
	}
	for _, o := range opts {
		o(n)
	}
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
		// nats-server's default is 75% of the disk free when it starts, and the
		// platform's streams reserve their MaxBytes against it (the object store alone
		// 8 GiB by default): on a machine with less free disk, or while other tests fill
		// it, a service's start would fail "insufficient storage resources". The
		// streams' own limits bound what is stored; this bound does not depend on the
		// machine.
		JetStreamMaxStore: JetStreamMaxStore,
		// No HTTP monitoring, no signal handlers (the runner owns signals),
		// no logger configured: nats-server is silent unless told otherwise.
		HTTPPort: 0,
		NoSigs:   true,
		NoLog:    true,
		Users:    n.users(),
	}
	if !n.usersOnly {
		opts.NoAuthUser = adminUser
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

// users are the server's users: the platform's (NATSUsers), the devstack's own and
// those NATSUserDenied adds.
func (n *NATS) users() []*server.User {
	out := []*server.User{{Username: adminUser, Password: n.passwords[adminUser]}}
	for _, u := range NATSUsers() {
		out = append(out, &server.User{Username: u.Name, Password: n.passwords[u.Name], Permissions: u.Permissions()})
	}
	return append(out, n.denied...)
}

// UserURL is the URL a process connects with as its user of NATSUsers ("devstack": the
// user that may do anything); "" for an unknown user.
func (n *NATS) UserURL(user string) string {
	pw, ok := n.passwords[user]
	if !ok {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return "nats://" + url.UserPassword(user, pw).String() + "@" + net.JoinHostPort(n.host, strconv.Itoa(n.port))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
