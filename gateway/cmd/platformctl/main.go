// Command platformctl administers the identity store: accounts, deployments, users, API
// keys and bearer tokens, and seeds the demo data the local stack and tests use.
//
// It connects to MongoDB directly (MONGODB_URI, MONGODB_DATABASE) and signs bearer
// tokens with AUTH_JWT_PRIVATE_KEY_FILE. Unset values are read from the local stack's
// PLATFORM_STACK_FILE (default .data/stack.json), so `make seed` needs no setup.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/gateway/config"
	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/platformctl"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/server"
)

const usage = `platformctl administers the platform's identity store.

Usage:
  platformctl seed [--json] [--identity-only]
  platformctl accounts create --name NAME --plan free|premium|enterprise [--embedding] [--creator-mode] [--external-user-limit N] [--default-tenant NAME] [--rate-limit N/window]
  platformctl deployments create --account ID --name NAME [--production-branch main]
  platformctl users create --account ID --username NAME --email EMAIL --role viewer|ai_bi_user|developer|admin [--first-name NAME]
  platformctl keys create --user ID --kind account|personal [--scope ID,ID] [--name NAME] [--ttl DURATION]
  platformctl keys revoke --id KEYID
  platformctl keys rotate --id KEYID
  platformctl tokens issue --user ID [--ttl 1h]
  platformctl identity-key --service workspace-svc|embed-svc|dbtsync-svc
      prints the service's own forwarded-identity key, derived from IDENTITY_SIGNING_KEY
      (the gateway's key): give it to the service as its IDENTITY_SIGNING_KEY, so it can
      verify what the gateway sends it and forge nothing for another service

Output is JSON (--json is accepted everywhere and is the default).

keys create, revoke and rotate run the code of the gateway's /api/v1/api-keys (its rules
and API_KEY_* limits) and are recorded in the audit trail (GET /api/v1/audit of the
key's account): they need NATS_URL reachable, and refuse to change anything otherwise.
The operator recorded is PLATFORMCTL_OPERATOR, else the OS user.

Environment (unset values come from PLATFORM_STACK_FILE, default .data/stack.json):
  MONGODB_URI, MONGODB_DATABASE (identity), AUTH_JWT_PRIVATE_KEY_FILE,
  AUTH_JWT_ISSUER, AUTH_JWT_AUDIENCE, GATEWAY_URL, NATS_URL, PLATFORMCTL_OPERATOR
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "platformctl:", err)
		os.Exit(1)
	}
}

type env struct {
	mongoURI, database, privateKeyFile, issuer, audience, gateway, natsURL string
}

func loadEnv() (env, error) {
	e := env{
		mongoURI: os.Getenv("MONGODB_URI"), database: os.Getenv("MONGODB_DATABASE"),
		privateKeyFile: os.Getenv("AUTH_JWT_PRIVATE_KEY_FILE"), issuer: os.Getenv("AUTH_JWT_ISSUER"),
		audience: os.Getenv("AUTH_JWT_AUDIENCE"), gateway: os.Getenv("GATEWAY_URL"), natsURL: os.Getenv("NATS_URL"),
	}
	stackFile := os.Getenv("PLATFORM_STACK_FILE")
	if stackFile == "" {
		stackFile = ".data/stack.json"
	}
	if raw, err := os.ReadFile(stackFile); err == nil {
		var st struct {
			Gateway           string `json:"gateway"`
			MongoURI          string `json:"mongodbUri"`
			JWTPrivateKeyFile string `json:"jwtPrivateKeyFile"`
			JWTIssuer         string `json:"jwtIssuer"`
			JWTAudience       string `json:"jwtAudience"`
			NATSURL           string `json:"natsUrl"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return e, fmt.Errorf("%s: %w", stackFile, err)
		}
		fill := func(dst *string, v string) {
			if *dst == "" {
				*dst = v
			}
		}
		fill(&e.mongoURI, st.MongoURI)
		fill(&e.privateKeyFile, st.JWTPrivateKeyFile)
		fill(&e.issuer, st.JWTIssuer)
		fill(&e.audience, st.JWTAudience)
		fill(&e.gateway, st.Gateway)
		fill(&e.natsURL, st.NATSURL)
	}
	if e.database == "" {
		e.database = "identity"
	}
	if e.issuer == "" {
		e.issuer = "https://auth.platform.local"
	}
	if e.audience == "" {
		e.audience = "platform-api"
	}
	if e.gateway == "" {
		e.gateway = "http://127.0.0.1:8080"
	}
	if e.natsURL == "" {
		e.natsURL = "nats://127.0.0.1:4223"
	}
	if e.mongoURI == "" {
		return e, errors.New("MONGODB_URI is not set and no local stack file was found: start the stack with `make run` or set MONGODB_URI")
	}
	return e, nil
}

