package devstack

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/devstack/wireproxy"
	"github.com/analyticsco/platform/libs/natsx"
)

// startTimeout bounds how long a *ForTest helper waits for a server.
const startTimeout = 60 * time.Second

// MongoForTest starts a fresh FerretDB (+ proxy) for the test, stopped in t.Cleanup:
// on PostgreSQL, a database of its own in the test process's one PostgreSQL server
// (sharedPostgres). It fails the test on error; it never skips.
func MongoForTest(t testing.TB) *Mongo {
	t.Helper()
	return MongoForTestSerializing(t, wireproxy.All)
}

// MongoForTestSerializing is MongoForTest with the proxy serialising as mode says: for
// tests that show what FerretDB does when reads run beside writes (wireproxy.Collections,
// wireproxy.Writes).
func MongoForTestSerializing(t testing.TB, mode wireproxy.Mode) *Mongo {
	t.Helper()
	logger := testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	pg, err := sharedPostgres(ctx)
	if err != nil {
		t.Fatalf("start PostgreSQL for the embedded FerretDB: %v", err)
	}
	m, err := StartMongoWith(ctx, MongoConfig{Dir: filepath.Join(t.TempDir(), "mongo"), Logger: logger, Serialize: mode, shared: pg})
	if err != nil {
		t.Fatalf("start embedded FerretDB: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("stop embedded FerretDB: %v", err)
		}
	})
	return m
}

// shared is the test process's PostgreSQL server: started by the first MongoForTest,
// with its cluster in a temp dir that names the process, stopped when the process ends
// (Pdeathsig). The next process to start one removes the dirs of processes that are gone.
var shared struct {
	sync.Mutex
	pg *Postgres
}

func sharedPostgres(ctx context.Context) (*Postgres, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.pg != nil {
		return shared.pg, nil
	}
	removeStaleClusters()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("devstack-pgtest-%d-%s", os.Getpid(), randomHex(4)))
	pg, err := startPostgres(ctx, dir, nil, true)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := prepareFerretDatabase(ctx, pg, ferretTemplate, false); err != nil {
		_ = pg.Close()
		return nil, err
	}
	shared.pg = pg
	return pg, nil
}

// removeStaleClusters removes the temp clusters of test processes that have exited.
func removeStaleClusters() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "devstack-pgtest-*"))
	for _, d := range dirs {
		var pid int
		var suffix string
		if _, err := fmt.Sscanf(filepath.Base(d), "devstack-pgtest-%d-%s", &pid, &suffix); err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// MongoProcessForTest is MongoForTest in a child process built without the race
// detector (cmd/mongo), with a PostgreSQL cluster of its own: for a test that fills a
// database with thousands of documents, which FerretDB inside a race-instrumented test
// binary handles an order of magnitude slower. The child stops in t.Cleanup, and
// on its own when the test process dies (its standard input closes). It returns the
// proxy's URI.
func MongoProcessForTest(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mongo")
	build := exec.Command("go", "build", "-o", bin, "github.com/analyticsco/platform/devstack/cmd/mongo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the embedded MongoDB command: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-dir", filepath.Join(t.TempDir(), "data"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the embedded MongoDB command: %v", err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if uri, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- uri
			}
		}
		close(ready)
	}()
	select {
	case uri, ok := <-ready:
		if !ok {
			t.Fatal("the embedded MongoDB command exited before it was ready")
		}
		return uri
	case <-time.After(startTimeout):
		t.Fatal("the embedded MongoDB command did not get ready in time")
	}
	return ""
}

// NATSForTest starts nats-server with JetStream in t.TempDir() on a random
// port, shut down in t.Cleanup; opts as StartNATS's.
func NATSForTest(t testing.TB, opts ...NATSOption) *NATS {
	t.Helper()
	logger := testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	n, err := StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), "", logger, opts...)
	if err != nil {
		t.Fatalf("start embedded nats-server: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// NATSClusterForTest starts a NATSCluster of size nodes for the test, stopped in
// t.Cleanup (a failed test's report gets the end of each node's log); opts as
// StartNATS's.
func NATSClusterForTest(t testing.TB, size int, opts ...NATSOption) *NATSCluster {
	t.Helper()
	logger := testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := StartNATSCluster(ctx, filepath.Join(t.TempDir(), "nats"), size, logger, opts...)
	if err != nil {
		t.Fatalf("start a cluster of nats-servers: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for i, n := range c.Nodes {
				t.Logf("nats-server %s (node %d), the end of its log:\n%s", n.Name, i, lastLines(c.Log(i), 30))
			}
		}
	})
	return c
}

// NATSConnForTest connects to url (a server's, a cluster's list) with opts, closed in
// t.Cleanup. A URL that names a user (UserURL) gets that user's inbox prefix, as a
// process's connection does (server.ConnectNATS).
func NATSConnForTest(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	inbox, err := natsx.UserInbox(url)
	if err != nil {
		t.Fatalf("connect to NATS: %v", err)
	}
	if inbox != nil {
		opts = append([]nats.Option{inbox}, opts...)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// RedisForTest starts redis-server in t.TempDir() on a free port, stopped in
// t.Cleanup. When redis-server is missing it fails with the install hint.
func RedisForTest(t testing.TB) *Redis {
	t.Helper()
	logger := testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	r, err := StartRedis(ctx, filepath.Join(t.TempDir(), "redis"), "", logger)
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("stop redis-server: %v", err)
		}
	})
	return r
}

// UniqueName returns a name unique to this test run for databases, streams
// and key prefixes: prefix and test name, lower-cased to [a-z0-9_], plus a
// random suffix, at most 40 characters.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("unique name: %v", err)
	}
	suffix := hex.EncodeToString(b[:])
	base := sanitizeName(prefix + "_" + t.Name())
	const maxLen = 40
	if limit := maxLen - len(suffix) - 1; len(base) > limit {
		base = strings.TrimRight(base[:limit], "_")
	}
	if base == "" {
		return "t_" + suffix
	}
	return base + "_" + suffix
}

func sanitizeName(s string) string {
	var b strings.Builder
	lastUnderscore := true // also trims leading underscores
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			lastUnderscore = false
		default:
			if !lastUnderscore {
				b.WriteByte('_')
				lastUnderscore = true
			}
		}
	}
	return strings.TrimRight(b.String(), "_")
}

// RepoRoot is the directory holding go.work, found by walking up from the
// test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("repo root: %v", err)
	}
	root, err := FindRepoRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// FindRepoRoot walks up from dir to the directory that holds go.work.
func FindRepoRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.work found above %s", dir)
		}
		d = parent
	}
}

// FreeAddr returns "127.0.0.1:<port>" for a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	a, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testLogger sends Warn and above to t.Log until the test's cleanups are
// over; servers' late goroutines must not call t.Log after the test ends.
func testLogger(t testing.TB) *slog.Logger {
	h := &testHandler{t: t, state: &testHandlerState{}}
	t.Cleanup(func() { // registered first, so it runs after the servers stop
		h.state.mu.Lock()
		h.state.done = true
		h.state.mu.Unlock()
	})
	return slog.New(h)
}

type testHandlerState struct {
	mu   sync.Mutex
	done bool
}

type testHandler struct {
	t     testing.TB
	state *testHandlerState
	attrs []slog.Attr
	group string
}

func (h *testHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *testHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte(' ')
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		fmt.Fprintf(&b, " %s=%v", key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	if !h.state.done {
		h.t.Log(b.String())
	}
	return nil
}

func (h *testHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *testHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}
