package redisx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The modes of REDIS_MODE.
const (
	ModeSingle   = "single"   // one server (a primary with or without replicas)
	ModeSentinel = "sentinel" // a primary and its replicas, watched by Redis Sentinel
	ModeCluster  = "cluster"  // Redis Cluster
)

// RedisConfig is how a process reaches Redis; the config of every process that uses Redis
// embeds it.
type RedisConfig struct {
	Mode string `env:"REDIS_MODE" default:"single" help:"single (one Redis server), sentinel (a primary and replicas watched by Redis Sentinel; failover follows the sentinels) or cluster (Redis Cluster); REDIS_URL is read in that mode's form"`
	URL  string `env:"REDIS_URL" default:"redis://127.0.0.1:6380/0" secret:"true" help:"Redis, rediss:// for TLS. single: redis://[:PASSWORD@]HOST:PORT/DB; sentinel: the sentinels, redis://[SENTINEL_USER:SENTINEL_PASSWORD@]HOST:26379/DB?master_name=NAME&addr=HOST2:26379&addr=HOST3:26379&password=PASSWORD; cluster: any of its nodes, redis://[:PASSWORD@]HOST:6379?addr=HOST2:6379&addr=HOST3:6379"`
}

// Open returns the client that c names: a *redis.Client for single and sentinel (go-redis's
// failover client, which asks the sentinels for the primary and follows a failover), a
// *redis.ClusterClient for cluster. Either is used through redis.UniversalClient.
func Open(c RedisConfig) (redis.UniversalClient, error) {
	switch c.Mode {
	case ModeSingle, "":
		o, err := redis.ParseURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL (single mode): %w", err)
		}
		return redis.NewClient(o), nil
	case ModeSentinel:
		o, err := redis.ParseFailoverURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL (sentinel mode): %w", err)
		}
		if o.MasterName == "" {
			return nil, errors.New("REDIS_URL (sentinel mode): name the primary the sentinels watch with ?master_name=NAME")
		}
		return redis.NewFailoverClient(o), nil
	case ModeCluster:
		o, err := redis.ParseClusterURL(c.URL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL (cluster mode): %w", err)
		}
		// Reads go to primaries only: a replica may not have a revocation yet.
		o.ReadOnly, o.RouteByLatency, o.RouteRandomly = false, false, false
		return redis.NewClusterClient(o), nil
	}
	return nil, fmt.Errorf("REDIS_MODE %q: want single, sentinel or cluster", c.Mode)
}

// IsCluster reports whether rdb is a Redis Cluster client: there, the keys of one
// command, script or transaction must share a hash slot.
func IsCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// Unavailable reports whether err means Redis could not take the command now (it was
// not reached, did not answer in time, has no primary for the key, is loading, is a
// replica, is out of memory under noeviction, or its replicas did not acknowledge a
// durable write): an answer is 503 and a retry may succeed. Anything else (a script's
// bug, a wrong type) is not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &ne), errors.As(err, &op), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrClosed), errors.Is(err, ErrNotDurable):
		return true
	case redis.IsClusterDownError(err), redis.IsTryAgainError(err), redis.IsLoadingError(err), redis.IsReadOnlyError(err),
		redis.IsMasterDownError(err), redis.IsNoReplicasError(err), redis.IsOOMError(err), redis.IsMaxClientsError(err):
		return true
	}
	if _, moved := redis.IsMovedError(err); moved {
		return true // a slot that moved while the client's map was old; the next try follows it
	}
	if _, ask := redis.IsAskError(err); ask {
		return true
	}
	// The failover client's own errors when no sentinel answers or none knows a primary.
	return strings.HasPrefix(err.Error(), "redis: all sentinels") || strings.Contains(err.Error(), "redis: connection pool timeout")
}