// run dispatches a sub-command to its function (commands), with the identity store
// connected and the result printed as JSON.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd := args[0]
	rest := args[1:]
	if cmd == "identity-key" {
		return identityKey(rest, stdout)
	}
	if cmd != "seed" {
		if len(args) < 2 {
			return fmt.Errorf("%s needs a subcommand\n\n%s", cmd, usage)
		}
		cmd, rest = args[0]+" "+args[1], args[2:]
	}
	command, ok := commands[cmd]
	if !ok {
		return fmt.Errorf("unknown command %q\n\n%s", cmd, usage)
	}
	e, err := loadEnv()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	client, _, err := server.ConnectMongo(ctx, e.mongoURI, prometheus.NewRegistry()) // a command's metrics are discarded
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	st := store.New(client.Database(e.database))
	if err := st.EnsureIndexes(ctx); err != nil {
		return err
	}
	fs := flag.NewFlagSet("platformctl "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("json", true, "JSON output (always on)")
	c := &invocation{ctx: ctx, env: e, st: st, fs: fs, args: rest, stdout: stdout}
	result, err := command(c)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(result)
}

// invocation is what a command works with: the environment, the identity store, its
// flags and arguments, and where its JSON answer goes.
type invocation struct {
	ctx    context.Context
	env    env
	st     *store.Store
	fs     *flag.FlagSet
	args   []string
	stdout io.Writer
}

// parse parses the command's flags (declared on fs before).
func (c *invocation) parse() error { return c.fs.Parse(c.args) }

// issuer signs bearer tokens with AUTH_JWT_PRIVATE_KEY_FILE.
func (c *invocation) issuer() (credentials.Issuer, error) {
	if c.env.privateKeyFile == "" {
		return credentials.Issuer{}, errors.New("AUTH_JWT_PRIVATE_KEY_FILE is not set: bearer tokens cannot be signed")
	}
	key, err := credentials.LoadEd25519PrivateKey(c.env.privateKeyFile)
	if err != nil {
		return credentials.Issuer{}, err
	}
	return credentials.Issuer{Key: key, KeyID: credentials.KeyID(key.Public()), Issuer: c.env.issuer, Audience: c.env.audience}, nil
}

// commands are platformctl's commands by name; each returns its JSON answer.
var commands = map[string]func(c *invocation) (any, error){
	"seed":               seed,
	"accounts create":    createAccount,
	"deployments create": createDeployment,
	"users create":       createUser,
	"keys create":        createKey,
	"keys revoke":        revokeKey,
	"keys rotate":        rotateKey,
	"tokens issue":       issueToken,
}

