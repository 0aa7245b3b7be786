// Command dbtsync-svc turns dbt projects into data-model branches. `dbtsync-svc` serves
// the API; `dbtsync-svc worker` consumes the job queue, and runs `dbtsync-svc
// convert-child` for each job (internal/isolate).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/dbtsync-svc/config"
	"github.com/analyticsco/platform/dbtsync-svc/internal/app"
	"github.com/analyticsco/platform/dbtsync-svc/internal/credentials"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/isolate"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

const serviceName = "dbtsync-svc"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, serviceName+":", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	mode := "api"
	if len(args) > 0 {
		mode = args[0]
	}
	if mode == isolate.Subcommand { // a worker's child: no configuration, no connection
		isolate.Main(isolate.ChildOptions{})
	}
	if mode != "api" && mode != "worker" {
		return fmt.Errorf("unknown mode %q: run with no argument for the API or with `worker`", mode)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	name := serviceName
	if mode == "worker" {
		name = "dbtsync-worker"
	}
	proc, err := server.Start(name, cfg.Common, cfg)
	if err != nil {
		return err
	}
	defer proc.Close()
	var signer *identity.Signer
	if mode != "worker" {
		if cfg.IdentitySigningKey == "" {
			return errors.New("IDENTITY_SIGNING_KEY is required in API mode")
		}
		if signer, err = identity.NewSigner(cfg.IdentitySigningKey); err != nil {
			return err
		}
	}
	registry := obs.NewRegistry()
	client, mongoReady, err := server.ConnectMongo(proc.Ctx, cfg.MongoURI, registry)
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	nc, natsReady, err := server.ConnectNATS(cfg.NATSURL, name, registry)
	if err != nil {
		return err
	}
	defer nc.Drain()

	deps := appDeps(cfg, client.Database(cfg.MongoDatabase), nc, signer, registry, proc.Logger)
	deps.Checks = []server.Check{mongoReady, natsReady}
	var public, internal http.Handler
	if mode == "worker" {
		wait, err := startWorker(proc.Ctx, proc.Logger, deps, cfg)
		if err != nil {
			return err
		}
		defer wait()
		public, internal = app.Listeners(name, deps, nil)
	} else {
		api, err := app.NewAPI(proc.Ctx, deps)
		if err != nil {
			return err
		}
		defer api.Close()
		public, internal = api.Handler, api.Internal
	}
	return server.RunAll(proc.Ctx, proc.Logger, cfg.ShutdownTimeout,
		server.Listener{Name: "public", Addr: cfg.HTTPAddr, Handler: public},
		server.Listener{Name: "internal", Addr: cfg.InternalAddr, Handler: internal})
}

// appDeps is what both modes are built from, read from the configuration.
func appDeps(cfg config.Config, db *mongo.Database, nc *nats.Conn, signer *identity.Signer, registry *prometheus.Registry, logger *slog.Logger) app.Deps {
	return app.Deps{Mongo: db, NATS: nc, Signer: signer, CredentialsKey: cfg.CredentialsKey, Registry: registry, Logger: logger,
		Git:    cfg.GitLimits(),
		Quotas: dbtsync.StorageQuotas{Deployment: cfg.DeploymentUploads, Account: cfg.AccountUploads}, AuditMaxHeld: cfg.AuditMaxHeld,
		MaxInFlightPerAccount: cfg.MaxInFlightPerAccount,
		Replicas:              cfg.JetStreamReplicas, RetryBudget: cfg.JetStreamRetry,
		Storage: cfg.StorageLimits(), Idempotency: cfg.Settings, Selector: cfg.SelectorLimits(), MaxPushBodyBytes: cfg.PushMaxBytes, PushDedupRetention: cfg.PushDedup}
}

// startWorker runs the job consumer until ctx ends; wait waits for it to stop.
func startWorker(ctx context.Context, logger *slog.Logger, deps app.Deps, cfg config.Config) (wait func(), err error) {
	child, err := isolate.SelfCommand()
	if err != nil {
		return nil, err
	}
	opener, err := credentials.NewSealer(cfg.CredentialsKey)
	if err != nil {
		return nil, err
	}
	if !isolate.Supported {
		logger.Warn("convert children run without CPU and memory limits on this system (Linux only): a cancel or the job timeout still kills them")
	}
	limits := childLimits(cfg, server.CgroupMemoryLimit(), logger)
	logger.Info("sync jobs read and convert their input in child processes", "cpu_limit", limits.CPU, "memory_limit_bytes", limits.Memory)
	iso := &isolate.Runner{Command: child, Env: isolate.ChildEnv(os.Environ()), Limits: limits,
		Git: cfg.GitLimits().WithDefaults(), Opener: opener, Logger: logger}
	w, err := app.NewWorker(ctx, deps, worker.Options{Concurrency: cfg.WorkerConcurrency, MaxAttempts: cfg.MaxAttempts, AckWait: cfg.AckWait, JobTimeout: cfg.JobTimeout,
		Isolate: iso}, "")
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		if err := <-done; err != nil {
			logger.Error("worker", "err", err)
		}
	}, nil
}

// childLimits are the configured limits of a convert child, its memory lowered to its
// share of the worker's cgroup (80% of the limit over the jobs run at once) when the
// configured value does not fit: a child the cgroup's OOM killer stops fails as an
// internal error, one its own limit stops fails work_limit, saying so.
func childLimits(cfg config.Config, cgroup int64, logger *slog.Logger) isolate.Limits {
	l := cfg.ChildLimits().WithDefaults()
	if cgroup <= 0 {
		return l
	}
	share := cgroup / 100 * 80 / int64(max(cfg.WorkerConcurrency, 1))
	if l.Memory > share {
		logger.Warn("the convert children's memory limit does not fit the worker's cgroup; each child gets its share",
			"configured_bytes", l.Memory, "cgroup_bytes", cgroup, "concurrency", cfg.WorkerConcurrency, "share_bytes", share)
		l.Memory = share
	}
	return l
}
