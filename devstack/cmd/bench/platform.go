package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/platform"
)

// platformInfo is the whole platform run by bin/devstack (FerretDB behind the
// serializing proxy and NATS inside the devstack process, PostgreSQL, redis-server and every
// service as its own process), seeded with bin/platformctl.
type platformInfo struct {
	Gateway string
	// Procs are the platform's processes in a fixed order (devstack first, then the
	// services, the gateway and redis-server), for peak RSS and CPU.
	Procs []*Proc
	// All sums every process of the platform: the CPU of a request is spread over
	// the gateway, a service, the database and Redis.
	All *Proc
	// Metrics are the processes' metrics URLs (their internal listeners), by name,
	// from stack.json.
	Metrics map[string]string
	// PIDs are the processes by name, as stack.json lists them plus "devstack".
	PIDs  map[string]int
	Seed  devstack.Seed
	Redis string // redis URL, for INFO
	Mongo string // MongoDB URI (the proxy in front of FerretDB), for serverStatus
	// Postgres is the URL of the PostgreSQL database under FerretDB ("" on SQLite), for
	// pg_stat_statements.
	Postgres string
}

// platformProcesses are the processes whose RSS and metrics are reported, in
// print order; the address variable is the one devstack reads for each.
var platformProcesses = []struct{ name, addrVar string }{
	{"gateway", "GATEWAY_ADDR"},
	{"workspace-svc", "WORKSPACE_ADDR"},
	{"embed-svc", "EMBED_ADDR"},
	{"dbtsync-svc", "DBTSYNC_ADDR"},
	{"dbtsync-worker", "DBTSYNC_WORKER_ADDR"},
}

// Platform starts bin/devstack on free ports with its data in the temp dir,
// waits for its stack.json (written once every process answers /readyz) and
// seeds it. Rate limits are off: the bench mints thousands of sessions from one
// key and one address on purpose.
func (e *Env) Platform(ctx context.Context) (platformInfo, error) {
	return e.platformWith(ctx, "platform")
}

