package server

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/natsx"
	"github.com/analyticsco/platform/libs/redisx"
)

// The bootstrap: every process connects to MongoDB, NATS and Redis through these, so each
// connection has the same metrics on the process's registry and the same readiness check
// in every service. Each returns the check; the service decides which of its checks gate
// /readyz (the caller closes the connection). A one-shot command connects through them
// too, its metrics on a registry of its own (prometheus.NewRegistry) that it discards,
// and to NATS with ConnectNATSOnce.

// ConnectMongo connects to the MongoDB at uri (MONGO_URI) with the command monitor of
// mongox.Metrics and mongox's pinned durability (w: majority, j: true; a URI that asks
// for less is refused here, at start). Its check is mongox.Ping: it fails when no member
// of the replica set answers, not during an election, when writes answer 503 instead.
func ConnectMongo(ctx context.Context, uri string, reg prometheus.Registerer) (*mongo.Client, Check, error) {
	client, err := mongox.ConnectWithMetrics(ctx, uri, nil, mongox.NewMetrics(reg))
	if err != nil {
		return nil, Check{}, err
	}
	return client, Check{Name: "mongodb", Check: mongox.Ping(client)}, nil
}

// ConnectNATS connects to the NATS at url (NATS_URL, which carries the process's user and
// password) as name, with natsx's connection metrics and the user's own inbox prefix
// (natsx.UserInbox: replies and JetStream deliveries to this connection arrive where no
// other user may subscribe). The connection retries a server that is not up yet and
// reconnects forever; its check fails while it is not connected.
func ConnectNATS(url, name string, reg prometheus.Registerer) (*nats.Conn, Check, error) {
	inbox, err := natsOptions(url)
	if err != nil {
		return nil, Check{}, err
	}
	m := natsx.NewMetrics(reg)
	nc, err := nats.Connect(url, append(append(m.Options(), inbox...), nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return nil, Check{}, fmt.Errorf("NATS_URL: %w", err)
	}
	m.Track(nc)
	return nc, Check{Name: "nats", Check: func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("not connected (%s)", nc.Status())
		}
		return nil
	}}, nil
}

// ConnectNATSOnce is ConnectNATS for a one-shot command (platformctl, embed-svc's
// subcommands): a server that does not answer within timeout fails the connect, so the
// command refuses to start instead of waiting for it. The connection has the same
// metrics as a process's, on reg (a command's own registry, which it may discard).
func ConnectNATSOnce(url, name string, timeout time.Duration, reg prometheus.Registerer) (*nats.Conn, error) {
	inbox, err := natsOptions(url)
	if err != nil {
		return nil, err
	}
	m := natsx.NewMetrics(reg)
	nc, err := nats.Connect(url, append(append(m.Options(), inbox...), nats.Name(name), nats.Timeout(timeout))...)
	if err != nil {
		return nil, fmt.Errorf("NATS_URL: %w", err)
	}
	m.Track(nc)
	return nc, nil
}

// natsOptions are the options url itself asks for: its user's inbox prefix.
func natsOptions(url string) ([]nats.Option, error) {
	inbox, err := natsx.UserInbox(url)
	if err != nil {
		return nil, fmt.Errorf("NATS_URL: %w", err)
	}
	if inbox == nil {
		return nil, nil
	}
	return []nats.Option{inbox}, nil
}

// OpenRedis opens the Redis that c names (REDIS_MODE single, sentinel or cluster; REDIS_URL)
// with redisx's command metrics; its check pings it.
func OpenRedis(c redisx.RedisConfig, reg prometheus.Registerer) (redis.UniversalClient, Check, error) {
	rdb, err := redisx.Open(c)
	if err != nil {
		return nil, Check{}, err
	}
	redisx.NewMetrics(reg).Instrument(rdb)
	return rdb, Check{Name: "redis", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}, nil
}
