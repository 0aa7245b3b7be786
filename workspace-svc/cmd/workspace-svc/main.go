// Command workspace-svc serves the workspace tree: folders, workbooks, reports and moves.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
	"github.com/analyticsco/platform/workspace-svc/config"
)

const serviceName = "workspace-svc"

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
	client, err := mongox.Connect(proc.Ctx, cfg.MongoURI, nil)
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()

	api := http.NewServeMux()
	api.HandleFunc("/", server.NotFound)

	h := server.Handler(server.Options{
		Service:  serviceName,
		Logger:   proc.Logger,
		Registry: obs.NewRegistry(),
		API:      identity.Require(signer, api),
		Checks:   []server.Check{{Name: "mongodb", Check: mongox.Ping(client)}},
	})
	return server.Run(proc.Ctx, proc.Logger, cfg.HTTPAddr, h, cfg.ShutdownTimeout)
}