func seed(c *invocation) (any, error) {
	identityOnly := c.fs.Bool("identity-only", false, "accounts, deployments, users, keys and tokens only: no catalog (which needs embed-svc behind the gateway)")
	if err := c.parse(); err != nil {
		return nil, err
	}
	is, err := c.issuer()
	if err != nil {
		return nil, err
	}
	out, err := platformctl.Seed(c.ctx, c.st, is, c.env.gateway)
	if err != nil {
		return nil, err
	}
	// acme's account-wide groups and attributes live in embed-svc: created through the
	// gateway's API, so stdout stays the one JSON object of the answer.
	if !*identityOnly {
		if err := platformctl.SeedCatalog(c.ctx, out.Gateway, out.Accounts["acme"].APIKeys["admin"], platformctl.AcmeCatalog); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func createAccount(c *invocation) (any, error) {
	name := c.fs.String("name", "", "account name")
	plan := c.fs.String("plan", store.PlanFree, "plan")
	embedding := c.fs.Bool("embedding", false, "embedding enabled")
	creator := c.fs.Bool("creator-mode", false, "useCreatorMode tenant flag")
	limit := c.fs.Int64("external-user-limit", store.DefaultExternalUserLimit, "external-user limit")
	tenant := c.fs.String("default-tenant", "", "default embed tenant name")
	rateLimit := c.fs.String("rate-limit", "", "the account's own request budget as N/window (e.g. 5000/1m), replacing its plan's; empty: the plan's")
	if err := c.parse(); err != nil {
		return nil, err
	}
	return c.st.UpsertAccount(c.ctx, store.AccountSpec{Name: *name, Plan: *plan, EmbeddingEnabled: *embedding,
		UseCreatorMode: *creator, ExternalUserLimit: *limit, DefaultEmbedTenant: *tenant, RateLimit: *rateLimit})
}

func createDeployment(c *invocation) (any, error) {
	acct := c.fs.Int64("account", 0, "account id")
	name := c.fs.String("name", "", "deployment name")
	branch := c.fs.String("production-branch", "main", "production branch")
	if err := c.parse(); err != nil {
		return nil, err
	}
	return c.st.UpsertDeployment(c.ctx, *acct, *name, *branch)
}

func createUser(c *invocation) (any, error) {
	acct := c.fs.Int64("account", 0, "account id")
	username := c.fs.String("username", "", "username")
	email := c.fs.String("email", "", "email")
	first := c.fs.String("first-name", "", "first name")
	role := c.fs.String("role", "viewer", "role")
	if err := c.parse(); err != nil {
		return nil, err
	}
	return c.st.UpsertUser(c.ctx, store.UserSpec{AccountID: *acct, Username: *username, Email: *email, FirstName: *first, Role: *role})
}

// keyService is the API-key service on the identity store, recording in aud: the code
// of POST /api/v1/api-keys, with the limits of the gateway's environment.
func (c *invocation) keyService(aud *platformctl.Auditor) (*apikeys.Service, error) {
	limits, err := config.LoadAPIKeys()
	if err != nil {
		return nil, err
	}
	return apikeys.New(c.st, aud, limits.Limits(), nil), nil
}

// auditedKeyChange runs change with the API-key service, recorded in the key's
// account's audit trail: the AUDIT stream must be reachable before anything changes.
func (c *invocation) auditedKeyChange(change func(svc *apikeys.Service) (any, error)) (any, error) {
	aud, err := platformctl.NewAuditor(c.env.natsURL)
	if err != nil {
		return nil, err
	}
	defer aud.Close()
	svc, err := c.keyService(aud)
	if err != nil {
		return nil, err
	}
	result, err := change(svc)
	if err != nil {
		return nil, err
	}
	if err := aud.Err(); err != nil {
		// The change was made (a new secret is shown only once): print it, then say what
		// failed.
		_ = json.NewEncoder(c.stdout).Encode(result)
		return nil, err
	}
	return result, nil
}

// createKey creates an API key for a user.
func createKey(c *invocation) (any, error) {
	userID := c.fs.Int64("user", 0, "owner user id")
	kind := c.fs.String("kind", "account", "account or personal")
	scope := c.fs.String("scope", "", "comma-separated deployment ids")
	name := c.fs.String("name", "platformctl", "a label for the key")
	ttl := c.fs.Duration("ttl", 0, "expiry (0 = API_KEY_MAX_TTL)")
	if err := c.parse(); err != nil {
		return nil, err
	}
	u, err := c.st.User(c.ctx, *userID)
	if err != nil {
		return nil, fmt.Errorf("user %d: %w", *userID, err)
	}
	ids, err := parseIDs(*scope)
	if err != nil {
		return nil, err
	}
	req := apikeys.CreateRequest{Name: *name, Kind: *kind, Scope: ids, Owner: &apikeys.Owner{Type: apikeys.OwnerUser, ID: u.ID}}
	if *ttl > 0 {
		exp := time.Now().Add(*ttl)
		req.ExpiresAt = &exp
	}
	return c.auditedKeyChange(func(svc *apikeys.Service) (any, error) {
		out, err := svc.Create(c.ctx, apikeys.Operator(u.AccountID), req)
		if err != nil {
			return nil, err
		}
		// "key" is what this command has always printed; "token" is the API's name.
		return map[string]any{"id": out.ID, "key": out.Token, "token": out.Token, "kind": out.Kind, "scope": out.Scope,
			"userId": u.ID, "expiresAt": out.ExpiresAt}, nil
	})
}

// revokeKey revokes an API key.
func revokeKey(c *invocation) (any, error) {
	id := c.fs.String("id", "", "key id")
	if err := c.parse(); err != nil {
		return nil, err
	}
	k, err := c.st.APIKey(c.ctx, *id)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", *id, err)
	}
	return c.auditedKeyChange(func(svc *apikeys.Service) (any, error) {
		if _, err := svc.Revoke(c.ctx, apikeys.Operator(k.AccountID), *id); err != nil {
			return nil, fmt.Errorf("key %s: %w", *id, err)
		}
		return map[string]any{"id": *id, "revoked": true}, nil
	})
}

// rotateKey gives an API key a new secret; the old one works for API_KEY_ROTATION_OVERLAP.
func rotateKey(c *invocation) (any, error) {
	id := c.fs.String("id", "", "key id")
	if err := c.parse(); err != nil {
		return nil, err
	}
	k, err := c.st.APIKey(c.ctx, *id)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", *id, err)
	}
	return c.auditedKeyChange(func(svc *apikeys.Service) (any, error) {
		out, err := svc.Rotate(c.ctx, apikeys.Operator(k.AccountID), *id)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", *id, err)
		}
		return out, nil
	})
}

