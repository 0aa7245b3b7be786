package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/platform"
	"github.com/analyticsco/platform/libs/identity"
)

// With DEVSTACK_FAKE_SERVICE=1 the test binary is a fake service: the runner
// tests link it into BIN_DIR under each service's name, so the runner's
// process handling is tested without the real services.
func TestMain(m *testing.M) {
	if os.Getenv("DEVSTACK_FAKE_SERVICE") == "1" {
		os.Exit(fakeService())
	}
	code := m.Run()
	platform.RemoveBinDir()
	os.Exit(code)
}

// fakeService serves /healthz, /env (its args and env) and /die (exit 3) on
// HTTP_ADDR (GATEWAY_ADDR for the gateway), and /readyz and /metrics only on
// INTERNAL_ADDR, as the real services do; SIGTERM exits 0.
func fakeService() int {
	name := os.Getenv("OTEL_SERVICE_NAME")
	addr := os.Getenv("HTTP_ADDR")
	if name == "gateway" {
		addr = os.Getenv("GATEWAY_ADDR")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 1
	}
	iln, err := net.Listen("tcp", os.Getenv("INTERNAL_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake internal:", err)
		return 1
	}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	internal := http.NewServeMux()
	internal.HandleFunc("/readyz", ok)
	internal.HandleFunc("/metrics", ok)
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"args": os.Args[1:], "env": env})
	})
	mux.HandleFunc("/die", func(http.ResponseWriter, *http.Request) { os.Exit(3) })
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { _ = http.Serve(ln, mux) }()
	go func() { _ = http.Serve(iln, internal) }()
	fmt.Printf("fake %s listening on %s\n", name, addr)
	<-sig
	return 0
}

