package deploytest_test

import (
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/libs/natsx"
)

// natsPasswordVar is the environment variable of a NATS user's password in
// deploy/nats/platform-users.conf, compose and gen-env.sh.
func natsPasswordVar(user string) string {
	return "NATS_" + strings.ToUpper(strings.NewReplacer("-svc", "", "-", "_").Replace(user)) + "_PASSWORD"
}

// loadNATSConf parses deploy/nats/nats.conf (with platform-users.conf) as nats-server
// does, each user's password variable set to the user's name.
func loadNATSConf(t *testing.T) *server.Options {
	t.Helper()
	for _, u := range devstack.NATSUsers() {
		t.Setenv(natsPasswordVar(u.Name), "pw-"+u.Name)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(repoRoot(t), "deploy", "nats", "nats.conf"))
	if err != nil {
		t.Fatalf("deploy/nats/nats.conf: %v", err)
	}
	return opts
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The NATS users of compose and Kubernetes (deploy/nats/platform-users.conf) are the
// table the local stack and the stack tests run with (devstack.NATSUsers), whose
// denials devstack's tests prove: the same users, passwords from their variables, the
// same subjects, and no anonymous access.
func TestNATSUsersFileIsThePermissionTable(t *testing.T) {
	opts := loadNATSConf(t)
	if opts.NoAuthUser != "" || !opts.JetStream {
		t.Fatalf("nats.conf: no_auth_user %q, JetStream %v; want none and on", opts.NoAuthUser, opts.JetStream)
	}
	got := map[string]*server.User{}
	for _, u := range opts.Users {
		got[u.Username] = u
	}
	want := devstack.NATSUsers()
	if len(got) != len(want) {
		t.Errorf("platform-users.conf has %d users, the table %d", len(got), len(want))
	}
	for _, w := range want {
		u, ok := got[w.Name]
		if !ok {
			t.Errorf("platform-users.conf has no user %s", w.Name)
			continue
		}
		if u.Password != "pw-"+w.Name {
			t.Errorf("%s: password is not $%s", w.Name, natsPasswordVar(w.Name))
		}
		p, wp := u.Permissions, w.Permissions()
		if p == nil || p.Publish == nil || p.Subscribe == nil {
			t.Errorf("%s: permissions %+v, want publish and subscribe lists", w.Name, p)
			continue
		}
		if !sameSet(p.Publish.Allow, wp.Publish.Allow) || len(p.Publish.Deny) > 0 {
			t.Errorf("%s publishes %v, the table %v", w.Name, p.Publish.Allow, wp.Publish.Allow)
		}
		if !sameSet(p.Subscribe.Allow, wp.Subscribe.Allow) || len(p.Subscribe.Deny) > 0 {
			t.Errorf("%s subscribes %v, the table %v", w.Name, p.Subscribe.Allow, wp.Subscribe.Allow)
		}
		if (p.Response == nil) != (wp.Response == nil) || (p.Response != nil && *p.Response != *wp.Response) {
			t.Errorf("%s answers requests: %+v, the table %+v", w.Name, p.Response, wp.Response)
		}
	}
}

// A nats-server running deploy/nats/nats.conf refuses anonymous connections and what a
// user's subjects do not allow: the worker's credentials cannot publish another
// service's audit events, answer identity lookups, read every inbox or embed-svc's, or
// manage the jobs stream; the gateway's can answer the lookups, and the answer reaches
// embed-svc's own inbox.
func TestNATSConfRefusesTheWorkerAnotherServicesSubjects(t *testing.T) {
	opts := loadNATSConf(t)
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT, 0
	opts.StoreDir, opts.NoSigs, opts.NoLog = t.TempDir(), true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server with deploy/nats/nats.conf not ready")
	}
	addr := srv.Addr().String()
	if nc, err := nats.Connect("nats://"+addr, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("an anonymous connection was accepted")
	}
	connect := func(user string) (*nats.Conn, chan error) {
		errs := make(chan error, 16)
		nc, err := nats.Connect("nats://"+url.UserPassword(user, "pw-"+user).String()+"@"+addr, nats.NoReconnect(),
			nats.CustomInboxPrefix(natsx.InboxPrefix(user)),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc, errs
	}
	refused := func(user, what string, errs chan error) {
		t.Helper()
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("%s %s: %v, want a permissions violation", user, what, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s %s: not refused", user, what)
		}
	}
	worker, werrs := connect("dbtsync-worker")
	_ = worker.Publish("audit.events.workspace-svc", []byte("{}"))
	_ = worker.Flush()
	refused("dbtsync-worker", "publishing audit.events.workspace-svc", werrs)
	_, _ = worker.Subscribe("identity.lookup.*", func(*nats.Msg) {})
	_ = worker.Flush()
	refused("dbtsync-worker", "subscribing to identity.lookup.*", werrs)
	for _, inbox := range []string{"_INBOX.>", natsx.InboxPrefix("embed-svc") + ".>"} {
		_, _ = worker.Subscribe(inbox, func(*nats.Msg) {})
		_ = worker.Flush()
		refused("dbtsync-worker", "subscribing to "+inbox, werrs)
	}
	for _, op := range []string{"DELETE", "PURGE", "UPDATE", "CREATE"} {
		_ = worker.Publish("$JS.API.STREAM."+op+".DBTSYNC_JOBS", []byte("{}"))
		_ = worker.Flush()
		refused("dbtsync-worker", op+" of the jobs stream", werrs)
	}

	gw, gerrs := connect("gateway")
	if _, err := gw.Subscribe("identity.lookup.*", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	_ = gw.Flush()
	embed, _ := connect("embed-svc")
	if reply, err := embed.Request("identity.lookup.deployment", []byte("{}"), 10*time.Second); err != nil || string(reply.Data) != "ok" {
		t.Fatalf("embed-svc's lookup answered by the gateway: %v %v", reply, err)
	}
	select {
	case err := <-gerrs:
		t.Fatalf("the gateway answering a lookup: %v", err)
	default:
	}
}

// Compose and Kubernetes give every process its own NATS user: compose's NATS_URL names
// the process and its password variable (which the nats service reads, and gen-env.sh
// generates), and every Deployment reads a Secret key of its own.
func TestEachProcessConnectsToNATSAsItsOwnUser(t *testing.T) {
	c := loadCompose(t)
	natsSvc := c.Services["nats"]
	if !slices.Contains(natsSvc.Command, "/etc/nats/nats.conf") || !slices.Contains(natsSvc.Volumes, "./deploy/nats:/etc/nats:ro") {
		t.Errorf("compose nats: command %v, volumes %v; want deploy/nats/nats.conf", natsSvc.Command, natsSvc.Volumes)
	}
	m := loadK8s(t)
	var secret struct {
		StringData map[string]string `yaml:"stringData"`
	}
	if _, ok := m.find(t, "Secret", "platform-secrets", &secret); !ok {
		t.Fatal("no Secret platform-secrets in deploy/k8s")
	}
	keys := map[string]string{}
	for _, p := range processes {
		raw := c.Services[p.name].Environment["NATS_URL"]
		u, err := url.Parse(resolve(raw))
		if err != nil || u.User.Username() != p.name || !strings.Contains(raw, ":${"+natsPasswordVar(p.name)+":?") {
			t.Errorf("compose %s: NATS_URL %q, want its own user %s with $%s", p.name, c.Services[p.name].Environment["NATS_URL"], p.name, natsPasswordVar(p.name))
		}
		if _, ok := natsSvc.Environment[natsPasswordVar(p.name)]; !ok {
			t.Errorf("compose nats does not get %s", natsPasswordVar(p.name))
		}
		containers, ok := m.containers(t, p.name)
		if !ok {
			t.Fatalf("no Deployment %s", p.name)
		}
		for _, e := range containers[0].Env {
			if e.Name != "NATS_URL" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			key := e.ValueFrom.SecretKeyRef.Key
			if other, dup := keys[key]; dup {
				t.Errorf("k8s %s and %s share the NATS_URL key %s", other, p.name, key)
			}
			keys[key] = p.name
			if u, err := url.Parse(secret.StringData[key]); err != nil || u.User.Username() != p.name {
				t.Errorf("k8s %s: NATS_URL from %s = %q, want the user %s", p.name, key, secret.StringData[key], p.name)
			}
		}
	}
	if len(keys) != len(processes) {
		t.Errorf("k8s: %d processes read their NATS_URL from a Secret key of their own, want %d: %v", len(keys), len(processes), keys)
	}
}

// NATS monitoring has no authentication (/connz?subs=1, /subsz), so nats.conf binds it
// to the loopback only, where compose's healthcheck asks, and compose publishes no port
// of NATS: no other container, nor the host, reaches it.
func TestNATSMonitoringListensOnTheLoopbackOnly(t *testing.T) {
	opts := loadNATSConf(t)
	if opts.HTTPHost != "127.0.0.1" || opts.HTTPPort != 8222 {
		t.Errorf("nats.conf monitoring on %s:%d, want 127.0.0.1:8222", opts.HTTPHost, opts.HTTPPort)
	}
	if opts.HTTPSPort != 0 {
		t.Errorf("nats.conf serves monitoring over HTTPS on %d too", opts.HTTPSPort)
	}
	svc := loadCompose(t).Services["nats"]
	if len(svc.Ports) > 0 || len(svc.Expose) > 0 {
		t.Errorf("compose nats publishes %v, exposes %v; want none", svc.Ports, svc.Expose)
	}
	if svc.Healthcheck == nil || !strings.Contains(strings.Join(svc.Healthcheck.Test, " "), "http://127.0.0.1:8222/") {
		t.Errorf("compose nats healthcheck %v, want it on http://127.0.0.1:8222", svc.Healthcheck)
	}
}
