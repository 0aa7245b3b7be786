// Package deploytest_test checks the deployment files against the code: every
// variable a process's config struct reads (config.Describe) must be wired in
// docker-compose.yml and in the Kubernetes manifests under deploy/k8s, nothing
// stale may be wired, the images come from deploy/Dockerfile targets, Prometheus
// scrapes every process, and the backing services are set up the way the code
// needs them (MongoDB as a replica set). A variable added to a Config struct
// fails these tests until it is wired.
package deploytest_test

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/analyticsco/platform/devstack"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	dbtsyncconfig "github.com/analyticsco/platform/dbtsync-svc/config"
	embedconfig "github.com/analyticsco/platform/embed-svc/config"
	gatewayconfig "github.com/analyticsco/platform/gateway/config"
	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/identity"
	workspaceconfig "github.com/analyticsco/platform/workspace-svc/config"
)

// process is one Go process of the platform. Its name is the compose service, the
// Kubernetes Deployment (and Service, HPA) and the Prometheus job.
type process struct {
	name string
	// newConfig returns a pointer to the process's config struct.
	newConfig func() any
	// addrVar is the variable holding the public listen address (the API, /healthz).
	// Every process serves /healthz, /readyz and /metrics on internalAddrVar.
	addrVar string
	// args are the container arguments (the worker is dbtsync-svc started as `dbtsync-svc worker`).
	args []string
	// hasService: the process takes requests from others, so Kubernetes gives it a Service.
	hasService bool
}

// internalAddrVar holds every process's internal listen address: probes and
// Prometheus use it; no Service or published port exposes it.
const internalAddrVar = "INTERNAL_ADDR"

var processes = []process{
	{name: "gateway", newConfig: func() any { return new(gatewayconfig.Config) }, addrVar: "GATEWAY_ADDR", hasService: true},
	{name: "workspace-svc", newConfig: func() any { return new(workspaceconfig.Config) }, addrVar: "HTTP_ADDR", hasService: true},
	{name: "embed-svc", newConfig: func() any { return new(embedconfig.Config) }, addrVar: "HTTP_ADDR", hasService: true},
	{name: "dbtsync-svc", newConfig: func() any { return new(dbtsyncconfig.Config) }, addrVar: "HTTP_ADDR", hasService: true},
	// The worker reads the same Config as the dbtsync API.
	{name: "dbtsync-worker", newConfig: func() any { return new(dbtsyncconfig.Config) }, addrVar: "HTTP_ADDR", args: []string{"worker"}},
}

// optionalVars are the variables a process reads that may legitimately stay unset,
// each because an alternative variable is set instead. The alternative must be set.
var optionalVars = map[string][]struct{ name, unlessSet, why string }{
	"gateway": {{
		name:      "AUTH_JWKS_URL",
		unlessSet: "AUTH_JWT_PUBLIC_KEYS_FILE",
		// The gateway verifies bearer tokens with keys from the PEM file, from the
		// JWKS URL, or both; the deployments ship the PEM file (a compose secret, a
		// Kubernetes Secret volume), so the JWKS URL is unset there.
		why: "bearer-token keys come from AUTH_JWT_PUBLIC_KEYS_FILE instead",
	}},
}

// Backing services of the compose stack, and every service a process reaches.
var requiredComposeServices = []string{
	"mongodb", "redis", "nats", "jaeger", "prometheus",
	"gateway", "workspace-svc", "embed-svc", "dbtsync-svc", "dbtsync-worker",
}

// urlVars maps the gateway's upstream variables to the process they point at.
var urlVars = map[string]string{
	"WORKSPACE_URL": "workspace-svc",
	"EMBED_URL":     "embed-svc",
	"DBTSYNC_URL":   "dbtsync-svc",
}

// ---------------------------------------------------------------------------
// docker-compose.yml

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Networks map[string]*struct {
		Internal bool `yaml:"internal"`
	} `yaml:"networks"`
	Secrets map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
		Target     string `yaml:"target"`
	} `yaml:"build"`
	Command     stringList                `yaml:"command"`
	Environment envMap                    `yaml:"environment"`
	EnvFile     any                       `yaml:"env_file"`
	Secrets     []yaml.Node               `yaml:"secrets"`
	DependsOn   map[string]map[string]any `yaml:"depends_on"`
	Ports       []string                  `yaml:"ports"`
	Expose      []string                  `yaml:"expose"`
	Networks    networkList               `yaml:"networks"`
	Volumes     []string                  `yaml:"volumes"`
	Healthcheck *struct {
		Test stringList `yaml:"test"`
	} `yaml:"healthcheck"`
}

// envMap is a compose environment, written as a mapping (merge keys allowed) or a
// list of NAME=value.
type envMap map[string]string

func (e *envMap) UnmarshalYAML(n *yaml.Node) error {
	out := envMap{}
	switch n.Kind {
	case yaml.MappingNode:
		var m map[string]any
		if err := n.Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			if v == nil {
				out[k] = ""
				continue
			}
			out[k] = fmt.Sprint(v)
		}
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	default:
		return fmt.Errorf("line %d: environment must be a mapping or a list", n.Line)
	}
	*e = out
	return nil
}

// stringList is a compose command or healthcheck test: a list or one string.
type stringList []string