func fakeEnv(ctx context.Context, t *testing.T, addr string) (args []string, env map[string]string) {
	t.Helper()
	code, body, err := getStatus(ctx, "http://"+addr+"/env")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s/env: %d %v", addr, code, err)
	}
	var got struct {
		Args []string          `json:"args"`
		Env  map[string]string `json:"env"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	return got.Args, got.Env
}

func TestRunnerWithFakeServices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tools := platform.BinDir(t, platform.Devstack)
	bin := platform.FakeBinDir(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	a := freshAddrs(t)

	r := startRunner(t, filepath.Join(tools, "devstack"), bin, dataDir, a, "DEVSTACK_FAKE_SERVICE=1")
	r.waitReady(ctx)
	s := r.stack()

	t.Run("stack.json describes the stack", func(t *testing.T) {
		if want := "http://" + a.Gateway; s.Gateway != want {
			t.Errorf("gateway = %q, want %q", s.Gateway, want)
		}
		for field, v := range map[string]string{"mongodbUri": s.MongoDBURI, "natsUrl": s.NATSURL, "redisUrl": s.RedisURL} {
			if u, err := url.Parse(v); err != nil || u.Hostname() != "127.0.0.1" {
				t.Errorf("%s = %q, want a 127.0.0.1 URL", field, v)
			}
		}
		if s.JWTIssuer != "https://auth.platform.local" || s.JWTAudience != "platform-api" {
			t.Errorf("issuer, audience = %q, %q", s.JWTIssuer, s.JWTAudience)
		}
		for _, f := range []string{s.JWTPrivateKeyFile, s.IdentitySigningKeyFile} {
			if !filepath.IsAbs(f) {
				t.Errorf("key file %q is not absolute", f)
			}
		}
		for _, name := range []string{"workspace-svc", "embed-svc", "dbtsync-svc", "dbtsync-worker", "gateway", "redis"} {
			if s.PIDs[name] == 0 {
				t.Errorf("pids has no %s: %v", name, s.PIDs)
			}
		}
		// Every service's metrics URL is on its internal listener, which answers it, and
		// is not its public address.
		public := map[string]string{"workspace-svc": a.Workspace, "embed-svc": a.Embed, "dbtsync-svc": a.DBTSync, "dbtsync-worker": a.Worker, "gateway": a.Gateway}
		for name, addr := range public {
			u := s.Metrics[name]
			if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/metrics") || strings.Contains(u, addr) {
				t.Errorf("metrics[%s] = %q (public address %s)", name, u, addr)
				continue
			}
			resp, err := http.Get(u)
			if err != nil {
				t.Errorf("metrics[%s]: %v", name, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("metrics[%s]: %d", name, resp.StatusCode)
			}
		}
	})

	t.Run("keys are 0600 files", func(t *testing.T) {
		for _, f := range []string{"identity.key", "dbt-secrets.key", "embed-keys.key", "bearer-ed25519.pem", "bearer-ed25519.pub.pem"} {
			fi, err := os.Stat(filepath.Join(dataDir, "keys", f))
			if err != nil {
				t.Error(err)
				continue
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v, want 0600", f, fi.Mode().Perm())
			}
		}
	})

	t.Run("every service gets its environment", func(t *testing.T) {
		raw, err := os.ReadFile(s.IdentitySigningKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		gatewayKey := strings.TrimSpace(string(raw))
		serviceKey := func(svc string) string {
			k, err := identity.ServiceKey(gatewayKey, svc)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		common := map[string]string{
			"MONGODB_URI": s.MongoDBURI, "LOG_LEVEL": "info",
		}
		cases := []struct {
			name, addr string
			args       []string
			env        map[string]string
		}{
			// Each service holds only its own identity key, the gateway the key they derive from.
			{"workspace-svc", a.Workspace, nil, map[string]string{"HTTP_ADDR": a.Workspace, "IDENTITY_SIGNING_KEY": serviceKey("workspace-svc")}},
			{"embed-svc", a.Embed, nil, map[string]string{"HTTP_ADDR": a.Embed, "IDENTITY_SIGNING_KEY": serviceKey("embed-svc"), "REDIS_URL": s.RedisURL}},
			{"dbtsync-svc", a.DBTSync, nil, map[string]string{"HTTP_ADDR": a.DBTSync, "IDENTITY_SIGNING_KEY": serviceKey("dbtsync-svc")}},
			{"dbtsync-worker", a.Worker, []string{"worker"}, map[string]string{"HTTP_ADDR": a.Worker}},
			{"gateway", a.Gateway, nil, map[string]string{
				"IDENTITY_SIGNING_KEY": gatewayKey, "REDIS_URL": s.RedisURL,
				"GATEWAY_ADDR": a.Gateway, "WORKSPACE_URL": "http://" + a.Workspace, "EMBED_URL": "http://" + a.Embed,
				"DBTSYNC_URL": "http://" + a.DBTSync, "AUTH_JWT_PUBLIC_KEYS_FILE": filepath.Join(dataDir, "keys", "bearer-ed25519.pub.pem"),
				"AUTH_JWT_ISSUER": "https://auth.platform.local", "AUTH_JWT_AUDIENCE": "platform-api",
			}},
		}
		for _, tc := range cases {
			args, env := fakeEnv(ctx, t, tc.addr)
			if strings.Join(args, " ") != strings.Join(tc.args, " ") {
				t.Errorf("%s: args %v, want %v", tc.name, args, tc.args)
			}
			want := map[string]string{"OTEL_SERVICE_NAME": tc.name}
			for k, v := range common {
				want[k] = v
			}
			if tc.name == "dbtsync-worker" {
				// The worker runs untrusted repositories: it never gets an identity key.
				if v, ok := env["IDENTITY_SIGNING_KEY"]; ok {
					t.Errorf("dbtsync-worker: IDENTITY_SIGNING_KEY = %q, want it unset", v)
				}
			}
			for k, v := range tc.env {
				want[k] = v
			}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("%s: %s = %q, want %q", tc.name, k, env[k], v)
				}
			}
			// Each process connects to NATS as its own user (devstack.NATSUsers), never as
			// another's.
			if u, err := url.Parse(env["NATS_URL"]); err != nil || u.User.Username() != tc.name || !strings.Contains(u.Host, "127.0.0.1:") {
				t.Errorf("%s: NATS_URL = %q, want its own user %s", tc.name, env["NATS_URL"], tc.name)
			}
			// Only the gateway and embed-svc reach Redis, its password in REDIS_URL.
			if _, hasRedis := env["REDIS_URL"]; hasRedis != (tc.name == "gateway" || tc.name == "embed-svc") {
				t.Errorf("%s: has REDIS_URL = %v", tc.name, hasRedis)
			}
			_, hasDBTKey := env["DBT_CREDENTIALS_KEY"]
			if wantKey := strings.HasPrefix(tc.name, "dbtsync"); hasDBTKey != wantKey {
				t.Errorf("%s: has DBT_CREDENTIALS_KEY = %v, want %v", tc.name, hasDBTKey, wantKey)
			}
		}
		// stack.json's URL, what platformctl connects with, is platformctl's user.
		if u, err := url.Parse(s.NATSURL); err != nil || u.User.Username() != "platformctl" {
			t.Errorf("stack.json natsUrl = %q, want platformctl's user", s.NATSURL)
		}
	})

	t.Run("child output is prefixed with its name", func(t *testing.T) {
		for _, line := range []string{"[workspace-svc] fake workspace-svc listening", "[gateway] fake gateway listening", "[devstack] ready: gateway http://" + a.Gateway + "\n"} {
			if !r.out.contains(line) {
				t.Errorf("output has no %q", line)
			}
		}
	})

	identity, _ := os.ReadFile(s.IdentitySigningKeyFile)
	if code := r.stop(60 * time.Second); code != 0 {
		t.Fatalf("devstack exit code after SIGTERM = %d, want 0", code)
	}
	assertGone(t, s.PIDs)
	if _, err := os.Stat(filepath.Join(dataDir, "stack.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stack.json still there after exit: %v", err)
	}

	t.Run("a dying service is restarted, saying so, and the stack stays up; keys are reused", func(t *testing.T) {
		a := freshAddrs(t)
		r := startRunner(t, filepath.Join(tools, "devstack"), bin, dataDir, a, "DEVSTACK_FAKE_SERVICE=1")
		r.waitReady(ctx)
		s := r.stack()
		if again, _ := os.ReadFile(s.IdentitySigningKeyFile); string(again) != string(identity) {
			t.Errorf("identity key changed between runs on one DATA_DIR")
		}
		_, _, _ = getStatus(ctx, "http://"+a.Embed+"/die")
		const restarted = "[devstack] embed-svc exited (exit status 3); restarted it after 1s as pid "
		for deadline := time.Now().Add(30 * time.Second); !r.out.contains(restarted); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("output does not say embed-svc exited and was restarted (%q)", restarted)
			}
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if code, _, _ := getStatus(ctx, "http://"+a.Embed+"/healthz"); code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the restarted embed-svc does not answer")
			}
		}
		// The worker killed from outside (as by the OOM killer) comes back too.
		if err := syscall.Kill(s.PIDs["dbtsync-worker"], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		const workerBack = "[devstack] dbtsync-worker exited (signal: killed); restarted it after 1s as pid "
		for deadline := time.Now().Add(30 * time.Second); !r.out.contains(workerBack); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("output does not say the killed worker was restarted (%q)", workerBack)
			}
		}
		// stack.json names the processes that run now, for the tools that signal them.
		now := r.stack()
		if now.PIDs["dbtsync-worker"] == s.PIDs["dbtsync-worker"] || now.PIDs["embed-svc"] == s.PIDs["embed-svc"] {
			t.Errorf("stack.json keeps the pids of processes that exited: worker %d (was %d), embed-svc %d (was %d)",
				now.PIDs["dbtsync-worker"], s.PIDs["dbtsync-worker"], now.PIDs["embed-svc"], s.PIDs["embed-svc"])
		} else if err := syscall.Kill(now.PIDs["dbtsync-worker"], 0); err != nil {
			t.Errorf("stack.json's worker pid %d does not run: %v", now.PIDs["dbtsync-worker"], err)
		}
		select {
		case <-r.exited:
			t.Fatalf("devstack exited after a service died: %v", r.err)
		default:
		}
		if code := r.stop(60 * time.Second); code != 0 {
			t.Errorf("devstack exit code after SIGTERM = %d, want 0", code)
		}
		assertGone(t, now.PIDs)
	})
}
