// Command workspace-svc serves the workspace tree: folders, workbooks, reports and moves.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
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
	client, err := mongox.ConnectWithMetrics(proc.Ctx, cfg.MongoURI, nil, mongox.NewMetrics(registry))
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()

	nc, err := nats.Connect(cfg.NATSURL, nats.Name(serviceName), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return fmt.Errorf("NATS_URL: %w", err)
	}
	defer nc.Drain()

	a, err := app.New(proc.Ctx, app.Deps{Mongo: client, Database: cfg.MongoDatabase, Signer: signer,
		Logger: proc.Logger, Registry: registry, NATS: nc, AuditMaxHeld: cfg.AuditMaxHeld,
		Limits: cfg.Limits()})
	if err != nil {
		return err
	}
	return server.RunAll(proc.Ctx, proc.Logger, cfg.ShutdownTimeout,
		server.Listener{Name: "public", Addr: cfg.HTTPAddr, Handler: a.Handler},
		server.Listener{Name: "internal", Addr: cfg.InternalAddr, Handler: a.Internal})
}
