package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
	"github.com/analyticsco/platform/libs/identity"
)

// With PLATFORM_FAKE set the test binary is a fake process of the table (linked into a
// bin dir under every binary's name): "ready" serves /readyz 200 and /env (its
// environment) on INTERNAL_ADDR; "unready" prints lines and answers /readyz 503;
// "exit" prints a line and exits 3.
func TestMain(m *testing.M) {
	if mode := os.Getenv("PLATFORM_FAKE"); mode != "" {
		os.Exit(fake(mode))
	}
	os.Exit(m.Run())
}

func fake(mode string) int {
	name := os.Getenv("OTEL_SERVICE_NAME")
	for i := range 50 {
		fmt.Printf("%s starting, line %d\n", name, i+1)
	}
	if mode == "exit" {
		fmt.Printf("%s: cannot start: no database\n", name)
		return 3
	}
	ln, err := net.Listen("tcp", os.Getenv("INTERNAL_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if mode == "unready" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"args": os.Args[1:], "env": os.Environ(), "pid": os.Getpid()})
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Printf("%s: waiting for the database\n", name)
	<-sig
	return 0
}

// layout is a stack of two replicas of each service, two workers and two gateways on
// free ports, with fresh keys.
func layout(t *testing.T, mode string) platform.Layout {
	t.Helper()
	k, err := platform.EnsureKeys(filepath.Join(t.TempDir(), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	addr := func(name string) string {
		if addrs[name] == "" {
			addrs[name] = devstack.FreeAddr(t)
		}
		return addrs[name]
	}
	return platform.Layout{
		MongoURI: "mongodb://127.0.0.1:1", Redis: []string{"REDIS_URL=redis://127.0.0.1:1"}, Keys: k,
		NATSURL:  func(user string) string { return "nats://" + user + ":pw@127.0.0.1:1" },
		Replicas: 2, Workers: 2, Gateways: 2, Numbered: true,
		Addr: addr, InternalAddr: func(name string) string { return addr(name + "/internal") },
		Env:        []string{"PATH=" + os.Getenv("PATH"), "PLATFORM_FAKE=" + mode},
		GatewayEnv: []string{"AUTH_REVOCATION_POLL=200ms"},
		Extra:      []string{"LOG_LEVEL=warn"},
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v // later entries win, as in os/exec
	}
	return m
}

func nameList(table []platform.Proc) []string {
	var names []string
	for _, p := range table {
		names = append(names, p.Name)
	}
	return names
}

func TestTableGivesEachProcessItsNameAddressesKeysAndUpstreams(t *testing.T) {
	l := layout(t, "ready")
	table, err := platform.Table(l)
	if err != nil {
		t.Fatal(err)
	}
	names := nameList(table)
	want := []string{"workspace-svc-1", "workspace-svc-2", "embed-svc-1", "embed-svc-2", "dbtsync-svc-1", "dbtsync-svc-2",
		"dbtsync-worker-1", "dbtsync-worker-2", "gateway", "gateway-2"}
	if !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v (services, workers, then gateways)", names, want)
	}
	serviceKey := func(svc string) string {
		k, err := identity.ServiceKey(l.Keys.IdentitySigningKey, svc)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, p := range table {
		env := envMap(p.Env)
		svc, worker := p.Binary, len(p.Args) > 0
		wantKey := serviceKey(svc)
		natsUser := svc
		switch {
		case svc == "gateway":
			wantKey = l.Keys.IdentitySigningKey
		case worker:
			wantKey, natsUser = "", "dbtsync-worker"
		}
		if env["IDENTITY_SIGNING_KEY"] != wantKey {
			t.Errorf("%s: IDENTITY_SIGNING_KEY = %q, want %q", p.Name, env["IDENTITY_SIGNING_KEY"], wantKey)
		}
		if _, has := env["DBT_CREDENTIALS_KEY"]; has != (svc == "dbtsync-svc") {
			t.Errorf("%s: has DBT_CREDENTIALS_KEY = %v", p.Name, has)
		}
		if _, has := env["EMBED_KEY_ENCRYPTION_KEY"]; has != (svc == "embed-svc") {
			t.Errorf("%s: has EMBED_KEY_ENCRYPTION_KEY = %v", p.Name, has)
		}
		for k, v := range map[string]string{
			"OTEL_SERVICE_NAME": p.Name, "INTERNAL_ADDR": p.InternalAddr, "MONGODB_URI": l.MongoURI,
			"NATS_URL": l.NATSURL(natsUser), "LOG_LEVEL": "warn",
		} {
			if env[k] != v {
				t.Errorf("%s: %s = %q, want %q", p.Name, k, env[k], v)
			}
		}
		// Redis, its password in the URL, for its users only.
		if url, has := env["REDIS_URL"]; has != (svc == "gateway" || svc == "embed-svc") || (has && url != "redis://127.0.0.1:1") {
			t.Errorf("%s: REDIS_URL %q (set %v), want it for the gateway and embed-svc only", p.Name, url, has)
		}
		if p.InternalAddr == p.Addr || p.InternalAddr == "" {
			t.Errorf("%s: internal %q, public %q", p.Name, p.InternalAddr, p.Addr)
		}
	}
	gw := envMap(table[len(table)-1].Env)
	if want := "http://" + l.Addr("workspace-svc-1") + ",http://" + l.Addr("workspace-svc-2"); gw["WORKSPACE_URL"] != want {
		t.Errorf("gateway WORKSPACE_URL = %q, want every replica %q", gw["WORKSPACE_URL"], want)
	}
	if gw["AUTH_JWT_PUBLIC_KEYS_FILE"] != l.Keys.JWTPublicKeyFile || gw["OAUTH_SIGNING_KEY_FILE"] != l.Keys.OAuthSigningKeyFile || gw["AUTH_REVOCATION_POLL"] != "200ms" || gw["GATEWAY_ADDR"] != l.Addr("gateway-2") {
		t.Errorf("gateway-2 env %v", gw)
	}
}

func TestTableOfOneNamesProcessesWithoutNumbers(t *testing.T) {
	l := layout(t, "ready")
	l.Replicas, l.Workers, l.Gateways, l.Numbered = 0, 0, 0, false
	table, err := platform.Table(l)
	if err != nil {
		t.Fatal(err)
	}
	names := nameList(table)
	if want := []string{"workspace-svc", "embed-svc", "dbtsync-svc", "dbtsync-worker", "gateway"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v (make run's)", names, want)
	}
}

// startAll starts the table from bin, stopping it when the test ends.
func startAll(t *testing.T, table []platform.Proc, bin string) []*platform.Running {
	t.Helper()
	var rs []*platform.Running
	t.Cleanup(func() {
		if killed := platform.StopAll(rs, 10*time.Second); len(killed) > 0 {
			t.Errorf("killed after SIGTERM: %v", killed)
		}
	})
	for _, p := range table {
		r, err := platform.Start(p, bin, &devstack.LogBuffer{})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

type fakeState struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	PID  int      `json:"pid"`
}

func state(t *testing.T, r *platform.Running) fakeState {
	t.Helper()
	resp, err := http.Get("http://" + r.InternalAddr + "/env")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s fakeState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAStartedPlatformGetsReadyRestartsWithItsEnvironmentAndStops(t *testing.T) {
	table, err := platform.Table(layout(t, "ready"))
	if err != nil {
		t.Fatal(err)
	}
	rs := startAll(t, table, platform.FakeBinDir(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ready []string
	if err := platform.WaitReady(ctx, 30*time.Second, rs, func(r *platform.Running) { ready = append(ready, r.Name) }); err != nil {
		t.Fatal(err)
	}
	if len(ready) != len(table) {
		t.Fatalf("announced ready: %v", ready)
	}
	for _, r := range rs {
		if s := state(t, r); s.PID != r.Pid() || !slices.Equal(s.Env, r.Env) || !slices.Equal(s.Args, r.Args) {
			t.Errorf("%s runs with pid %d, args %v, env %v; want %d, %v, %v", r.Name, s.PID, s.Args, s.Env, r.Pid(), r.Args, r.Env)
		}
	}

	worker := rs[slices.IndexFunc(rs, func(r *platform.Running) bool { return r.Name == "dbtsync-worker-1" })]
	before := state(t, worker)
	if err := worker.Restart(); err == nil {
		t.Fatal("Restart of a running process succeeded")
	}
	worker.Kill()
	if gone, how := worker.Exited(); !gone || how != "signal: killed" {
		t.Fatalf("after Kill: exited %v (%s)", gone, how)
	}
	if err := worker.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := platform.WaitReady(ctx, 30*time.Second, []*platform.Running{worker}, nil); err != nil {
		t.Fatal(err)
	}
	after := state(t, worker)
	if after.PID == before.PID || after.PID != worker.Pid() {
		t.Errorf("pid %d before, %d after the restart (Pid() %d)", before.PID, after.PID, worker.Pid())
	}
	if !slices.Equal(after.Env, before.Env) || !slices.Equal(after.Args, before.Args) {
		t.Errorf("the restart changed the environment or arguments:\n%v %v\n%v %v", before.Args, before.Env, after.Args, after.Env)
	}

	if killed := platform.StopAll(rs, 10*time.Second); len(killed) > 0 {
		t.Fatalf("killed: %v", killed)
	}
	for _, r := range rs {
		if gone, how := r.Exited(); !gone || how != "exit status 0" {
			t.Errorf("%s after SIGTERM: exited %v (%s)", r.Name, gone, how)
		}
	}
}

func TestWaitReadyNamesTheProcessNotReadyWithItsLogTail(t *testing.T) {
	l := layout(t, "unready")
	l.Replicas, l.Workers, l.Gateways, l.Numbered = 1, 1, 1, false
	table, _ := platform.Table(l)
	rs := startAll(t, table[:1], platform.FakeBinDir(t))
	err := platform.WaitReady(context.Background(), time.Second, rs, nil)
	if err == nil {
		t.Fatal("a process answering 503 was ready")
	}
	msg := err.Error()
	for _, want := range []string{"not ready after 1s", "workspace-svc not ready at http://" + rs[0].InternalAddr + "/readyz (last: 503 Service Unavailable)",
		"workspace-svc: waiting for the database", "line 50"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error has no %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 10\n") {
		t.Errorf("the error has the whole output, not its tail:\n%s", msg)
	}
}

func TestWaitReadyReportsAProcessThatExitsWithItsStatusAndLogTail(t *testing.T) {
	l := layout(t, "exit")
	l.Replicas, l.Workers, l.Gateways, l.Numbered = 1, 1, 1, false
	table, _ := platform.Table(l)
	rs := startAll(t, table[1:2], platform.FakeBinDir(t))
	err := platform.WaitReady(context.Background(), time.Minute, rs, nil)
	if err == nil || !strings.Contains(err.Error(), "embed-svc exited during startup (exit status 3)") ||
		!strings.Contains(err.Error(), "embed-svc: cannot start: no database") {
		t.Fatalf("err = %v", err)
	}
}

func TestEnsureKeysCreatesPrivateFilesOnceAndReusesThem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	first, err := platform.EnsureKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := platform.EnsureKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("keys changed between two calls on one dir:\n%+v\n%+v", first, second)
	}
	secrets := first.Secrets()
	if len(secrets) != 6 || len(slices.Compact(slices.Sorted(slices.Values(secrets)))) != 6 {
		t.Errorf("secrets %v: want 6 distinct", secrets)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	// Three secrets, the bearer key pair and the gateway's OAuth key pair.
	if len(entries) != 7 {
		t.Errorf("%d files in %s, want 7", len(entries), dir)
	}
}

func TestStackFileRoundTrips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stack.json")
	want := platform.StackFile{Gateway: "http://127.0.0.1:1", JWTIssuer: platform.JWTIssuer, PIDs: map[string]int{"gateway": 7}, Metrics: map[string]string{}}
	if err := platform.WriteStackFile(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := platform.ReadStackFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Gateway != want.Gateway || got.JWTIssuer != want.JWTIssuer || got.PIDs["gateway"] != 7 {
		t.Errorf("read %+v, wrote %+v", got, want)
	}
}

// The binaries the launcher builds are a declared list, checked against the repository:
// each is a main package whose directory is named after the binary.
func TestDeclaredBinariesAreTheRepositorysMainPackages(t *testing.T) {
	root := devstack.RepoRoot(t)
	for _, b := range append(slices.Clone(platform.Stack), platform.Devstack) {
		cmd := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", b.Pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: go list %s: %v", b.Name, b.Pkg, err)
			continue
		}
		name, path, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		if name != "main" || !strings.HasSuffix(path, "/"+b.Name) {
			t.Errorf("%s: %s is package %s at %s, want a main package named after the binary", b.Name, b.Pkg, name, path)
		}
	}
}
