package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack/freeport"
)

// RedisCluster is a Redis Cluster of redis-server children on 127.0.0.1 (random ports),
// made by `redis-cli --cluster create`: primaries, each with its replicas. Nodes keep
// their cluster state (nodes.conf) and an append-only file in their own directory, so a
// node killed and started again rejoins the cluster.
type RedisCluster struct {
	Nodes []*Redis
	// URL is REDIS_URL for REDIS_MODE=cluster: the first node, every other as addr=.
	URL string

	replicasEach int
}

// RedisClusterConfig configures StartRedisCluster.
type RedisClusterConfig struct {
	Dir          string
	Primaries    int           // default 3 (the fewest Redis Cluster accepts)
	ReplicasEach int           // replicas of each primary; default 0
	NodeTimeout  time.Duration // cluster-node-timeout: how long a silent primary takes to be failed over; default 2s
	Logger       *slog.Logger
}

// StartRedisCluster starts the nodes, creates the cluster and waits until every slot is
// served and every replica is in sync. On error nothing is left running.
func StartRedisCluster(ctx context.Context, c RedisClusterConfig) (_ *RedisCluster, err error) {
	if c.Primaries == 0 {
		c.Primaries = 3
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = 2 * time.Second
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, ErrRedisNotInstalled
	}
	rc := &RedisCluster{replicasEach: c.ReplicasEach}
	defer func() {
		if err != nil {
			rc.Close()
		}
	}()
	password := randomHex(16) // one for the cluster: clients, and nodes among them
	args := serverArgs(replicaSync("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(c.NodeTimeout.Milliseconds(), 10),
		// A slot range without a primary stops only its own keys, not the whole cluster.
		"--cluster-require-full-coverage", "no")...)
	var addrs []string
	for i := range c.Primaries * (1 + c.ReplicasEach) {
		// The bus port is claimed too (by default it is the port plus 10000, which
		// nothing reserves), and kept across the node's restarts: the others know it.
		bus, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		_, busPort, _ := net.SplitHostPort(bus)
		nodeArgs := func(dir, host, port string) []string {
			return append(args(dir, host, port), "--cluster-port", busPort)
		}
		n, err := startRedisWith(ctx, filepath.Join(c.Dir, fmt.Sprintf("node-%d", i+1)), "", c.Logger, nodeArgs, password)
		if err != nil {
			return nil, err
		}
		rc.Nodes = append(rc.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	create := exec.CommandContext(ctx, "redis-cli", append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", strconv.Itoa(c.ReplicasEach), "--cluster-yes")...)
	create.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
	if out, err := create.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("devstack: redis-cli --cluster create: %v\n%s", err, out)
	}
	q := url.Values{}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	rc.URL = "redis://" + rc.Nodes[0].userinfo() + addrs[0] + "?" + q.Encode()
	if err := rc.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	return rc, nil
}

// WaitHealthy waits until every node runs, every one of them sees every slot served
// (cluster_state:ok) and every primary has all its replicas in sync.
func (rc *RedisCluster) WaitHealthy(ctx context.Context) error {
	return pollUntil(ctx, 60*time.Second, "redis cluster healthy", func(ctx context.Context) (bool, string) {
		for _, n := range rc.Nodes {
			if n.Pid() == 0 {
				return false, n.Addr + " is not running"
			}
			info, err := infoOf(ctx, n.Addr, n.Password, "cluster")
			if err != nil || info["cluster_state"] != "ok" {
				return false, fmt.Sprintf("%s: cluster_state %q (%v)", n.Addr, info["cluster_state"], err)
			}
		}
		primaries, err := rc.Primaries(ctx)
		if err != nil {
			return false, err.Error()
		}
		if want := len(rc.Nodes) / (1 + rc.replicasEach); len(primaries) != want {
			return false, fmt.Sprintf("%d primaries, want %d", len(primaries), want)
		}
		for _, p := range primaries {
			if ok, why := replicasInSync(ctx, p.Addr, p.Password, rc.replicasEach); !ok {
				return false, why
			}
		}
		return true, ""
	})
}

// WaitFailover waits, after a primary was killed, until a replica has taken its place:
// every running node sees every slot served and there are as many running primaries as
// the cluster was made with.
func (rc *RedisCluster) WaitFailover(ctx context.Context) error {
	return pollUntil(ctx, 60*time.Second, "redis cluster failover", func(ctx context.Context) (bool, string) {
		for _, n := range rc.Nodes {
			if n.Pid() == 0 {
				continue
			}
			info, err := infoOf(ctx, n.Addr, n.Password, "cluster")
			if err != nil || info["cluster_state"] != "ok" {
				return false, fmt.Sprintf("%s: cluster_state %q (%v)", n.Addr, info["cluster_state"], err)
			}
		}
		primaries, err := rc.Primaries(ctx)
		if err != nil {
			return false, err.Error()
		}
		want := len(rc.Nodes) / (1 + rc.replicasEach)
		return len(primaries) == want, fmt.Sprintf("%d running primaries, want %d", len(primaries), want)
	})
}

// Primaries are the running nodes that are primaries now.
func (rc *RedisCluster) Primaries(ctx context.Context) ([]*Redis, error) {
	var out []*Redis
	for _, n := range rc.Nodes {
		if n.Pid() == 0 {
			continue
		}
		info, err := infoOf(ctx, n.Addr, n.Password, "replication")
		if err != nil {
			return nil, err
		}
		if info["role"] == "master" {
			out = append(out, n)
		}
	}
	return out, nil
}

// Close stops every node; idempotent.
func (rc *RedisCluster) Close() {
	for _, n := range rc.Nodes {
		_ = n.Close()
	}
}

// RedisSentinel is a primary with replicas, all redis-server children, watched by
// redis-sentinel children, on 127.0.0.1 (random ports).
type RedisSentinel struct {
	Servers   []*Redis // the data nodes; Servers[0] was the first primary
	Sentinels []*Redis
	Master    string // the name the sentinels know the primary by
	// URL is REDIS_URL for REDIS_MODE=sentinel: the sentinels and the primary's name.
	URL string
}

// RedisSentinelConfig configures StartRedisSentinel.
type RedisSentinelConfig struct {
	Dir       string
	Replicas  int           // default 2
	Sentinels int           // default 3; the quorum is a majority of them
	DownAfter time.Duration // down-after-milliseconds: how long a silent primary takes to be failed over; default 2s
	Logger    *slog.Logger
}

// StartRedisSentinel starts the primary, its replicas and the sentinels, and waits
// until the replicas are in sync and every sentinel knows the replicas and the other
// sentinels. On error nothing is left running.
func StartRedisSentinel(ctx context.Context, c RedisSentinelConfig) (_ *RedisSentinel, err error) {
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	if c.Sentinels == 0 {
		c.Sentinels = 3
	}
	if c.DownAfter == 0 {
		c.DownAfter = 2 * time.Second
	}
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		return nil, errors.New("redis-sentinel not found: install it with `apt-get install -y redis-sentinel`")
	}
	rs := &RedisSentinel{Master: "platform"}
	// One password for the group: the servers' (clients, replicas with their primary),
	// the sentinels' own, and what the sentinels give the servers and one another.
	password := randomHex(16)
	defer func() {
		if err != nil {
			rs.Close()
		}
	}()
	primary, err := startRedisWith(ctx, filepath.Join(c.Dir, "server-1"), "", c.Logger, serverArgs(replicaSync()...), password)
	if err != nil {
		return nil, err
	}
	rs.Servers = append(rs.Servers, primary)
	host, port, _ := net.SplitHostPort(primary.Addr)
	for i := range c.Replicas {
		r, err := startRedisWith(ctx, filepath.Join(c.Dir, fmt.Sprintf("server-%d", i+2)), "", c.Logger, serverArgs(replicaSync("--replicaof", host, port)...), password)
		if err != nil {
			return nil, err
		}
		rs.Servers = append(rs.Servers, r)
	}
	if err := pollUntil(ctx, 60*time.Second, "replicas in sync", func(ctx context.Context) (bool, string) {
		return replicasInSync(ctx, primary.Addr, primary.Password, c.Replicas)
	}); err != nil {
		return nil, err
	}
	q := url.Values{"master_name": {rs.Master}}
	for i := range c.Sentinels {
		s, err := startRedisWith(ctx, filepath.Join(c.Dir, fmt.Sprintf("sentinel-%d", i+1)), "", c.Logger,
			sentinelArgs(rs.Master, primary.Addr, password, c.Sentinels/2+1, c.DownAfter), password)
		if err != nil {
			return nil, err
		}
		rs.Sentinels = append(rs.Sentinels, s)
		if i > 0 {
			q.Add("addr", s.Addr)
		}
	}
	// The sentinels' password as the URL's, the servers' as password=.
	q.Set("password", password)
	rs.URL = "redis://" + rs.Sentinels[0].userinfo() + rs.Sentinels[0].Addr + "/0?" + q.Encode()
	if err := rs.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	return rs, nil
}

// replicaSync is the settings of a server with replicas, then extra: a replica (a new one,
// or a primary back as one) is sent the data at once, not after the default 5 s wait for
// others to sync with.
func replicaSync(extra ...string) []string {
	return append([]string{"--repl-diskless-sync-delay", "0"}, extra...)
}

// sentinelArgs is a redis-sentinel's command line: its configuration file (which the
// sentinel rewrites as it learns; written on the first start only) in its directory,
// with the password it gives the servers and the other sentinels.
func sentinelArgs(master, primary, password string, quorum int, downAfter time.Duration) redisArgs {
	return func(dir, host, port string) []string {
		conf := filepath.Join(dir, "sentinel.conf")
		if _, err := os.Stat(conf); err != nil {
			ph, pp, _ := net.SplitHostPort(primary)
			ms := strconv.FormatInt(downAfter.Milliseconds(), 10)
			text := strings.Join([]string{
				fmt.Sprintf("sentinel monitor %s %s %s %d", master, ph, pp, quorum),
				fmt.Sprintf("sentinel down-after-milliseconds %s %s", master, ms),
				// A failover that stalls is retried after this long.
				fmt.Sprintf("sentinel failover-timeout %s %d", master, 3*downAfter.Milliseconds()),
				fmt.Sprintf("sentinel parallel-syncs %s 1", master),
				fmt.Sprintf("sentinel auth-pass %s %s", master, password),
				"sentinel sentinel-pass " + password,
			}, "\n") + "\n"
			_ = os.WriteFile(conf, []byte(text), 0o644)
		}
		return []string{"redis-sentinel", conf, "--bind", host, "--port", port, "--dir", dir,
			"--daemonize", "no", "--logfile", "", "--loglevel", "warning"}
	}
}

// WaitHealthy waits until every server and sentinel runs, the primary has every other
// server as a replica in sync, and every sentinel names that primary and knows all the
// replicas and the other sentinels.
func (rs *RedisSentinel) WaitHealthy(ctx context.Context) error {
	return pollUntil(ctx, 60*time.Second, "sentinel group healthy", func(ctx context.Context) (bool, string) {
		for _, n := range append(append([]*Redis{}, rs.Servers...), rs.Sentinels...) {
			if n.Pid() == 0 {
				return false, n.Addr + " is not running"
			}
		}
		primary, err := rs.Primary(ctx)
		if err != nil {
			return false, err.Error()
		}
		if ok, why := replicasInSync(ctx, primary.Addr, primary.Password, len(rs.Servers)-1); !ok {
			return false, why
		}
		for _, s := range rs.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Password: s.Password, MaxRetries: -1})
			m, err := c.Master(ctx, rs.Master).Result()
			_ = c.Close()
			if err != nil {
				return false, fmt.Sprintf("sentinel %s: %v", s.Addr, err)
			}
			addr := net.JoinHostPort(m["ip"], m["port"])
			if addr != primary.Addr || m["num-slaves"] != strconv.Itoa(len(rs.Servers)-1) ||
				m["num-other-sentinels"] != strconv.Itoa(len(rs.Sentinels)-1) || m["flags"] != "master" {
				return false, fmt.Sprintf("sentinel %s sees primary %s (flags %s), %s replicas, %s other sentinels",
					s.Addr, addr, m["flags"], m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return true, ""
	})
}

// WaitFailover waits, after the primary was killed, until the sentinels name a running
// server that has become the primary.
func (rs *RedisSentinel) WaitFailover(ctx context.Context) error {
	return pollUntil(ctx, 60*time.Second, "sentinel failover", func(ctx context.Context) (bool, string) {
		if _, err := rs.Primary(ctx); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// Rejoin starts a server that was stopped or killed as a replica of the current primary,
// as a server's start script asks the sentinels whom to follow (started as it was, an
// old primary would serve as one until the sentinels noticed and demoted it).
func (rs *RedisSentinel) Rejoin(ctx context.Context, n *Redis) error {
	primary, err := rs.Primary(ctx)
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(primary.Addr)
	n.mu.Lock()
	n.args = serverArgs(replicaSync("--replicaof", host, port)...)
	n.mu.Unlock()
	return n.Start(ctx)
}

// Primary is the server the sentinels name as the primary, once it says it is one.
func (rs *RedisSentinel) Primary(ctx context.Context) (*Redis, error) {
	for _, s := range rs.Sentinels {
		if s.Pid() == 0 {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Password: s.Password, MaxRetries: -1})
		addr, err := c.GetMasterAddrByName(ctx, rs.Master).Result()
		_ = c.Close()
		if err != nil || len(addr) != 2 {
			continue
		}
		for _, n := range rs.Servers {
			if n.Addr != net.JoinHostPort(addr[0], addr[1]) || n.Pid() == 0 {
				continue
			}
			if info, err := infoOf(ctx, n.Addr, n.Password, "replication"); err == nil && info["role"] == "master" {
				return n, nil
			}
		}
		return nil, fmt.Errorf("the sentinels name %s:%s, which is not a running primary", addr[0], addr[1])
	}
	return nil, errors.New("no sentinel names a primary")
}

// Close stops the sentinels, then the servers; idempotent.
func (rs *RedisSentinel) Close() {
	for _, n := range append(append([]*Redis{}, rs.Sentinels...), rs.Servers...) {
		_ = n.Close()
	}
}

// infoOf is INFO section of the server at addr, as a map; section "cluster" is CLUSTER
// INFO.
func infoOf(ctx context.Context, addr, password, section string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	var raw string
	var err error
	if section == "cluster" {
		raw, err = c.ClusterInfo(ctx).Result()
	} else {
		raw, err = c.Info(ctx, section).Result()
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(raw, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// replicasInSync reports whether the primary at addr (AUTH password) has want replicas
// online.
func replicasInSync(ctx context.Context, addr, password string, want int) (bool, string) {
	info, err := infoOf(ctx, addr, password, "replication")
	if err != nil {
		return false, fmt.Sprintf("%s: %v", addr, err)
	}
	online := 0
	for i := range want + 2 {
		if strings.Contains(info[fmt.Sprintf("slave%d", i)], "state=online") {
			online++
		}
	}
	if info["role"] != "master" || online < want {
		return false, fmt.Sprintf("%s: role %s, %d of %d replicas online", addr, info["role"], online, want)
	}
	return true, ""
}

// pollUntil polls cond every 50 ms until it holds, within d and ctx.
func pollUntil(ctx context.Context, d time.Duration, what string, cond func(context.Context) (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: %s: not within %s: %s", what, d, why)
		case <-tick.C:
		}
	}
}

// RedisClusterForTest starts a Redis Cluster for the test (c.Dir and c.Logger are the
// test's own), stopped in t.Cleanup. It fails the test on error; it never skips.
func RedisClusterForTest(t testing.TB, c RedisClusterConfig) *RedisCluster {
	t.Helper()
	c.Dir, c.Logger = filepath.Join(t.TempDir(), "redis-cluster"), testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	rc, err := StartRedisCluster(ctx, c)
	if err != nil {
		t.Fatalf("start a Redis Cluster: %v", err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// RedisSentinelForTest starts a Sentinel group for the test, stopped in t.Cleanup. It
// fails the test on error; it never skips.
func RedisSentinelForTest(t testing.TB, c RedisSentinelConfig) *RedisSentinel {
	t.Helper()
	c.Dir, c.Logger = filepath.Join(t.TempDir(), "redis-sentinel"), testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	rs, err := StartRedisSentinel(ctx, c)
	if err != nil {
		t.Fatalf("start a Redis Sentinel group: %v", err)
	}
	t.Cleanup(rs.Close)
	return rs
}
