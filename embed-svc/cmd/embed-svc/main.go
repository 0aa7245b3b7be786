// Command embed-svc mints, exchanges, verifies and revokes embed sessions.
//
//	embed-svc                      serve the API
//	embed-svc rotate-keys          publish a new signing key; it signs after EMBED_KEY_PUBLISH_DELAY
//	embed-svc revoke-key --kid KID withdraw a compromised signing key now: its tokens are
//	                               refused at once, a replacement signs from now
//	embed-svc account-settings --account ID [--allow-ai=true|false|inherit] ...
//	                               set an account's account-wide embed settings
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
	_ "time/tzdata" // timezone settings are checked against the IANA database in any image

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/embed-svc/config"
	"github.com/analyticsco/platform/embed-svc/internal/app"
	"github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/store/mongostore"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/obs"
	"github.com/analyticsco/platform/libs/redisx"
	"github.com/analyticsco/platform/libs/server"
)

const serviceName = "embed-svc"

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "rotate-keys":
		err = rotateKeys()
	case len(os.Args) > 1 && os.Args[1] == "revoke-key":
		err = revokeKey(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "account-settings":
		err = accountSettings(os.Args[2:])
	case len(os.Args) > 1:
		err = fmt.Errorf("unknown command %q (commands: rotate-keys, revoke-key, account-settings)", os.Args[1])
	default:
		err = run()
	}
	if err != nil {
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
	rdb, redisReady, durable, err := openRedis(cfg, registry)
	if err != nil {
		return err
	}
	defer rdb.Close()
	nc, natsReady, err := server.ConnectNATS(cfg.NATSURL, serviceName, registry)
	if err != nil {
		return err
	}
	defer nc.Drain()

	d := deps(cfg, proc, registry, signer, client, rdb, nc)
	d.RedisDurable = durable
	d.Checks = []server.Check{mongoReady, redisReady, natsReady}
	a, err := app.New(proc.Ctx, d)
	if err != nil {
		return err
	}
	return server.RunAll(proc.Ctx, proc.Logger, cfg.ShutdownTimeout,
		server.Listener{Name: "public", Addr: cfg.HTTPAddr, Handler: a.Handler},
		server.Listener{Name: "internal", Addr: cfg.InternalAddr, Handler: a.Internal})
}

// openRedis opens the Redis that cfg names, with its metrics on reg and its readiness
// check, and the durable writer of exchanges and revocations over it.
func openRedis(cfg config.Config, reg prometheus.Registerer) (redis.UniversalClient, server.Check, *redisx.Durable, error) {
	rdb, ready, err := server.OpenRedis(cfg.RedisConfig, reg)
	if err != nil {
		return nil, server.Check{}, nil, err
	}
	durable, err := redisx.NewDurableFor(rdb, cfg.Mode, cfg.Durability)
	if err != nil {
		_ = rdb.Close()
		return nil, server.Check{}, nil, err
	}
	return rdb, ready, durable, nil
}

// command is what each subcommand starts from: the configuration, a deadline of a minute
// and a connection to its MongoDB, made through the bootstrap like the server's, with its
// metrics on the command's own registry (reg, discarded when it ends); close disconnects.
type command struct {
	cfg    config.Config
	ctx    context.Context
	reg    *prometheus.Registry
	client *mongo.Client
	close  func()
}

func startCommand() (*command, error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	reg := prometheus.NewRegistry()
	client, _, err := server.ConnectMongo(ctx, cfg.MongoURI, reg)
	if err != nil {
		cancel()
		return nil, err
	}
	return &command{cfg: cfg, ctx: ctx, reg: reg, client: client, close: func() {
		_ = client.Disconnect(context.Background())
		cancel()
	}}, nil
}