// platformWith is Platform for another stack of its own, named key (its data dir), with
// extra environment for devstack (DEVSTACK_MONGO_ENGINE and the like).
func (e *Env) platformWith(ctx context.Context, key string, extraEnv ...string) (platformInfo, error) {
	return memo(e, key, func() (platformInfo, error) {
		for _, b := range append(slices.Clone(platform.Stack), platform.Devstack) {
			if _, err := os.Stat(filepath.Join(e.BinDir, b.Name)); err != nil {
				return platformInfo{}, fmt.Errorf("%s missing: run `make build` first (or pass -bin)", filepath.Join(e.BinDir, b.Name))
			}
		}
		dataDir := filepath.Join(e.Dir, key)
		c, err := e.startDevstack(ctx, key, dataDir, extraEnv)
		if err != nil {
			return platformInfo{}, err
		}
		// A stopped (SIGSTOP) child would not act on devstack's SIGTERM; continue
		// every process of the platform before it is asked to stop.
		e.beforeStop(func() {
			if sf, err := platform.ReadStackFile(filepath.Join(dataDir, "stack.json")); err == nil {
				for _, pid := range sf.PIDs {
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
			}
		})
		stackPath := filepath.Join(dataDir, "stack.json")
		sf, err := platform.ReadStackFile(stackPath)
		if err != nil {
			return platformInfo{}, err
		}
		seed, err := runSeed(ctx, filepath.Join(e.BinDir, platform.Platformctl.Name), e.Dir, childEnv("PLATFORM_STACK_FILE="+stackPath))
		if err != nil {
			return platformInfo{}, err
		}
		if err := checkSeed(seed); err != nil {
			return platformInfo{}, err
		}
		pids := map[string]int{"devstack": c.Pid()}
		for name, pid := range sf.PIDs {
			pids[name] = pid
		}
		info := platformInfo{Gateway: sf.Gateway, Metrics: sf.Metrics, PIDs: pids, Seed: seed, Redis: sf.RedisURL, Mongo: sf.MongoDBURI,
			Postgres: sf.PostgresURL}
		info.Procs = append(info.Procs, singleProc("devstack (FerretDB+proxy+NATS)", c.Pid()))
		if pid, ok := sf.PIDs["postgres"]; ok {
			// The postmaster and its backends (one per FerretDB connection), found anew
			// before and after every round.
			info.Procs = append(info.Procs, &Proc{Label: "postgres", PIDs: func() []int { return append(childrenOf(pid), pid) }})
		}
		for _, p := range platformProcesses {
			if pid, ok := sf.PIDs[p.name]; ok {
				info.Procs = append(info.Procs, singleProc(p.name, pid))
			}
		}
		if pid, ok := sf.PIDs["redis"]; ok {
			info.Procs = append(info.Procs, singleProc("redis-server", pid))
		}
		all := make([]int, 0, len(pids))
		for name, pid := range pids {
			if name != "postgres" {
				all = append(all, pid)
			}
		}
		slices.Sort(all)
		pgPID := sf.PIDs["postgres"]
		info.All = &Proc{Label: "platform", PIDs: func() []int {
			if pgPID == 0 {
				return all
			}
			return append(append(slices.Clone(all), pgPID), childrenOf(pgPID)...)
		}}
		return info, nil
	})
}

// startDevstack starts bin/devstack with its data in dataDir and waits for its
// stack.json. Its ports are free when chosen, but another process may bind one before
// devstack does (an outgoing connection's source port): on "address already in use" it
// starts again, on new ports and a fresh dataDir, up to three times.
func (e *Env) startDevstack(ctx context.Context, key, dataDir string, extraEnv []string) (*platform.Running, error) {
	for attempt := 1; ; attempt++ {
		envVars := []string{
			"DATA_DIR=" + dataDir, "BIN_DIR=" + e.BinDir,
			"LOG_LEVEL=warn",
			"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0",
			// The bench records thousands of audit events of one account a minute on purpose.
			"AUDIT_ACCOUNT_MAX_EVENTS=0",
		}
		for _, v := range []string{"DEVSTACK_MONGO_ADDR", "DEVSTACK_NATS_ADDR", "DEVSTACK_REDIS_ADDR", "GATEWAY_INTERNAL_ADDR",
			"WORKSPACE_INTERNAL_ADDR", "EMBED_INTERNAL_ADDR", "DBTSYNC_INTERNAL_ADDR", "DBTSYNC_WORKER_INTERNAL_ADDR"} {
			a, err := freeAddr()
			if err != nil {
				return nil, err
			}
			envVars = append(envVars, v+"="+a)
		}
		for _, p := range platformProcesses {
			a, err := freeAddr()
			if err != nil {
				return nil, err
			}
			envVars = append(envVars, p.addrVar+"="+a)
		}
		c, err := e.start(platform.Proc{Name: fmt.Sprintf("%s-%d", key, attempt), Binary: filepath.Join(e.BinDir, platform.Devstack.Name),
			Env: childEnv(append(envVars, extraEnv...)...)})
		if err != nil {
			return nil, err
		}
		_, err = waitStackJSON(ctx, c, filepath.Join(dataDir, "stack.json"))
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
		c.Stop(5 * time.Second)
		logf("%s: a port was taken before devstack bound it; starting again", key)
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, err
		}
	}
}

// check wants what the scenarios use: acme's two deployments, admin bearer and
// account key, and globex's deployment, admin bearer and key (for the soak).
func checkSeed(s devstack.Seed) error {
	acme, globex := s.Accounts["acme"], s.Accounts["globex"]
	switch {
	case len(acme.Deployments) < 2 || acme.Users["admin"].Bearer == "" || acme.APIKeys["admin"] == "":
		return errors.New("platformctl seed: acme needs two deployments, an admin bearer and an admin API key")
	case len(globex.Deployments) < 1 || globex.Users["admin"].Bearer == "" || globex.APIKeys["admin"] == "":
		return errors.New("platformctl seed: globex needs a deployment, an admin bearer and an admin API key")
	}
	return nil
}

// waitStackJSON polls for devstack's stack.json, which it writes (by rename) once
// every process is ready, failing when devstack exits or 90 s pass.
func waitStackJSON(ctx context.Context, c *platform.Running, path string) (platform.StackFile, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		if gone, how := c.Exited(); gone {
			return platform.StackFile{}, fmt.Errorf("devstack exited (%s) before it was ready; its output:\n%s", how, c.Tail())
		}
		if sf, err := platform.ReadStackFile(path); err == nil && sf.Gateway != "" {
			return sf, nil
		}
		select {
		case <-ctx.Done():
			return platform.StackFile{}, fmt.Errorf("devstack not ready (no %s); its output:\n%s", path, c.Tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pauseProcess stops (SIGSTOP) or continues (SIGCONT) a platform process.
func pauseProcess(pid int, pause bool) error {
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	return syscall.Kill(pid, sig)
}
