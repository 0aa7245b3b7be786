package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/devstack/internal/proc"
)

// NATSCluster is a JetStream cluster of nats-servers joined by routes, as deploy/k8s
// runs three: each node a child process of its own (the nats-server binary of the
// module this repository builds with), storing on its own disk, the routes
// authenticated by a user of their own (never a platform user), and every node
// holding the platform's users (NATSUsers) and the devstack's own, so a process
// connects to any node as itself. A stream of three replicas survives the loss of any
// one node.
//
// Kill is SIGKILL: the node vanishes as a crashed or lost machine does, and the others
// elect a new leader for each stream it led once their election timeout runs out (an
// in-process server cannot do that: its Shutdown hands its leaderships over first).
type NATSCluster struct {
	Nodes []*NATSNode

	name      string
	bin       string
	passwords map[string]string // by user, the same on every node
	logger    *slog.Logger
}

// NATSNode is one node of a NATSCluster.
type NATSNode struct {
	Name    string // the server's name, as stream info reports a leader
	Addr    string // its client listener, host:port
	monitor string // its monitoring listener (/healthz, /jsz)
	conf    string
	log     string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan error
}

// natsServerModule is the module whose main package is the nats-server binary.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// StartNATSCluster starts size nodes (3 for a cluster that survives a lost node) with
// JetStream under dir, and waits until JetStream's meta leader counts them all. opts
// are StartNATS's (NATSUsersOnly).
func StartNATSCluster(ctx context.Context, dir string, size int, logger *slog.Logger, opts ...NATSOption) (*NATSCluster, error) {
	if size < 1 {
		return nil, errors.New("devstack: a NATS cluster needs a node at least")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var settings NATS
	for _, o := range opts {
		o(&settings)
	}
	bin, err := natsServerBinary(ctx)
	if err != nil {
		return nil, err
	}
	c := &NATSCluster{name: "devstack-" + randomHex(4), bin: bin, logger: logger.With("component", "nats-cluster"),
		passwords: map[string]string{adminUser: randomHex(24)}}
	for _, u := range NATSUsers() {
		c.passwords[u.Name] = randomHex(24)
	}
	addrs := make([][3]string, size) // client, route, monitor
	for i := range addrs {
		for j := range addrs[i] {
			if addrs[i][j], err = freeAddr(); err != nil {
				return nil, err
			}
		}
	}
	routePass := randomHex(24)
	routes := make([]string, size)
	for i, a := range addrs {
		routes[i] = (&url.URL{Scheme: "nats-route", User: url.UserPassword("route", routePass), Host: a[1]}).String()
	}
	for i, a := range addrs {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node-%d", i+1))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, err
		}
		n := &NATSNode{Name: fmt.Sprintf("%s-%d", c.name, i+1), Addr: a[0], monitor: a[2],
			conf: filepath.Join(nodeDir, "nats.json"), log: filepath.Join(nodeDir, "nats.log")}
		conf := c.config(n, nodeDir, a[1], routePass, routes, settings.usersOnly)
		if err := os.WriteFile(n.conf, conf, 0o600); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := n.start(c.bin); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.waitFormed(ctx); err != nil {
		c.Close()
		for i, n := range c.Nodes {
			err = fmt.Errorf("%w\n%s:\n%s", err, n.Name, lastLines(c.Log(i), 20))
		}
		return nil, err
	}
	c.logger.Debug("nats cluster ready", "url", c.URL())
	return c, nil
}

// config is a node's configuration (JSON is nats-server configuration syntax): its
// listeners, its store, the cluster block with the route user and every node's route,
// and the users of NATSUsers with their permissions plus the devstack's own.
func (c *NATSCluster) config(n *NATSNode, dir, routeAddr, routePass string, routes []string, usersOnly bool) []byte {
	users := []map[string]any{{"user": adminUser, "password": c.passwords[adminUser]}}
	for _, u := range NATSUsers() {
		perms := map[string]any{"subscribe": map[string]any{"allow": u.Subscribe}}
		if len(u.Publish) > 0 {
			perms["publish"] = map[string]any{"allow": u.Publish}
		}
		if u.Responds {
			perms["allow_responses"] = true
		}
		users = append(users, map[string]any{"user": u.Name, "password": c.passwords[u.Name], "permissions": perms})
	}
	conf := map[string]any{
		"server_name": n.Name,
		"listen":      n.Addr,
		"http":        n.monitor,
		"jetstream":   map[string]any{"store_dir": filepath.Join(dir, "jetstream"), "max_file_store": JetStreamMaxStore},
		"cluster": map[string]any{"name": c.name, "listen": routeAddr, "routes": routes,
			"authorization": map[string]any{"user": "route", "password": routePass}},
		"authorization": map[string]any{"users": users},
	}
	if !usersOnly {
		conf["no_auth_user"] = adminUser
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // subjects hold '>', which the configuration parser takes only as it is
	enc.SetIndent("", "  ")
	_ = enc.Encode(conf)
	return b.Bytes()
}

// natsServerBinary builds the nats-server binary of the version this module requires
// into the user's cache directory, once per machine (concurrent test processes wait for
// one another).
func natsServerBinary(ctx context.Context) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := FindRepoRoot(wd)
	if err != nil {
		return "", err
	}
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", natsServerModule)
	list.Dir = root
	out, err := list.Output()
	version := strings.TrimSpace(string(out))
	if err != nil || version == "" {
		return "", fmt.Errorf("devstack: the version of %s: %v", natsServerModule, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "platform-tools", "nats-server-"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+".tmp", natsServerModule)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("devstack: go build %s: %v\n%s", natsServerModule, err, out)
	}
	return bin, os.Rename(bin+".tmp", bin)
}

// start runs the node's process (its output in its log file).
func (n *NATSNode) start(bin string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-c", n.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	exited, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("devstack: start nats-server %s: %w", n.Name, err)
	}
	n.cmd, n.exited = cmd, exited
	return nil
}