func (s *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = strings.Fields(n.Value)
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// networkList is the networks a compose service joins (a list or a mapping); none
// written is the default network alone.
type networkList []string

func (l *networkList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		*l = names
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	for name := range m {
		*l = append(*l, name)
	}
	return nil
}

// joined is the networks the service is on.
func (l networkList) joined() []string {
	if len(l) == 0 {
		return []string{"default"}
	}
	return l
}

// secretNames lists the compose secrets a service mounts (short or long syntax).
func (s composeService) secretNames() []string {
	var names []string
	for _, n := range s.Secrets {
		if n.Kind == yaml.ScalarNode {
			names = append(names, n.Value)
			continue
		}
		var long struct {
			Source string `yaml:"source"`
			Target string `yaml:"target"`
		}
		if err := n.Decode(&long); err == nil && long.Target == "" {
			names = append(names, long.Source)
		}
	}
	return names
}

func repoRoot(t *testing.T) string { return devstack.RepoRoot(t) }

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	path := filepath.Join(repoRoot(t), "docker-compose.yml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the compose file: %v", err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return c
}

// interpolation matches compose's ${NAME}, ${NAME:-default}, ${NAME:?error}, ...
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:[:]?[-?+][^}]*)?\}`)

// resolve stands in for compose's interpolation: the value taken from .env is
// not known here, so a placeholder takes its place.
func resolve(v string) string {
	return interpolation.ReplaceAllString(v, "placeholder-from-env")
}

func describe(p process) []config.Var { return config.Describe(p.newConfig()) }

// checkEnvWiring compares the variables wired for p (name -> value) with those its
// config reads: every one must be wired but the optional ones, none may be stale,
// and the wired values must load into the config struct.
func checkEnvWiring(t *testing.T, where string, p process, env map[string]string) {
	t.Helper()
	vars := describe(p)
	if len(vars) == 0 {
		t.Fatalf("config.Describe lists no variables for %s: the config package changed shape", p.name)
	}
	read := map[string]bool{}
	for _, v := range vars {
		read[v.Name] = true
	}
	optional := map[string]bool{}
	for _, o := range optionalVars[p.name] {
		if !read[o.name] {
			t.Errorf("the allowlist names %s for %s, which its config no longer reads: drop it from optionalVars", o.name, p.name)
		}
		if _, ok := env[o.unlessSet]; ok {
			optional[o.name] = true
		} else if _, ok := env[o.name]; !ok {
			t.Errorf("%s: %s sets neither %s nor its alternative %s", where, p.name, o.name, o.unlessSet)
		}
	}
	var missing, stale []string
	for _, v := range vars {
		if _, ok := env[v.Name]; !ok && !optional[v.Name] {
			missing = append(missing, v.Name)
		}
	}
	for name := range env {
		if !read[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("%s: %s does not set %s, which its config struct reads", where, p.name, strings.Join(missing, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("%s: %s sets %s, which its config struct does not read (stale wiring?)", where, p.name, strings.Join(stale, ", "))
	}
	lookup := func(name string) (string, bool) {
		v, ok := env[name]
		return resolve(v), ok
	}
	if err := config.LoadFrom(lookup, p.newConfig()); err != nil {
		t.Errorf("%s: %s's environment does not load: %v", where, p.name, err)
	}
}

// port returns the port of a listen address such as 0.0.0.0:8081.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: port is not a number", addr)
	}
	return n
}

func TestComposeHasEveryService(t *testing.T) {
	c := loadCompose(t)
	var missing []string
	for _, name := range requiredComposeServices {
		if _, ok := c.Services[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("docker-compose.yml lacks the services %s", strings.Join(missing, ", "))
	}
}

func TestComposeMongoDBIsAReplicaSet(t *testing.T) {
	c := loadCompose(t)
	mongo, ok := c.Services["mongodb"]
	if !ok {
		t.Fatal("docker-compose.yml has no mongodb service")
	}
	// The command may be a shell line (it makes the key file first): compare words.
	words := strings.Fields(strings.Join(mongo.Command, " "))
	i := slices.Index(words, "--replSet")
	if i < 0 || i+1 >= len(words) {
		t.Fatalf("mongodb's command %q does not start it as a replica set (--replSet NAME)", mongo.Command)
	}
	replSet := words[i+1]
	// Authentication is on (a replica set with users needs --keyFile), and the image's
	// first-start init creates one user per process from deploy/mongodb/users.js.
	if !slices.Contains(words, "--keyFile") || mongo.Environment["MONGO_INITDB_ROOT_PASSWORD"] == "" {
		t.Errorf("mongodb runs without authentication: want --keyFile and MONGO_INITDB_ROOT_PASSWORD")
	}
	if !slices.ContainsFunc(mongo.Volumes, func(v string) bool {
		return strings.HasPrefix(v, "./deploy/mongodb/users.js:/docker-entrypoint-initdb.d/")
	}) {
		t.Errorf("mongodb does not run deploy/mongodb/users.js at first start: volumes %q", mongo.Volumes)
	}
	usersJS, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "mongodb", "users.js"))
	if err != nil {
		t.Fatal(err)
	}
	ownDB := map[string]string{"gateway": "identity", "workspace-svc": "workspace", "embed-svc": "embed", "dbtsync-svc": "dbtsync", "dbtsync-worker": "dbtsync"}
	if mongo.Healthcheck == nil {
		t.Fatal("mongodb has no healthcheck; it must initiate the replica set and report healthy once primary")
	}
	check := strings.Join(mongo.Healthcheck.Test, " ")
	for _, want := range []string{"rs.initiate", "_id: '" + replSet + "'", "mongodb:27017"} {
		if !strings.Contains(check, want) {
			t.Errorf("mongodb's healthcheck %q does not contain %q", check, want)
		}
	}

	for _, p := range processes {
		svc := c.Services[p.name]
		raw, ok := svc.Environment["MONGODB_URI"]
		if !ok {
			t.Errorf("%s has no MONGODB_URI", p.name)
			continue
		}
		u, err := url.Parse(resolve(raw))
		if err != nil {
			t.Errorf("%s: MONGODB_URI %q: %v", p.name, raw, err)
			continue
		}
		// Each process logs in as its own user (the worker shares dbtsync-svc's), whose
		// users.js entry grants readWrite on the process's own database only.
		user := u.User.Username()
		pw, _ := u.User.Password()
		if user == "" || user == "root" || pw == "" || u.Query().Get("authSource") != "admin" {
			t.Errorf("%s: MONGODB_URI %q does not log in as the process's own user (authSource=admin)", p.name, raw)
		} else if want := fmt.Sprintf("{ user: '%s', pwd: process.env.", user); !strings.Contains(string(usersJS), want) ||
			!strings.Contains(string(usersJS), fmt.Sprintf("role: 'readWrite', db: '%s' }", ownDB[p.name])) {
			t.Errorf("%s: users.js has no user %s with readWrite on %s", p.name, user, ownDB[p.name])
		}
		if got := u.Query().Get("replicaSet"); got != replSet {
			t.Errorf("%s: MONGODB_URI %q names replicaSet %q, want %q (mongodb runs --replSet %s)", p.name, raw, got, replSet, replSet)
		}
		if u.Host != "mongodb:27017" {
			t.Errorf("%s: MONGODB_URI %q has host %q, want mongodb:27017 (the replica set member's name)", p.name, raw, u.Host)
		}
	}
}

func TestComposeEnvironmentMatchesConfig(t *testing.T) {
	c := loadCompose(t)
	for _, p := range processes {
		t.Run(p.name, func(t *testing.T) {
			svc, ok := c.Services[p.name]
			if !ok {
				t.Fatalf("docker-compose.yml has no service %s", p.name)
			}
			if svc.EnvFile != nil {
				t.Errorf("%s uses env_file, which hides its variables from this check: list them under environment", p.name)
			}
			checkEnvWiring(t, "docker-compose.yml", p, svc.Environment)

			// Keys are never written into the compose file: they come from .env.
			for _, v := range describe(p) {
				if v.Secret && v.Required && !interpolation.MatchString(svc.Environment[v.Name]) {
					t.Errorf("%s: %s is a required secret; set it as ${%s:?...} from .env, not %q", p.name, v.Name, v.Name, svc.Environment[v.Name])
				}
			}
			if got := svc.Environment["OTEL_SERVICE_NAME"]; got != p.name {
				t.Errorf("%s: OTEL_SERVICE_NAME = %q, want %q", p.name, got, p.name)
			}
			if addr := svc.Environment[p.addrVar]; !strings.HasPrefix(addr, "0.0.0.0:") {
				t.Errorf("%s: %s = %q, want 0.0.0.0:<port> (reachable from other containers)", p.name, p.addrVar, addr)
			}
			if !slices.Equal([]string(svc.Command), p.args) {
				t.Errorf("%s: command = %q, want %q", p.name, svc.Command, p.args)
			}
		})
	}
}

// Every URL a process is given points at a compose service with the right port,
// which the process depends on; a file under /run/secrets is a mounted secret.
func TestComposeReferencesResolve(t *testing.T) {
	c := loadCompose(t)
	addrPort := map[string]int{}
	for _, p := range processes {
		if addr, ok := c.Services[p.name].Environment[p.addrVar]; ok {
			addrPort[p.name] = port(t, addr)
		}
	}
	for _, p := range processes {
		svc := c.Services[p.name]
		for name, raw := range svc.Environment {
			if !isAddressVar(name) {
				continue
			}
			u, err := url.Parse(resolve(raw))
			if err != nil || u.Host == "" || !slices.Contains([]string{"http", "https", "mongodb", "redis", "rediss", "nats"}, u.Scheme) {
				continue
			}
			host := u.Hostname()
			if _, ok := c.Services[host]; !ok {
				t.Errorf("%s: %s=%q points at %q, which is not a compose service", p.name, name, raw, host)
				continue
			}
			if _, ok := svc.DependsOn[host]; !ok {
				t.Errorf("%s: %s points at %s, but %s does not depend_on it", p.name, name, host, p.name)
			}
			if target, ok := urlVars[name]; ok {
				if host != target {
					t.Errorf("%s: %s=%q points at %s, want %s", p.name, name, raw, host, target)
				}
				if got, want := u.Port(), strconv.Itoa(addrPort[target]); got != want {
					t.Errorf("%s: %s=%q uses port %s, but %s listens on %s", p.name, name, raw, got, target, want)
				}
			}
		}
		for name, dep := range svc.DependsOn {
			dc, ok := c.Services[name]
			if !ok {
				t.Errorf("%s depends on %s, which is not a compose service", p.name, name)
				continue
			}
			cond := dep["condition"]
			if dc.Healthcheck != nil && cond != "service_healthy" {
				t.Errorf("%s depends on %s with condition %v; %s has a healthcheck, so wait for service_healthy", p.name, name, cond, name)
			}
		}
		for name, raw := range svc.Environment {
			file, ok := strings.CutPrefix(raw, "/run/secrets/")
			if !ok {
				continue
			}
			if !slices.Contains(svc.secretNames(), file) {
				t.Errorf("%s: %s=%s, but the service does not mount the secret %s", p.name, name, raw, file)
			}
			if _, ok := c.Secrets[file]; !ok {
				t.Errorf("%s: %s=%s, but docker-compose.yml declares no secret %s", p.name, name, raw, file)
			}
		}
	}
}

// isAddressVar tells the variables that hold where a process connects to, as
// opposed to identifiers that look like URLs (AUTH_JWT_ISSUER).
func isAddressVar(name string) bool {
	return strings.HasSuffix(name, "_URL") || strings.HasSuffix(name, "_URI") || strings.HasSuffix(name, "_ENDPOINT")
}

// ---------------------------------------------------------------------------
// deploy/Dockerfile

type dockerfile struct {
	// stages maps a stage name to its base image, ARG defaults resolved.
	stages map[string]string
}

var (
	fromLine = regexp.MustCompile(`(?i)^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$`)
	argLine  = regexp.MustCompile(`(?i)^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$`)
)

func loadDockerfile(t *testing.T) dockerfile {
	t.Helper()
	path := filepath.Join(repoRoot(t), "deploy", "Dockerfile")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open the Dockerfile: %v", err)
	}
	defer f.Close()
	args := map[string]string{}
	d := dockerfile{stages: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := argLine.FindStringSubmatch(line); m != nil {
			args[m[1]] = m[2]
		}
		if m := fromLine.FindStringSubmatch(line); m != nil && m[2] != "" {
			base := os.Expand(m[1], func(k string) string { return args[k] })
			d.stages[m[2]] = base
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(d.stages) == 0 {
		t.Fatalf("%s has no named stages (FROM ... AS name)", path)
	}
	return d
}

func TestComposeBuildsFromDockerfileTargets(t *testing.T) {
	c := loadCompose(t)
	d := loadDockerfile(t)
	for _, p := range processes {
		svc := c.Services[p.name]
		if svc.Build == nil {
			t.Errorf("%s has no build section; it must build from deploy/Dockerfile", p.name)
			continue
		}
		if svc.Build.Context != "." {
			t.Errorf("%s: build context %q, want \".\" (the go.work workspace at the repository root)", p.name, svc.Build.Context)
		}
		if svc.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s: dockerfile %q, want deploy/Dockerfile", p.name, svc.Build.Dockerfile)
		}
		base, ok := d.stages[svc.Build.Target]
		if !ok {
			t.Errorf("%s: build target %q is not a stage of deploy/Dockerfile (stages: %s)", p.name, svc.Build.Target, strings.Join(mapsKeys(d.stages), ", "))
			continue
		}
		// A runtime target, not a build stage: its base is an image, not another stage.
		if _, isStage := d.stages[base]; isStage || !strings.Contains(base, "distroless") {
			t.Errorf("%s: target %q is built FROM %q, want a distroless runtime image", p.name, svc.Build.Target, base)
		}
	}
}

func mapsKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ---------------------------------------------------------------------------
// deploy/prometheus/prometheus.yml

// scrapeJob is a Prometheus scrape_config, static or with DNS service discovery.
type scrapeJob struct {
	JobName       string `yaml:"job_name"`
	MetricsPath   string `yaml:"metrics_path"`
	StaticConfigs []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
	DNSSDConfigs []struct {
		Names []string `yaml:"names"`
		Port  int      `yaml:"port"`
	} `yaml:"dns_sd_configs"`
}

func TestPrometheusScrapesEveryProcess(t *testing.T) {
	c := loadCompose(t)
	path := filepath.Join(repoRoot(t), "deploy", "prometheus", "prometheus.yml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the Prometheus config: %v", err)
	}
	var cfg struct {
		ScrapeConfigs []scrapeJob `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	for _, p := range processes {
		addr := c.Services[p.name].Environment[internalAddrVar]
		if addr == "" {
			t.Errorf("%s has no %s in docker-compose.yml", p.name, internalAddrVar)
			continue
		}
		want := net.JoinHostPort(p.name, strconv.Itoa(port(t, addr)))
		i := slices.IndexFunc(cfg.ScrapeConfigs, func(s scrapeJob) bool { return s.JobName == p.name })
		if i < 0 {
			t.Errorf("%s has no scrape job %q", path, p.name)
			continue
		}
		job := cfg.ScrapeConfigs[i]
		if job.MetricsPath != "" && job.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %s, want /metrics", p.name, job.MetricsPath)
		}
		var targets []string
		for _, sc := range job.StaticConfigs {
			targets = append(targets, sc.Targets...)
		}
		for _, sd := range job.DNSSDConfigs {
			for _, n := range sd.Names {
				targets = append(targets, net.JoinHostPort(n, strconv.Itoa(sd.Port)))
			}
		}
		if !slices.Equal(targets, []string{want}) {
			t.Errorf("job %s scrapes %q, want [%s] (%s=%s in docker-compose.yml)", p.name, targets, want, internalAddrVar, addr)
		}
	}
}