// deps is the configuration and the connections as the service's wiring takes them.
func deps(cfg config.Config, proc *server.Process, registry *prometheus.Registry, signer *identity.Signer, client *mongo.Client, rdb redis.UniversalClient, nc *nats.Conn) app.Deps {
	return app.Deps{
		Logger: proc.Logger, Registry: registry, Signer: signer, Mongo: client, Database: cfg.MongoDatabase,
		Redis: rdb, NATS: nc, KeyEncryptionKey: cfg.KeyEncryptionKey, TokenIssuer: cfg.TokenIssuer,
		KeyPublishDelay: cfg.KeyPublishDelay, KeyRefresh: cfg.KeyRefresh, BranchTimeout: cfg.BranchResolveTimeout, ReachTimeout: cfg.DashboardReachTimeout,
		IdentityTimeout:       cfg.IdentityLookupTimeout,
		Limits:                cfg.Limits(),
		MaxInFlightPerAccount: cfg.MaxInFlightPerAccount,
		SessionRetention:      cfg.SessionRetention,
		Idempotency:           cfg.Settings,
		Webhooks:              cfg.Webhooks(),
		Delivery: app.WebhookDelivery{Stored: audit.StoredLimits{MaxAge: cfg.WebhookStreamMaxAge, MaxBytes: int64(cfg.WebhookStreamMaxBytes), Replicas: cfg.AuditStreamReplicas},
			MaxQueuedBytes: int64(cfg.WebhookMaxQueuedBytes), Workers: cfg.WebhookWorkers, MaxInFlight: cfg.WebhookMaxInFlight,
			AttemptTimeout: cfg.WebhookAttemptTimeout, FirstRetry: cfg.WebhookFirstRetry, DisableAfter: cfg.WebhookDisableAfter},
		Audit: app.AuditDeps{Database: cfg.AuditDatabase, Retention: cfg.AuditRetention, MaxHeld: cfg.AuditMaxHeld,
			AccountMax: cfg.AuditAccountMax, AccountWindow: cfg.AuditAccountWindow,
			Stream: publish.StreamLimits{MaxBytes: int64(cfg.AuditStreamMaxBytes), MaxAge: cfg.AuditStreamMaxAge, Replicas: cfg.AuditStreamReplicas}},
	}
}

func rotateKeys() error {
	c, err := startCommand()
	if err != nil {
		return err
	}
	defer c.close()
	cfg, ctx, client := c.cfg, c.ctx, c.client
	kr, err := app.NewKeyring(client.Database(cfg.MongoDatabase), app.Deps{KeyEncryptionKey: cfg.KeyEncryptionKey, KeyPublishDelay: cfg.KeyPublishDelay})
	if err != nil {
		return err
	}
	if err := kr.Ensure(ctx); err != nil {
		return err
	}
	kid, err := kr.Rotate(ctx)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"kid": kid, "signsFrom": time.Now().Add(cfg.KeyPublishDelay).UTC().Format(time.RFC3339),
	})
}

func revokeKey(args []string) error {
	fs := flag.NewFlagSet("revoke-key", flag.ContinueOnError)
	kid := fs.String("kid", "", "id of the signing key to withdraw (the JWKS kid)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kid == "" {
		return fmt.Errorf("revoke-key: --kid is required")
	}
	c, err := startCommand()
	if err != nil {
		return err
	}
	defer c.close()
	cfg, ctx, client := c.cfg, c.ctx, c.client
	rdb, _, durable, err := openRedis(cfg, c.reg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	kr, err := app.NewKeyring(client.Database(cfg.MongoDatabase), app.Deps{KeyEncryptionKey: cfg.KeyEncryptionKey, KeyPublishDelay: cfg.KeyPublishDelay})
	if err != nil {
		return err
	}
	replacement, err := app.RevokeSigningKey(ctx, kr, durable, *kid)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"revoked": *kid, "replacement": replacement})
}

// triState parses "true", "false" or "inherit" into a setting.
type triState struct{ v **bool }

func (t triState) String() string { return "" }
func (t triState) Set(s string) error {
	if s == "inherit" {
		*t.v = nil
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true, false or inherit")
	}
	*t.v = &b
	return nil
}

type optString struct{ v **string }

func (o optString) String() string { return "" }
func (o optString) Set(s string) error {
	if s == "" {
		*o.v = nil
		return nil
	}
	*o.v = &s
	return nil
}

func accountSettings(args []string) error {
	fs := flag.NewFlagSet("account-settings", flag.ContinueOnError)
	account := fs.Int64("account", 0, "account id")
	var s embed.AccountSettings
	fs.Var(triState{&s.AllowAI}, "allow-ai", "true, false or inherit")
	fs.Var(triState{&s.ShowDashboardChat}, "show-dashboard-chat", "true, false or inherit")
	fs.Var(triState{&s.ShowWorkbookChat}, "show-workbook-chat", "true, false or inherit")
	fs.Var(triState{&s.ShowAIWidgets}, "show-ai-widgets", "true, false or inherit")
	fs.Var(optString{&s.Locale}, "locale", "BCP-47 locale, empty for none")
	fs.Var(optString{&s.Timezone}, "timezone", "IANA time zone, empty for none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *account <= 0 {
		return fmt.Errorf("--account is required")
	}
	c, err := startCommand()
	if err != nil {
		return err
	}
	defer c.close()
	cfg, ctx, client := c.cfg, c.ctx, c.client
	st := mongostore.New(client.Database(cfg.MongoDatabase))
	if err := st.SetAccountSettings(ctx, *account, s); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"accountId": *account, "settings": s})
}
