package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
)

// gatewayInfo is a running gateway whose three upstreams are the bench backend,
// and the credentials of acme's admin from `platformctl seed`.
type gatewayInfo struct {
	URL          string
	Proc         *Proc
	DeploymentID int64
	Bearer       string
	APIKey       string
	// pprof is the gateway's profiling address when -gateway-pprof is set.
	pprof string
}

var gatewayPprof = flag.String("gateway-pprof", "", "directory to write the gateway's CPU profile of each measured run of its rows (cpu-N.pprof, merge them with go tool pprof) and its allocation profile (allocs.pprof) into")

// Gateway starts the identity store (FerretDB behind the serializing proxy),
// bin/gateway and seeds the store with bin/platformctl.
func (e *Env) Gateway(ctx context.Context) (gatewayInfo, error) {
	return memo(e, "gateway", func() (gatewayInfo, error) {
		be, err := e.Backend(ctx)
		if err != nil {
			return gatewayInfo{}, err
		}
		gwBin := filepath.Join(e.BinDir, platform.Gateway.Name)
		for _, b := range []string{gwBin, filepath.Join(e.BinDir, platform.Platformctl.Name)} {
			if _, err := os.Stat(b); err != nil {
				return gatewayInfo{}, fmt.Errorf("%s missing: run `make build` first (or pass -bin)", b)
			}
		}
		mongo, err := devstack.StartMongo(ctx, filepath.Join(e.Dir, "mongo"), e.Log)
		if err != nil {
			return gatewayInfo{}, err
		}
		e.addCloser(mongo.Close)
		var redis, extra []string
		// The gateway may keep embed-session revocations in Redis; give it one when
		// redis-server is installed (make bench installs it).
		if rdb, err := devstack.StartRedis(ctx, filepath.Join(e.Dir, "redis"), "", e.Log); err == nil {
			e.addCloser(rdb.Close)
			redis = []string{"REDIS_URL=" + rdb.URL}
		} else if !errors.Is(err, devstack.ErrRedisNotInstalled) {
			return gatewayInfo{}, err
		}
		keys, err := platform.EnsureKeys(filepath.Join(e.Dir, "keys"))
		if err != nil {
			return gatewayInfo{}, err
		}
		addr, err := freeAddr()
		if err != nil {
			return gatewayInfo{}, err
		}
		internal, err := freeAddr()
		if err != nil {
			return gatewayInfo{}, err
		}
		var pprofAddr string
		if *gatewayPprof != "" {
			if pprofAddr, err = freeAddr(); err != nil {
				return gatewayInfo{}, err
			}
			extra = append(extra, "PPROF_ADDR="+pprofAddr)
		}
		// The gateway of the launcher's table, alone, in front of the backend.
		l := platform.Layout{
			MongoURI: mongo.URI, Redis: redis, Keys: keys,
			NATSURL:   func(string) string { return "nats://127.0.0.1:1" }, // nothing the rows measure uses NATS
			Upstreams: map[string]string{"workspace-svc": be.URL, "embed-svc": be.URL, "dbtsync-svc": be.URL},
			Addr:      func(string) string { return addr }, InternalAddr: func(string) string { return internal },
			Env: childEnv("MONGODB_DATABASE=identity", "LOG_LEVEL=warn",
				// (e) measures authentication by API key, like (d) by bearer token: the
				// generate-session rate limit (a Redis round trip, and 429s at this rate) is off.
				// The account budgets are on, each request spending its account's in Redis as in
				// production, with quotas no row reaches.
				"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_PLAN_FREE=1000000000/1m",
				"RATE_LIMIT_PLAN_PREMIUM=1000000000/1m", "RATE_LIMIT_PLAN_ENTERPRISE=1000000000/1m"),
			Extra: extra,
		}
		table, err := platform.Table(l)
		if err != nil {
			return gatewayInfo{}, err
		}
		gwProc := table[0]
		gwProc.Binary = gwBin
		c, err := e.start(gwProc)
		if err != nil {
			return gatewayInfo{}, err
		}
		if err := waitReady(ctx, c); err != nil {
			return gatewayInfo{}, err
		}
		gw, err := seedGateway(ctx, e, l, "http://"+addr, c)
		gw.pprof = pprofAddr
		return gw, err
	})
}

// profileRuns numbers the gateway's CPU profiles.
var profileRuns atomic.Int64

// profile, with -gateway-pprof, records the gateway's CPU for the run about to start
// (d long; nothing for the probe, d 0) and its allocations so far, in the background.
func (gw gatewayInfo) profile(ctx context.Context, d time.Duration) error {
	if gw.pprof == "" || d <= 0 {
		return nil
	}
	if err := os.MkdirAll(*gatewayPprof, 0o755); err != nil {
		return err
	}
	n := profileRuns.Add(1)
	go func() {
		secs := max(int(d/time.Second), 1)
		fetchProfile(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", gw.pprof, secs), filepath.Join(*gatewayPprof, fmt.Sprintf("cpu-%d.pprof", n)))
		fetchProfile(ctx, "http://"+gw.pprof+"/debug/pprof/allocs", filepath.Join(*gatewayPprof, "allocs.pprof"))
	}()
	return nil
}

func fetchProfile(ctx context.Context, url, path string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		logf("profile %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		logf("profile %s: %s %v", url, resp.Status, err)
		return
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		logf("profile %s: %v", path, err)
	}
}

// seedGateway seeds the identity store with platformctl and returns acme's admin
// credentials and first deployment, which every gateway row uses.
func seedGateway(ctx context.Context, e *Env, l platform.Layout, gwURL string, c *platform.Running) (gatewayInfo, error) {
	// Never read the local stack's .data/stack.json.
	env := l.PlatformctlEnv(childEnv(), gwURL, filepath.Join(e.Dir, "no-stack.json"))
	seed, err := runSeed(ctx, filepath.Join(e.BinDir, platform.Platformctl.Name), e.Dir, env)
	if err != nil {
		return gatewayInfo{}, err
	}
	acme, ok := seed.Accounts["acme"]
	if !ok || len(acme.Deployments) == 0 || acme.Users["admin"].Bearer == "" || acme.APIKeys["admin"] == "" {
		return gatewayInfo{}, errors.New("platformctl seed: no acme deployment, admin bearer or admin API key in its output")
	}
	return gatewayInfo{
		URL:          gwURL,
		Proc:         singleProc("gateway", c.Pid()),
		DeploymentID: acme.Deployments[0].ID,
		Bearer:       acme.Users["admin"].Bearer,
		APIKey:       acme.APIKeys["admin"],
	}, nil
}

func runSeed(ctx context.Context, bin, dir string, env []string) (devstack.Seed, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "seed", "--json")
	cmd.Env = env
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return devstack.Seed{}, fmt.Errorf("platformctl seed: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var out devstack.Seed
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return out, fmt.Errorf("platformctl seed output: %w", err)
	}
	return out, nil
}
