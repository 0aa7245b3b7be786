package platform

import (
	"fmt"
	"strings"
)

// The bearer tokens' issuer and audience the stack's gateway expects (platformctl signs
// the seed's tokens with them).
const (
	JWTIssuer   = "https://auth.platform.local"
	JWTAudience = "platform-api"
)

// Layout says which processes a stack runs, where, and with what around them.
type Layout struct {
	// MongoURI and Redis (REDIS_URL=..., or the REDIS_* of a Sentinel group or a
	// Cluster) are the backing servers: every process gets MongoURI, the gateways and
	// embed-svc Redis.
	MongoURI string
	Redis    []string
	// NATSURL is the NATS URL of a process by its NATS user (devstack.NATSUsers: the
	// process's name without a replica number); one URL for all when NATS is external.
	NATSURL func(user string) string
	Keys    Keys

	// Replicas of each service (default 1) and dbt Workers (default 1), Gateways
	// (default 1, all alike).
	Replicas, Workers, Gateways int
	// Numbered names the services and workers with their replica number
	// ("workspace-svc-1", as the system suites address them); otherwise with Replicas
	// and Workers 1 they are "workspace-svc", "dbtsync-worker" (make run). The gateways
	// are "gateway", "gateway-2", ...
	Numbered bool
	// Upstreams are the services' URLs by binary name ("workspace-svc"; comma-separated
	// for replicas): with them the table is the gateways alone, in front of services run
	// elsewhere (a service's tests, gatewaytest).
	Upstreams map[string]string
	// Addr and InternalAddr give a process's public and internal listeners by name.
	Addr, InternalAddr func(name string) string

	// Env comes first in every process's environment (the parent's, or a test's
	// minimal one and its settings); GatewayEnv is added for the gateways, and Extra
	// last for every process (later entries win).
	Env, GatewayEnv, Extra []string
}

// dbtWorkerArg runs dbtsync-svc as the dbt worker.
const dbtWorkerArg = "worker"

// DBTWorker reports whether p is a dbt worker (dbtsync-svc worker).
func (p Proc) DBTWorker() bool {
	return p.Binary == DBTSyncSvc.Name && len(p.Args) > 0 && p.Args[0] == dbtWorkerArg
}

// Table is the process table of l in start order: the services, the dbt workers, then
// the gateways, each with its whole environment.
func Table(l Layout) ([]Proc, error) {
	var ps []Proc
	urls := map[string][]string{}
	if l.Upstreams != nil {
		for b, u := range l.Upstreams {
			urls[b] = []string{u}
		}
	} else {
		ps = l.services(urls)
	}
	for i := range max(l.Gateways, 1) {
		p := Proc{Name: "gateway", Binary: Gateway.Name}
		if i > 0 {
			p.Name = fmt.Sprintf("gateway-%d", i+1)
		}
		p.Addr = l.Addr(p.Name)
		ps = append(ps, p)
	}
	for i := range ps {
		env, err := l.env(ps[i], urls)
		if err != nil {
			return nil, err
		}
		ps[i].InternalAddr = l.InternalAddr(ps[i].Name)
		ps[i].Env = append(env, "INTERNAL_ADDR="+ps[i].InternalAddr)
		ps[i].Env = append(ps[i].Env, l.Extra...)
	}
	return ps, nil
}

// services are the services' replicas and the dbt workers, their URLs added to urls by
// binary name.
func (l Layout) services(urls map[string][]string) []Proc {
	replicas, workers := max(l.Replicas, 1), max(l.Workers, 1)
	name := func(base string, i, n int) string {
		if l.Numbered || n > 1 {
			return fmt.Sprintf("%s-%d", base, i+1)
		}
		return base
	}
	var ps []Proc
	for _, b := range []Binary{WorkspaceSvc, EmbedSvc, DBTSyncSvc} {
		for i := range replicas {
			p := Proc{Name: name(b.Name, i, replicas), Binary: b.Name}
			p.Addr = l.Addr(p.Name)
			urls[b.Name] = append(urls[b.Name], "http://"+p.Addr)
			ps = append(ps, p)
		}
	}
	for i := range workers {
		p := Proc{Name: name("dbtsync-worker", i, workers), Binary: DBTSyncSvc.Name, Args: []string{dbtWorkerArg}}
		p.Addr = l.Addr(p.Name)
		ps = append(ps, p)
	}
	return ps
}

