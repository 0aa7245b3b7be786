package redisx_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/libs/redisx"
)

func TestOpenChoosesTheClientOfTheMode(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     redisx.RedisConfig
		cluster bool
		wantErr string
	}{
		{"single", redisx.RedisConfig{Mode: "single", URL: "redis://:pw@127.0.0.1:6380/2"}, false, ""},
		{"single-is-the-default", redisx.RedisConfig{URL: "redis://127.0.0.1:6380/0"}, false, ""},
		{"sentinel", redisx.RedisConfig{Mode: "sentinel", URL: "redis://127.0.0.1:26379/0?master_name=platform&addr=127.0.0.1:26380&password=pw"}, false, ""},
		{"sentinel-needs-the-primary-name", redisx.RedisConfig{Mode: "sentinel", URL: "redis://127.0.0.1:26379/0"}, false, "master_name"},
		{"cluster", redisx.RedisConfig{Mode: "cluster", URL: "redis://:pw@127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002"}, true, ""},
		{"cluster-url-checked", redisx.RedisConfig{Mode: "cluster", URL: "redis://127.0.0.1:7000?frobnicate=1"}, false, "cluster mode"},
		{"unknown-mode", redisx.RedisConfig{Mode: "ring", URL: "redis://127.0.0.1:6380/0"}, false, "REDIS_MODE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb, err := redisx.Open(c.cfg)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("want an error naming %q, got %v", c.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			if got := redisx.IsCluster(rdb); got != c.cluster {
				t.Errorf("IsCluster = %v, want %v", got, c.cluster)
			}
		})
	}
}

func TestDurableReplicasDefaultToNoneOnlyForASingleServer(t *testing.T) {
	for _, c := range []struct {
		replicas, mode string
		want           int
		wantErr        bool
	}{
		{"auto", "single", 0, false}, {"", "single", 0, false}, {"auto", "sentinel", 1, false}, {"auto", "cluster", 1, false},
		{"0", "cluster", 0, false}, {"2", "sentinel", 2, false}, {"1", "single", 1, false},
		{"-1", "single", 0, true}, {"many", "cluster", 0, true},
	} {
		got, err := redisx.Durability{Replicas: c.replicas}.ReplicasFor(c.mode)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("REDIS_DURABLE_REPLICAS=%q in %s mode: %d, %v; want %d (error %v)", c.replicas, c.mode, got, err, c.want, c.wantErr)
		}
	}
}

func TestUnavailableTellsFailuresARetryMayCureFromBugs(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{io.EOF, true},
		{fmt.Errorf("pipeline: %w", io.ErrUnexpectedEOF), true},
		{redisx.ErrNotDurable, true},
		{redis.ErrClosed, true},
		{redisError("CLUSTERDOWN The cluster is down"), true},
		{redisError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{redisError("LOADING Redis is loading the dataset in memory"), true},
		{redisError("READONLY You can't write against a read only replica."), true},
		{redisError("MASTERDOWN Link with MASTER is down"), true},
		{redisError("MOVED 3999 127.0.0.1:6381"), true},
		{redisError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{errors.New("redis: all sentinels specified in configuration are unreachable"), true},
		{redis.Nil, false},
		{redisError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{redisError("ERR Error running script: attempt to compare nil with number"), false},
		{redisError("CROSSSLOT Keys in request don't hash to the same slot"), false},
		{nil, false},
	} {
		if got := redisx.Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// redisError is an error reply as go-redis returns it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (e redisError) RedisError()   {}