// ---------------------------------------------------------------------------
// deploy/k8s

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type k8sDoc struct {
	file       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
	node       *yaml.Node
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
			ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
	VolumeMounts []volumeMount `yaml:"volumeMounts"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type hpaMetric struct {
	Type     string `yaml:"type"`
	Resource struct {
		Name string `yaml:"name"`
	} `yaml:"resource"`
}

type deployment struct {
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata meta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot *bool `yaml:"runAsNonRoot"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name   string `yaml:"name"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
					EmptyDir *struct {
						SizeLimit string `yaml:"sizeLimit"`
					} `yaml:"emptyDir"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type hpa struct {
	Spec struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas *int        `yaml:"minReplicas"`
		MaxReplicas int         `yaml:"maxReplicas"`
		Metrics     []hpaMetric `yaml:"metrics"`
	} `yaml:"spec"`
}

type k8sManifests struct {
	dir  string
	docs []k8sDoc
}

func loadK8s(t *testing.T) k8sManifests {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "k8s")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no manifests in %s", dir)
	}
	m := k8sManifests{dir: dir}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				t.Fatalf("parse %s: %v", path, err)
			}
			if len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode {
				continue
			}
			d := k8sDoc{file: filepath.Base(path), node: &n}
			if err := n.Decode(&d); err != nil {
				f.Close()
				t.Fatalf("parse %s: %v", path, err)
			}
			m.docs = append(m.docs, d)
		}
		f.Close()
	}
	return m
}