// env is p's environment but for INTERNAL_ADDR and Extra.
func (l Layout) env(p Proc, urls map[string][]string) ([]string, error) {
	natsUser := p.Binary
	if p.DBTWorker() {
		natsUser = "dbtsync-worker"
	}
	env := append(append([]string{}, l.Env...), "MONGODB_URI="+l.MongoURI, "NATS_URL="+l.NATSURL(natsUser))
	// Only the gateway and embed-svc use Redis: no other process (the dbt worker, which
	// runs untrusted repositories, least of all) gets its address or its password.
	if p.Binary == Gateway.Name || p.Binary == EmbedSvc.Name {
		env = append(env, l.Redis...)
	}
	env = append(env, "OTEL_SERVICE_NAME="+p.Name)
	key, err := l.Keys.IdentityKey(p)
	if err != nil {
		return nil, err
	}
	if key != "" {
		env = append(env, "IDENTITY_SIGNING_KEY="+key)
	}
	switch p.Binary {
	case Gateway.Name:
		env = append(env, "GATEWAY_ADDR="+p.Addr,
			"WORKSPACE_URL="+strings.Join(urls[WorkspaceSvc.Name], ","),
			"EMBED_URL="+strings.Join(urls[EmbedSvc.Name], ","),
			"DBTSYNC_URL="+strings.Join(urls[DBTSyncSvc.Name], ","),
			"AUTH_JWT_PUBLIC_KEYS_FILE="+l.Keys.JWTPublicKeyFile,
			"AUTH_JWT_ISSUER="+JWTIssuer, "AUTH_JWT_AUDIENCE="+JWTAudience,
			"OAUTH_SIGNING_KEY_FILE="+l.Keys.OAuthSigningKeyFile)
		env = append(env, l.GatewayEnv...)
	case EmbedSvc.Name:
		env = append(env, "HTTP_ADDR="+p.Addr, "EMBED_KEY_ENCRYPTION_KEY="+l.Keys.EmbedKeyEncryption,
			// Webhook receivers of the local stack and its tests listen on loopback, which
			// only this setting lets the deliverer dial.
			"WEBHOOK_ALLOWED_HOSTS=127.0.0.1/8")
	case DBTSyncSvc.Name:
		// file:// repositories are for the local stack and tests only.
		env = append(env, "HTTP_ADDR="+p.Addr, "DBT_CREDENTIALS_KEY="+l.Keys.DBTCredentialsKey, "DBT_SYNC_ALLOW_FILE_URLS=true")
	default:
		env = append(env, "HTTP_ADDR="+p.Addr)
	}
	return env, nil
}

// PlatformctlEnv is the environment `platformctl` needs against a stack (its MongoDB,
// NATS as platformctl, the gateway and the key that signs the seed's bearer tokens),
// after base; it never reads a stack.json.
func (l Layout) PlatformctlEnv(base []string, gateway, noStackFile string) []string {
	return append(append([]string{}, base...),
		"MONGODB_URI="+l.MongoURI, "MONGODB_DATABASE=identity", "NATS_URL="+l.NATSURL("platformctl"),
		"IDENTITY_SIGNING_KEY="+l.Keys.IdentitySigningKey,
		"AUTH_JWT_PRIVATE_KEY_FILE="+l.Keys.JWTPrivateKeyFile, "AUTH_JWT_ISSUER="+JWTIssuer, "AUTH_JWT_AUDIENCE="+JWTAudience,
		"GATEWAY_URL="+gateway, "PLATFORM_STACK_FILE="+noStackFile)
}
