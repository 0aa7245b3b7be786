// Command workspace-svc serves the workspace tree: folders, workbooks, reports and moves.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
	"github.com/analyticsco/platform/workspace-svc/config"
	"github.com/analyticsco/platform/workspace-svc/internal/app"
)

const serviceName = app.ServiceName

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, serviceName+":", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	proc, err := server.Start(serviceName, cfg.Common, cfg)
	if err != nil {
		return err
	}
	defer proc.Close()
	signer, err := identity.NewSigner(cfg.IdentitySigningKey)
	if err != nil {
		return err
	}
	registry := obs.NewRegistry()
	client, mongoReady, err := server.ConnectMongo(proc.Ctx, cfg.MongoURI, registry)
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	// NATS does not gate readiness: audit events it cannot take wait in the outbox, and
	// only embed viewers' requests need it (503 while it is away).
	nc, _, err := server.ConnectNATS(cfg.NATSURL, serviceName, registry)
	if err != nil {
		return err
	}
	defer nc.Drain()

	a, err := app.New(proc.Ctx, app.Deps{Mongo: client, Database: cfg.MongoDatabase, Signer: signer,
		Logger: proc.Logger, Registry: registry, NATS: nc, ViewerTimeout: cfg.EmbedViewerTimeout, IdentityTimeout: cfg.IdentityLookupTimeout, AuditMaxHeld: cfg.AuditMaxHeld,
		MaxInFlightPerAccount: cfg.MaxInFlightPerAccount,
		Limits:                cfg.Limits(), Idempotency: cfg.Settings, Checks: []server.Check{mongoReady},
		Trash: app.TrashSweep{Retention: cfg.TrashRetention, Interval: cfg.TrashSweepInterval}})
	if err != nil {
		return err
	}
	defer a.Close()
	return server.RunAll(proc.Ctx, proc.Logger, cfg.ShutdownTimeout,
		server.Listener{Name: "public", Addr: cfg.HTTPAddr, Handler: a.Handler},
		server.Listener{Name: "internal", Addr: cfg.InternalAddr, Handler: a.Internal})
}
