package redisx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durability is how many replicas must hold a write that must outlive its primary
// before it is acknowledged; embedded in the config of a process that makes such writes.
type Durability struct {
	Replicas string        `env:"REDIS_DURABLE_REPLICAS" default:"auto" help:"replicas that must hold a revocation or a session exchange before it is answered (Redis WAIT on the primary that took it), so a failover never brings back a revoked token or a used session id; one that they do not acknowledge within REDIS_DURABLE_TIMEOUT is answered 503 with Retry-After. auto: 0 in single mode (no WAIT: one server has no replica to fail over to), 1 in sentinel and cluster modes; a number sets it (single mode with replicas: 1)"`
	Timeout  time.Duration `env:"REDIS_DURABLE_TIMEOUT" default:"1s" help:"how long a revocation or an exchange waits for REDIS_DURABLE_REPLICAS replicas to acknowledge it (below the client's read timeout, 3s unless REDIS_URL sets read_timeout)"`
}

// ErrNotDurable means fewer replicas than required acknowledged a write in time. The write
// may or may not outlive a failover; it was not acknowledged, and Unavailable says so.
var ErrNotDurable = errors.New("redis: the write was not acknowledged by enough replicas in time")

// ReplicasFor resolves d.Replicas for mode: "auto" is 0 for a single server, 1 otherwise.
func (d Durability) ReplicasFor(mode string) (int, error) {
	if d.Replicas == "" || d.Replicas == "auto" {
		if mode == ModeSingle || mode == "" {
			return 0, nil
		}
		return 1, nil
	}
	n, err := strconv.Atoi(d.Replicas)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("REDIS_DURABLE_REPLICAS %q: want auto or a number of replicas (0 or more)", d.Replicas)
	}
	return n, nil
}

// NewDurableFor is the Durable that d describes over rdb, opened in mode: its replicas
// resolved, and its timeout checked against the client's read timeout (the WAIT's answer
// must arrive before the client gives up reading).
func NewDurableFor(rdb redis.UniversalClient, mode string, d Durability) (*Durable, error) {
	n, err := d.ReplicasFor(mode)
	if err != nil {
		return nil, err
	}
	var read time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	}
	if n > 0 && read > 0 && d.Timeout >= read {
		return nil, fmt.Errorf("REDIS_DURABLE_TIMEOUT %s: must be below the Redis client's read timeout (%s; read_timeout in REDIS_URL)", d.Timeout, read)
	}
	return NewDurable(rdb, n, d.Timeout), nil
}

// Durable sends writes that must survive the loss of the primary that took them: each
// batch goes to its primary in one pipeline, on one connection, followed by WAIT, and
// fails with ErrNotDurable unless Replicas replicas acknowledged it within Timeout.
// With Replicas 0 it is a plain pipeline.
type Durable struct {
	rdb      redis.UniversalClient
	replicas int
	timeout  time.Duration
}

// NewDurable returns a Durable over rdb.
func NewDurable(rdb redis.UniversalClient, replicas int, timeout time.Duration) *Durable {
	if timeout <= 0 {
		timeout = time.Second
	}
	return &Durable{rdb: rdb, replicas: replicas, timeout: timeout}
}

// Replicas is how many replicas a write waits for.
func (d *Durable) Replicas() int { return d.replicas }

// Client is the client d writes through.
func (d *Durable) Client() redis.UniversalClient { return d.rdb }

// Run queues the commands of fn, whose keys all live on key's primary (one hash slot, or
// a client that is not a cluster), and sends them with the WAIT. A command's own error is
// in its Cmder; Run's error is the pipeline's, or ErrNotDurable.
func (d *Durable) Run(ctx context.Context, key string, fn func(redis.Pipeliner)) error {
	return d.RunGroups(ctx, []string{key}, func(pipe redis.Pipeliner, _ []int) { fn(pipe) })
}

// RunGroups is Run for writes to several keys: fn is called once per primary with the
// indexes of keys that live there, and queues their commands; the primaries' pipelines
// run at once. The first error is returned, after every pipeline has finished.
func (d *Durable) RunGroups(ctx context.Context, keys []string, fn func(pipe redis.Pipeliner, idx []int)) error {
	cc, ok := d.rdb.(*redis.ClusterClient)
	if !ok {
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		return d.exec(ctx, d.rdb, idx, fn)
	}
	type group struct {
		node *redis.Client
		idx  []int
	}
	var groups []*group
	byNode := map[*redis.Client]*group{}
	for i, k := range keys {
		node, err := cc.MasterForKey(ctx, k)
		if err != nil {
			return err
		}
		g := byNode[node]
		if g == nil {
			g = &group{node: node}
			byNode[node] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() { errs[i] = d.exec(ctx, g.node, g.idx, fn) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil && Unavailable(err) {
		// A node's pipeline does not follow a moved slot or a failover: let the cluster
		// client learn the new map, so the next request goes to the new primary.
		cc.ReloadState(ctx)
	}
	return err
}

func (d *Durable) exec(ctx context.Context, c redis.Cmdable, idx []int, fn func(redis.Pipeliner, []int)) error {
	pipe := c.Pipeline()
	fn(pipe, idx)
	var wait *redis.IntCmd
	if d.replicas > 0 {
		wait = redis.NewIntCmd(ctx, "wait", d.replicas, d.timeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !isScriptMiss(err) {
		return err
	}
	if wait != nil {
		n, err := wait.Result()
		if err != nil {
			return err
		}
		if n < int64(d.replicas) {
			return fmt.Errorf("%w: %d of %d replicas within %s", ErrNotDurable, n, d.replicas, d.timeout)
		}
	}
	return nil
}

// isScriptMiss: a pipelined EVALSHA of a script the server does not have (a new or
// promoted primary); the caller sees it in the command and loads the script.
func isScriptMiss(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// IsScriptMiss reports whether a command failed because the server did not have the
// script (EVALSHA after a restart or a failover: the script cache is neither persisted
// nor replicated).
func IsScriptMiss(err error) bool { return isScriptMiss(err) }
