// Package redisx is how every process that talks to Redis (the gateway's revocation
// checks and rate limits, embed-svc's sessions) reaches it: one setting chooses a single
// server, Sentinel or Redis Cluster (Open), writes that must outlive their primary wait
// for its replicas (Durable), failures that a retry may cure are told apart
// (Unavailable), and commands and errors are counted for Prometheus (Metrics).
package redisx

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Metrics is a redis.Hook that feeds redis_client_commands_total{command} and
// redis_client_errors_total{command}. A reply of "no such key" (redis.Nil) is an answer,
// not an error.
type Metrics struct {
	commands *prometheus.CounterVec
	errors   *prometheus.CounterVec
}

// NewMetrics registers the counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redis_client_commands_total",
			Help: "Redis commands sent by this process, by command (pipelines count each command)."}, []string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redis_client_errors_total",
			Help: "Redis commands of this process that failed (unreachable, timed out, refused), by command."}, []string{"command"}),
	}
	reg.MustRegister(m.commands, m.errors)
	// Series at zero from the start, so the error ratio is defined before the first error.
	m.errors.WithLabelValues("other")
	return m
}

// Instrument adds the hook to c and returns c. On a cluster client the hook goes on
// each node's client, where every command arrives once, the durable writes that
// Durable sends to a primary directly included.
func (m *Metrics) Instrument(c redis.UniversalClient) redis.UniversalClient {
	if cc, ok := c.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(m) })
		return c
	}
	c.AddHook(m)
	return c
}

// knownCommands bound the command label: commands are named in code, but anything
// unexpected is "other" so a new call site cannot grow the series without a review.
var knownCommands = map[string]bool{
	"get": true, "set": true, "setnx": true, "del": true, "exists": true, "expire": true, "pexpire": true,
	"incr": true, "incrby": true, "eval": true, "evalsha": true, "script": true, "getdel": true, "ttl": true,
	"pttl": true, "mget": true, "hget": true, "hset": true, "hgetall": true, "hdel": true, "zadd": true,
	"zrem": true, "zrange": true, "zremrangebyscore": true, "zcard": true, "scan": true, "ping": true,
	"info": true, "config": true, "multi": true, "exec": true, "publish": true, "sadd": true, "srem": true,
	"smembers": true, "sismember": true, "keys": true, "unlink": true, "hello": true, "client": true,
	"wait": true, "cluster": true, "sentinel": true, "readonly": true,
}

// CommandLabel is a command's name as a label: one of knownCommands, or "other".
func CommandLabel(name string) string {
	name = strings.ToLower(name)
	if knownCommands[name] {
		return name
	}
	return "other"
}

// observe counts cmd with its outcome err: go-redis sets a command's error only after
// the hooks have returned, so the hook passes the error it got.
func (m *Metrics) observe(cmd redis.Cmder, err error) {
	name := CommandLabel(cmd.Name())
	m.commands.WithLabelValues(name).Inc()
	if err != nil && !errors.Is(err, redis.Nil) {
		m.errors.WithLabelValues(name).Inc()
	}
}

// DialHook passes dials through: a failed dial shows as the command's error.
func (m *Metrics) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

// ProcessHook counts one command.
func (m *Metrics) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		m.observe(cmd, err)
		return err
	}
}

// ProcessPipelineHook counts each command of a pipeline.
func (m *Metrics) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			cerr := c.Err()
			if cerr == nil {
				cerr = err // a pipeline that failed as a whole may leave its commands without one
			}
			m.observe(c, cerr)
		}
		return err
	}
}