// find decodes the object of kind and name into out; false when there is none.
func (m k8sManifests) find(t *testing.T, kind, name string, out any) (k8sDoc, bool) {
	t.Helper()
	for _, d := range m.docs {
		if d.Kind == kind && d.Metadata.Name == name {
			if err := d.node.Decode(out); err != nil {
				t.Fatalf("%s: decode %s %s: %v", d.file, kind, name, err)
			}
			return d, true
		}
	}
	return k8sDoc{}, false
}

// data returns the keys (and values) of a ConfigMap or Secret.
func (m k8sManifests) data(t *testing.T, kind, name string) (map[string]string, bool) {
	t.Helper()
	var obj struct {
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
	}
	if _, ok := m.find(t, kind, name, &obj); !ok {
		return nil, false
	}
	out := map[string]string{}
	for k, v := range obj.Data {
		out[k] = v
	}
	for k, v := range obj.StringData {
		out[k] = v
	}
	return out, true
}

// portOf resolves a probe or Service port (a number or a container port name).
// containers are the containers of the Deployment name; false when there is none.
func (m k8sManifests) containers(t *testing.T, name string) ([]container, bool) {
	t.Helper()
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []container `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	_, ok := m.find(t, "Deployment", name, &dep)
	return dep.Spec.Template.Spec.Containers, ok && len(dep.Spec.Template.Spec.Containers) > 0
}

func portOf(c container, n yaml.Node) int {
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	return -1
}

func TestK8sKustomizationListsEveryManifest(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "k8s")
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatalf("read the kustomization: %v", err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("parse kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var want []string
	for _, f := range files {
		switch base := filepath.Base(f); base {
		case "kustomization.yaml":
		case "secret.example.yaml":
			// Placeholders only: applying it would overwrite the real Secrets.
			if slices.Contains(k.Resources, base) {
				t.Errorf("kustomization.yaml lists %s; it holds placeholders and must not be applied", base)
			}
		default:
			want = append(want, base)
		}
	}
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources = %q, want every manifest %q", got, want)
	}
}

func TestK8sWorkloads(t *testing.T) {
	m := loadK8s(t)
	common, ok := m.data(t, "ConfigMap", "platform-common")
	if !ok {
		t.Fatal("deploy/k8s has no ConfigMap platform-common")
	}
	shutdown, err := time.ParseDuration(common["SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("platform-common SHUTDOWN_TIMEOUT %q: %v", common["SHUTDOWN_TIMEOUT"], err)
	}

	for _, p := range processes {
		t.Run(p.name, func(t *testing.T) {
			var dep deployment
			if _, ok := m.find(t, "Deployment", p.name, &dep); !ok {
				t.Fatalf("deploy/k8s has no Deployment %s", p.name)
			}
			pod := dep.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("Deployment %s has %d containers, want 1", p.name, len(pod.Containers))
			}
			c := pod.Containers[0]
			for k, v := range dep.Spec.Selector.MatchLabels {
				if dep.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("Deployment %s: selector %s=%s does not match its pod labels %v", p.name, k, v, dep.Spec.Template.Metadata.Labels)
				}
			}
			if !slices.Equal(c.Args, p.args) {
				t.Errorf("Deployment %s: args = %q, want %q", p.name, c.Args, p.args)
			}

			// Environment: ConfigMaps (envFrom or configMapKeyRef) and secretKeyRefs only.
			env := map[string]string{}
			source := map[string]string{} // variable -> the ConfigMap or Secret it came from
			set := func(name, value, from string) {
				if prev, ok := source[name]; ok {
					t.Errorf("Deployment %s: %s comes from both %s and %s; keep one", p.name, name, prev, from)
				}
				env[name], source[name] = value, from
			}
			for _, ef := range c.EnvFrom {
				switch {
				case ef.ConfigMapRef != nil:
					data, ok := m.data(t, "ConfigMap", ef.ConfigMapRef.Name)
					if !ok {
						t.Errorf("Deployment %s: envFrom names ConfigMap %s, which deploy/k8s does not define", p.name, ef.ConfigMapRef.Name)
					}
					for k, v := range data {
						set(k, v, "ConfigMap "+ef.ConfigMapRef.Name)
					}
				case ef.SecretRef != nil:
					t.Errorf("Deployment %s: envFrom secretRef %s hands it every key; use a secretKeyRef per variable it reads", p.name, ef.SecretRef.Name)
				}
			}
			secretVars := map[string]bool{}
			for _, e := range c.Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					ref := e.ValueFrom.SecretKeyRef
					data, ok := m.data(t, "Secret", ref.Name)
					if !ok {
						t.Errorf("Deployment %s: %s refers to Secret %s, which secret.example.yaml does not show", p.name, e.Name, ref.Name)
					} else if _, ok := data[ref.Key]; !ok && !ref.Optional {
						t.Errorf("Deployment %s: %s refers to key %s of Secret %s, which secret.example.yaml does not show", p.name, e.Name, ref.Key, ref.Name)
					}
					if _, ok := data[ref.Key]; ok || !ref.Optional {
						set(e.Name, "placeholder-from-secret", "Secret "+ref.Name)
					} else {
						set(e.Name, "", "an optional key never created in Secret "+ref.Name) // deliberately empty
					}
					secretVars[e.Name] = true
				case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
					ref := e.ValueFrom.ConfigMapKeyRef
					data, _ := m.data(t, "ConfigMap", ref.Name)
					v, ok := data[ref.Key]
					if !ok {
						t.Errorf("Deployment %s: %s refers to key %s of ConfigMap %s, which does not exist", p.name, e.Name, ref.Key, ref.Name)
					}
					set(e.Name, v, "ConfigMap "+ref.Name)
				default:
					t.Errorf("Deployment %s: %s is set inline; put it in the process's ConfigMap or a Secret", p.name, e.Name)
				}
			}
			checkEnvWiring(t, "deploy/k8s", p, env)
			for _, v := range describe(p) {
				if _, set := env[v.Name]; set && v.Secret && !secretVars[v.Name] {
					t.Errorf("Deployment %s: %s is secret (it may hold a password or key) but comes from a ConfigMap; use a secretKeyRef", p.name, v.Name)
				}
			}
			if got := env["OTEL_SERVICE_NAME"]; got != p.name {
				t.Errorf("Deployment %s: OTEL_SERVICE_NAME = %q, want %q", p.name, got, p.name)
			}

			// Probes on the internal listener's port, which no Service exposes.
			listen, internal := -1, -1
			if addr, ok := env[p.addrVar]; ok {
				listen = port(t, addr)
			}
			if addr, ok := env[internalAddrVar]; ok {
				internal = port(t, addr)
			}
			if internal < 0 || internal == listen {
				t.Errorf("Deployment %s: %s = %q must be set and differ from %s", p.name, internalAddrVar, env[internalAddrVar], p.addrVar)
			}
			if got := dep.Spec.Template.Metadata.Annotations["prometheus.io/port"]; got != strconv.Itoa(internal) {
				t.Errorf("Deployment %s: prometheus.io/port = %q, want %d (%s)", p.name, got, internal, internalAddrVar)
			}
			for _, pr := range []struct {
				name string
				p    *probe
				path string
			}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
				if pr.p == nil || pr.p.HTTPGet == nil {
					t.Errorf("Deployment %s has no %s httpGet %s", p.name, pr.name, pr.path)
					continue
				}
				if pr.p.HTTPGet.Path != pr.path {
					t.Errorf("Deployment %s: %s path = %q, want %q", p.name, pr.name, pr.p.HTTPGet.Path, pr.path)
				}
				if got := portOf(c, pr.p.HTTPGet.Port); got != internal {
					t.Errorf("Deployment %s: %s port = %d, want %d (%s)", p.name, pr.name, got, internal, internalAddrVar)
				}
			}

			// Graceful shutdown fits in the grace period, after the preStop sleep.
			grace := 30 // the Kubernetes default
			if pod.TerminationGracePeriodSeconds != nil {
				grace = *pod.TerminationGracePeriodSeconds
			}
			need := shutdown + time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second
			if time.Duration(grace)*time.Second <= need {
				t.Errorf("Deployment %s: terminationGracePeriodSeconds %d is not more than preStop sleep %ds + SHUTDOWN_TIMEOUT %s", p.name, grace, c.Lifecycle.PreStop.Sleep.Seconds, shutdown)
			}

			// Runs as non-root with resources the HPA can compute utilisation from.
			if sc := pod.SecurityContext.RunAsNonRoot; sc == nil || !*sc {
				t.Errorf("Deployment %s: pod securityContext.runAsNonRoot is not true", p.name)
			}
			if ape := c.SecurityContext.AllowPrivilegeEscalation; ape == nil || *ape {
				t.Errorf("Deployment %s: allowPrivilegeEscalation is not false", p.name)
			}
			if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
				t.Errorf("Deployment %s: resources %+v need cpu and memory requests and a memory limit", p.name, c.Resources)
			}

			// A file variable (AUTH_JWT_PUBLIC_KEYS_FILE) lies in a mounted Secret volume.
			for name, v := range env {
				if !strings.HasSuffix(name, "_FILE") {
					continue
				}
				if !slices.ContainsFunc(c.VolumeMounts, func(vm volumeMount) bool {
					return strings.HasPrefix(v, strings.TrimSuffix(vm.MountPath, "/")+"/")
				}) {
					t.Errorf("Deployment %s: %s=%s is not under any volumeMount", p.name, name, v)
				}
			}
			// Scratch space is bounded: a clone (or anything) filling /tmp evicts the pod
			// instead of filling the node's disk.
			for _, vol := range pod.Volumes {
				if vol.EmptyDir != nil && vol.EmptyDir.SizeLimit == "" {
					t.Errorf("Deployment %s: emptyDir volume %s has no sizeLimit", p.name, vol.Name)
				}
			}
			for _, vol := range pod.Volumes {
				if vol.Secret == nil {
					continue
				}
				if _, ok := m.data(t, "Secret", vol.Secret.SecretName); !ok {
					t.Errorf("Deployment %s: volume %s mounts Secret %s, which secret.example.yaml does not show", p.name, vol.Name, vol.Secret.SecretName)
				}
			}

			// Service (for the processes others call) and HPA.
			var svc service
			_, hasSvc := m.find(t, "Service", p.name, &svc)
			switch {
			case p.hasService && !hasSvc:
				t.Errorf("deploy/k8s has no Service %s", p.name)
			case !p.hasService && hasSvc:
				t.Errorf("deploy/k8s has a Service %s, but nothing calls %s", p.name, p.name)
			case hasSvc:
				for k, v := range svc.Spec.Selector {
					if dep.Spec.Template.Metadata.Labels[k] != v {
						t.Errorf("Service %s: selector %s=%s matches no pod label of Deployment %s", p.name, k, v, p.name)
					}
				}
				if len(svc.Spec.Ports) != 1 || portOf(c, svc.Spec.Ports[0].TargetPort) != listen {
					t.Errorf("Service %s: ports %+v, want one port targeting %d (%s)", p.name, svc.Spec.Ports, listen, p.addrVar)
				}
			}

			var h hpa
			d, ok := m.find(t, "HorizontalPodAutoscaler", p.name, &h)
			if !ok {
				t.Fatalf("deploy/k8s has no HorizontalPodAutoscaler %s", p.name)
			}
			if d.APIVersion != "autoscaling/v2" {
				t.Errorf("HPA %s: apiVersion %s, want autoscaling/v2", p.name, d.APIVersion)
			}
			if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != p.name {
				t.Errorf("HPA %s scales %s %s, want Deployment %s", p.name, ref.Kind, ref.Name, p.name)
			}
			if !slices.ContainsFunc(h.Spec.Metrics, func(mt hpaMetric) bool {
				return mt.Type == "Resource" && mt.Resource.Name == "cpu"
			}) {
				t.Errorf("HPA %s has no CPU resource metric", p.name)
			}
			if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
				t.Errorf("HPA %s: minReplicas %v, maxReplicas %d", p.name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
			}
		})
	}
}

// The gateway's upstream URLs point at the Kubernetes Services on their ports.
func TestK8sGatewayUpstreams(t *testing.T) {
	m := loadK8s(t)
	gw, ok := m.data(t, "ConfigMap", "gateway-config")
	if !ok {
		t.Fatal("deploy/k8s has no ConfigMap gateway-config")
	}
	for name, target := range urlVars {
		u, err := url.Parse(gw[name])
		if err != nil || u.Host == "" {
			t.Errorf("gateway-config %s = %q is not a URL", name, gw[name])
			continue
		}
		var svc service
		if _, ok := m.find(t, "Service", u.Hostname(), &svc); !ok || u.Hostname() != target {
			t.Errorf("gateway-config %s = %q, want the Service %s", name, gw[name], target)
			continue
		}
		if len(svc.Spec.Ports) == 0 || strconv.Itoa(svc.Spec.Ports[0].Port) != u.Port() {
			t.Errorf("gateway-config %s = %q, but Service %s listens on %+v", name, gw[name], target, svc.Spec.Ports)
		}
	}
}

// TestK8sNetworkPolicies: every platform pod denies ingress by default; only the
// gateway's public port is open to all, the services' API port admits the gateway
// alone, and the internal port (metrics, readiness) admits Prometheus.
func TestK8sNetworkPolicies(t *testing.T) {
	m := loadK8s(t)
	type peer struct {
		PodSelector *struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		NamespaceSelector *struct{} `yaml:"namespaceSelector"`
	}
	type policy struct {
		Spec struct {
			PodSelector struct {
				MatchLabels      map[string]string `yaml:"matchLabels"`
				MatchExpressions []struct {
					Key      string   `yaml:"key"`
					Operator string   `yaml:"operator"`
					Values   []string `yaml:"values"`
				} `yaml:"matchExpressions"`
			} `yaml:"podSelector"`
			PolicyTypes []string `yaml:"policyTypes"`
			Ingress     []struct {
				From  []peer `yaml:"from"`
				Ports []struct {
					Port string `yaml:"port"`
				} `yaml:"ports"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
	get := func(name string) policy {
		var p policy
		if _, ok := m.find(t, "NetworkPolicy", name, &p); !ok {
			t.Fatalf("no NetworkPolicy %s", name)
		}
		return p
	}
	deny := get("platform-default-deny-ingress")
	if deny.Spec.PodSelector.MatchLabels["app.kubernetes.io/part-of"] != "analytics-platform" || len(deny.Spec.Ingress) != 0 ||
		!slices.Contains(deny.Spec.PolicyTypes, "Ingress") {
		t.Errorf("default deny: %+v", deny.Spec)
	}
	svc := get("services-from-gateway")
	sel := svc.Spec.PodSelector.MatchExpressions
	if len(sel) != 1 || !slices.Equal(sel[0].Values, []string{"workspace-svc", "embed-svc", "dbtsync-svc"}) || len(svc.Spec.Ingress) != 1 ||
		len(svc.Spec.Ingress[0].From) != 1 || svc.Spec.Ingress[0].From[0].PodSelector == nil ||
		svc.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "gateway" || svc.Spec.Ingress[0].Ports[0].Port != "http" {
		t.Errorf("services admit only the gateway on http: %+v", svc.Spec)
	}
	internal := get("internal-from-prometheus")
	if len(internal.Spec.Ingress) != 1 || internal.Spec.Ingress[0].Ports[0].Port != "internal" ||
		internal.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
		t.Errorf("internal port admits Prometheus only: %+v", internal.Spec)
	}
	public := get("gateway-public")
	if len(public.Spec.Ingress) != 1 || len(public.Spec.Ingress[0].From) != 0 || public.Spec.Ingress[0].Ports[0].Port != "http" {
		t.Errorf("the gateway's public port: %+v", public.Spec)
	}
	// The port names the policies use exist on every Deployment's container.
	for _, p := range processes {
		containers, ok := m.containers(t, p.name)
		if !ok {
			t.Errorf("no Deployment %s", p.name)
			continue
		}
		names := map[string]bool{}
		for _, c := range containers {
			for _, port := range c.Ports {
				names[port.Name] = true
			}
		}
		if !names["http"] || !names["internal"] {
			t.Errorf("Deployment %s: container ports %v, want http and internal", p.name, names)
		}
	}
}

