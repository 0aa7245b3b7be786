// Command dbtsync-svc turns dbt projects into data-model branches. `dbtsync-svc` serves
// the API; `dbtsync-svc worker` consumes the job queue.
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
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/jetstream"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
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
	client, err := mongox.ConnectWithMetrics(proc.Ctx, cfg.MongoURI, nil, mongox.NewMetrics(registry))
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	natsMetrics := natsx.NewMetrics(registry)
	nc, err := nats.Connect(cfg.NATSURL, append(natsMetrics.Options(), nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return fmt.Errorf("NATS_URL: %w", err)
	}
	defer nc.Drain()
	natsMetrics.Track(nc)

	deps := appDeps(cfg, client.Database(cfg.MongoDatabase), nc, signer, registry, proc.Logger)
	var handler http.Handler = http.HandlerFunc(server.NotFound)
	if mode == "worker" {
		wait, err := startWorker(proc.Ctx, proc.Logger, deps, cfg)
		if err != nil {
			return err
		}
		defer wait()
	} else {
		api, err := app.NewAPI(proc.Ctx, deps)
		if err != nil {
			return err
		}
		defer api.Close()
		handler = api.Handler
	}
	o := server.Options{Service: name, Logger: proc.Logger, Registry: registry, API: handler,
		Checks: []server.Check{{Name: "mongodb", Check: mongox.Ping(client)}, {Name: "nats", Check: natsConnected(nc)}}}
	return server.RunAll(proc.Ctx, proc.Logger, cfg.ShutdownTimeout,
		server.Listener{Name: "public", Addr: cfg.HTTPAddr, Handler: server.Handler(o)},
		server.Listener{Name: "internal", Addr: cfg.InternalAddr, Handler: server.Internal(o)})
}

// appDeps is what both modes are built from, read from the configuration.
func appDeps(cfg config.Config, db *mongo.Database, nc *nats.Conn, signer *identity.Signer, registry *prometheus.Registry, logger *slog.Logger) app.Deps {
	return app.Deps{Mongo: db, NATS: nc, Signer: signer, CredentialsKey: cfg.CredentialsKey, Registry: registry, Logger: logger,
		Git:    cfg.GitLimits(),
		Quotas: dbtsync.StorageQuotas{Deployment: cfg.DeploymentUploads, Account: cfg.AccountUploads}, AuditMaxHeld: cfg.AuditMaxHeld,
		Replicas: cfg.JetStreamReplicas, RetryBudget: cfg.JetStreamRetry,
		Storage: jetstream.Limits{JobRetention: cfg.JobRetention, ObjectMaxAge: cfg.ObjectMaxAge, ObjectMaxBytes: cfg.ObjectMaxBytes,
			MaxQueuedJobs: cfg.MaxQueuedJobs, MaxRunningJobs: cfg.MaxRunningJobs}}
}

// startWorker runs the job consumer until ctx ends; wait waits for it to stop.
func startWorker(ctx context.Context, logger *slog.Logger, deps app.Deps, cfg config.Config) (wait func(), err error) {
	w, err := app.NewWorker(ctx, deps, worker.Options{Concurrency: cfg.WorkerConcurrency, MaxAttempts: cfg.MaxAttempts, AckWait: cfg.AckWait, JobTimeout: cfg.JobTimeout}, "")
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

// natsConnected is the readiness check of the NATS connection.
func natsConnected(nc *nats.Conn) func(context.Context) error {
	return func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("not connected (%s)", nc.Status())
		}
		return nil
	}
}
