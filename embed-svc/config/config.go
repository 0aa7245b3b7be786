// Package config is embed-svc's configuration, read from the environment.
package config

import "github.com/analyticsco/platform/libs/config"

// Config is everything embed-svc reads from its environment.
type Config struct {
	config.Common
	HTTPAddr           string `env:"HTTP_ADDR" default:"127.0.0.1:8082" help:"listen address"`
	MongoURI           string `env:"MONGODB_URI" default:"mongodb://127.0.0.1:27018/" secret:"true" help:"MongoDB connection string (may hold a password)"`
	MongoDatabase      string `env:"MONGODB_DATABASE" default:"embed" help:"database owned by embed-svc"`
	RedisURL           string `env:"REDIS_URL" default:"redis://127.0.0.1:6380/0" secret:"true" help:"Redis for single-use session ids and revocations (may hold a password)"`
	NATSURL            string `env:"NATS_URL" default:"nats://127.0.0.1:4223" help:"NATS, for the branch resolver of dbtsync-svc"`
	IdentitySigningKey string `env:"IDENTITY_SIGNING_KEY" required:"true" secret:"true" help:"base64 HMAC key shared with the gateway; verifies the forwarded identity"`
}

// Load reads the configuration from the environment.
func Load() (Config, error) {
	var c Config
	err := config.Load(&c)
	return c, err
}