// TestEachServiceHoldsOnlyItsOwnIdentityKey: in compose and Kubernetes only the gateway
// gets the identity key; each service gets its own key derived from it, the worker none;
// and deploy/gen-env.sh derives exactly what the services' code derives.
func TestEachServiceHoldsOnlyItsOwnIdentityKey(t *testing.T) {
	own := map[string]string{"workspace-svc": "IDENTITY_KEY_WORKSPACE_SVC", "embed-svc": "IDENTITY_KEY_EMBED_SVC", "dbtsync-svc": "IDENTITY_KEY_DBTSYNC_SVC"}
	c := loadCompose(t)
	m := loadK8s(t)
	for _, p := range processes {
		want := own[p.name]
		switch p.name {
		case "gateway":
			want = "IDENTITY_SIGNING_KEY"
		case "dbtsync-worker":
			want = ""
		}
		got := c.Services[p.name].Environment["IDENTITY_SIGNING_KEY"]
		if want == "" && got != "" || want != "" && !strings.HasPrefix(got, "${"+want+":?") {
			t.Errorf("compose %s: IDENTITY_SIGNING_KEY = %q, want it from %q", p.name, got, want)
		}
		containers, ok := m.containers(t, p.name)
		if !ok {
			t.Fatalf("no Deployment %s", p.name)
		}
		for _, e := range containers[0].Env {
			if e.Name != "IDENTITY_SIGNING_KEY" {
				continue
			}
			key := ""
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				key = e.ValueFrom.SecretKeyRef.Key
			}
			if want == "" && !strings.HasPrefix(key, "WORKER_HAS_NO_") || want != "" && key != want {
				t.Errorf("k8s %s: IDENTITY_SIGNING_KEY from Secret key %q, want %q", p.name, key, want)
			}
		}
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed: gen-env.sh not run")
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "deploy", "gen-env.sh"))
	cmd.Env = append(os.Environ(), "ENV_FILE="+filepath.Join(dir, ".env"), "SECRETS_DIR="+filepath.Join(dir, "secrets"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-env.sh: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	for svc, name := range own {
		want, err := identity.ServiceKey(env["IDENTITY_SIGNING_KEY"], svc)
		if err != nil || env[name] != want {
			t.Errorf("gen-env.sh %s = %q, want %q (%v)", name, env[name], want, err)
		}
	}
	// Every ${VAR:?} the compose file needs is in the generated .env.
	composeRaw, _ := os.ReadFile(filepath.Join(repoRoot(t), "docker-compose.yml"))
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]+):\?`).FindAllStringSubmatch(string(composeRaw), -1) {
		if env[m[1]] == "" {
			t.Errorf("docker-compose.yml needs %s, which gen-env.sh does not write", m[1])
		}
	}
}