func issueToken(c *invocation) (any, error) {
	userID := c.fs.Int64("user", 0, "user id")
	ttl := c.fs.Duration("ttl", time.Hour, "token lifetime")
	if err := c.parse(); err != nil {
		return nil, err
	}
	if _, err := c.st.User(c.ctx, *userID); err != nil {
		return nil, fmt.Errorf("user %d: %w", *userID, err)
	}
	is, err := c.issuer()
	if err != nil {
		return nil, err
	}
	tok, exp, err := is.Issue(*userID, *ttl)
	if err != nil {
		return nil, err
	}
	return map[string]any{"token": tok, "expiresAt": exp.UTC().Format(time.RFC3339)}, nil
}

func parseIDs(s string) ([]int64, error) {
	var out []int64
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("--scope: %q is not a deployment id", p)
		}
		out = append(out, id)
	}
	return out, nil
}

// identityKey prints a service's own forwarded-identity key (no database needed).
func identityKey(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("identity-key", flag.ContinueOnError)
	service := fs.String("service", "", "workspace-svc, embed-svc or dbtsync-svc")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *service {
	case "workspace-svc", "embed-svc", "dbtsync-svc":
	default:
		return fmt.Errorf("identity-key: --service must be workspace-svc, embed-svc or dbtsync-svc")
	}
	master := os.Getenv("IDENTITY_SIGNING_KEY")
	if master == "" {
		return errors.New("identity-key: IDENTITY_SIGNING_KEY (the gateway's key) is not set")
	}
	k, err := identity.ServiceKey(master, *service)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, k)
	return err
}