// running reports whether the node's process runs.
func (n *NATSNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// jsz is what the cluster's readiness needs of a node's /jsz.
type jsz struct {
	Meta *struct {
		Leader string `json:"leader"`
		Size   int    `json:"cluster_size"`
	} `json:"meta_cluster"`
}

// state reads the node's meta leader and cluster size (/jsz) and whether it is healthy
// (/healthz: JetStream current, its streams and consumers caught up).
func (n *NATSNode) state(ctx context.Context) (leader string, size int, healthy bool) {
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.monitor+path, nil)
		return http.DefaultClient.Do(req)
	}
	if resp, err := get("/healthz"); err == nil {
		healthy = resp.StatusCode == http.StatusOK
		resp.Body.Close()
	}
	resp, err := get("/jsz")
	if err != nil {
		return "", 0, healthy
	}
	defer resp.Body.Close()
	var j jsz
	if json.NewDecoder(resp.Body).Decode(&j) != nil || j.Meta == nil {
		return "", 0, healthy
	}
	return j.Meta.Leader, j.Meta.Size, healthy
}

// waitFormed waits until every running node is healthy and the meta leader counts every
// node: a cluster whose peers have not all joined cannot elect a new leader when it
// loses the one it has.
func (c *NATSCluster) waitFormed(ctx context.Context) error {
	var last string
	for {
		healthy, running, sized := 0, 0, 0
		for _, n := range c.Nodes {
			if !n.running() {
				continue
			}
			running++
			leader, size, ok := n.state(ctx)
			if ok {
				healthy++
			}
			if leader != "" && size == len(c.Nodes) {
				sized++
			}
		}
		if healthy == running && sized == running {
			return nil
		}
		last = fmt.Sprintf("%d of %d running nodes healthy, %d see a meta leader of %d peers", healthy, running, sized, len(c.Nodes))
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: NATS cluster not formed: %s: %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URL lists every node's URL for the devstack's own user (which may do anything),
// comma-separated: nats.Connect takes the list and reconnects to another node when its
// own goes.
func (c *NATSCluster) URL() string { return c.UserURL(adminUser) }

// UserURL lists every node's URL for a user of NATSUsers, comma-separated.
func (c *NATSCluster) UserURL(user string) string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = "nats://" + url.UserPassword(user, c.passwords[user]).String() + "@" + n.Addr
	}
	return strings.Join(urls, ",")
}

// Node is the index of the node named name (a server name, as stream info reports a
// leader), or -1.
func (c *NATSCluster) Node(name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// StreamLeader is the node that leads stream (-1 while it has none), asked as the
// devstack's user. A stream without a leader does not answer: the question waits at
// most 2 s, then fails.
func (c *NATSCluster) StreamLeader(ctx context.Context, stream string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	nc, err := nats.Connect(c.URL(), nats.Name("devstack-cluster-admin"), nats.Timeout(time.Second))
	if err != nil {
		return -1, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return -1, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1, err
	}
	if info := s.CachedInfo(); info.Cluster != nil {
		return c.Node(info.Cluster.Leader), nil
	}
	return -1, nil
}

// Kill sends SIGKILL to node i and waits for it to exit: its clients lose their
// connection, its peers their routes, and nothing is handed over.
func (c *NATSCluster) Kill(i int) {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// Restart starts node i again with its store, and waits until the cluster is whole
// again (the node caught up).
func (c *NATSCluster) Restart(ctx context.Context, i int) error {
	if c.Nodes[i].running() {
		return fmt.Errorf("devstack: NATS node %s is running", c.Nodes[i].Name)
	}
	if err := c.Nodes[i].start(c.bin); err != nil {
		return err
	}
	return c.waitFormed(ctx)
}

// Close stops every node; idempotent.
func (c *NATSCluster) Close() {
	for _, n := range c.Nodes {
		n.mu.Lock()
		if n.cmd != nil {
			_ = proc.Stop(n.cmd, n.exited, syscall.SIGTERM, 10*time.Second, "nats-server "+n.Name)
			n.cmd = nil
		}
		n.mu.Unlock()
	}
}

// Log is what node i's nats-server printed (for a failing test's report).
func (c *NATSCluster) Log(i int) string {
	b, _ := os.ReadFile(c.Nodes[i].log)
	return string(b)
}
