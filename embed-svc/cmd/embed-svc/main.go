// Command embed-svc mints, exchanges, verifies and revokes embed sessions.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/embed-svc/config"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/server"
)

const serviceName = "embed-svc"

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
	ropts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	nc, err := nats.Connect(cfg.NATSURL, nats.Name(serviceName), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return fmt.Errorf("NATS_URL: %w", err)
	}
	defer nc.Drain()

	api := http.NewServeMux()
	api.HandleFunc("/", server.NotFound)

	h := server.Handler(server.Options{
		Service:  serviceName,
		Logger:   proc.Logger,
		Registry: obs.NewRegistry(),
		API:      identity.Require(signer, api),
		Checks: []server.Check{
			{Name: "mongodb", Check: mongox.Ping(client)},
			{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
			{Name: "nats", Check: func(context.Context) error { return natsConnected(nc) }},
		},
	})
	return server.Run(proc.Ctx, proc.Logger, cfg.HTTPAddr, h, cfg.ShutdownTimeout)
}

func natsConnected(nc *nats.Conn) error {
	if !nc.IsConnected() {
		return fmt.Errorf("not connected (%s)", nc.Status())
	}
	return nil
}
