package architecture_test

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	dbtconfig "github.com/analyticsco/platform/dbtsync-svc/config"
	"github.com/analyticsco/platform/devstack"
	embedconfig "github.com/analyticsco/platform/embed-svc/config"
	"github.com/analyticsco/platform/libs/config"
	wsconfig "github.com/analyticsco/platform/workspace-svc/config"
)

// domains are the services' domain packages: module directory and package.
var domains = []struct{ module, pkg string }{
	{"workspace-svc", "./internal/workspace"},
	{"embed-svc", "./internal/embed"},
	{"dbtsync-svc", "./internal/dbtsync"},
}

// drivers are the import path prefixes of the storage and messaging clients.
var drivers = []string{"go.mongodb.org/", "github.com/redis/", "github.com/nats-io/nats.go"}

// TestDomainsLinkNoDriverAndNoAdapter: a domain package speaks in its own terms; the
// adapters know MongoDB, Redis and NATS. Checked on everything the domain links (go list
// -deps), not only its own imports: a driver reached through a library (an error model
// that recognises driver errors, an identity package that holds a NATS client) counts.
func TestDomainsLinkNoDriverAndNoAdapter(t *testing.T) {
	root := devstack.RepoRoot(t)
	for _, d := range domains {
		t.Run(d.module, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", d.pkg)
			cmd.Dir = filepath.Join(root, d.module)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", d.pkg, err)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 10 {
				t.Fatalf("go list -deps %s listed %d packages: %v", d.pkg, len(deps), deps)
			}
			for _, dep := range deps {
				for _, drv := range drivers {
					if strings.HasPrefix(dep, drv) {
						t.Errorf("%s/%s links %s; drivers belong in the adapters", d.module, d.pkg, dep)
					}
				}
				if strings.Contains(dep, "/internal/store") || strings.Contains(dep, "/internal/queue") {
					t.Errorf("%s/%s links the adapter %s; the domain names its ports, the app wires the adapters", d.module, d.pkg, dep)
				}
			}
		})
	}
}

// TestLimitDefaultsAreTheConfigTags: a limit's default is written in its config tag (the
// README, compose and k8s agree with the tags: deploytest); the domain's DefaultLimits,
// what it uses when a limit is not set, must be the same numbers. Loaded with nothing in
// the environment, the configuration gives the domain exactly the limits the domain
// would pick for itself.
func TestLimitDefaultsAreTheConfigTags(t *testing.T) {
	var ws wsconfig.Config
	load(t, &ws)
	if got, want := ws.Limits(), (wsconfig.Config{}).Limits().WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("workspace-svc: the config tags give %+v, workspace.DefaultLimits %+v", got, want)
	}
	var em embedconfig.Config
	load(t, &em)
	if got, want := em.Limits(), (embedconfig.Config{}).Limits().WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("embed-svc: the config tags give %+v, embed.DefaultLimits %+v", got, want)
	}
	var dbt dbtconfig.Config
	load(t, &dbt)
	got, want := dbt.GitLimits(), (dbtconfig.Config{}).GitLimits().WithDefaults()
	got.MaxManifest = want.MaxManifest // no setting of its own: the sync body's limit
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dbtsync-svc: the config tags give %+v, gitsource.DefaultLimits %+v", got, want)
	}
	// The manifest read limits (every read: the API's upload check, the worker's) are the
	// scanner's own defaults, convert.DefaultManifestLimits, which an unset Limits takes.
	if got, want := dbt.GitLimits().ManifestLimits(), (dbtconfig.Config{}).GitLimits().ManifestLimits(); got != want {
		t.Errorf("dbtsync-svc: the config tags give the manifest read %+v, convert.DefaultManifestLimits %+v", got, want)
	}
	gotStorage, wantStorage := dbt.StorageLimits(), (dbtconfig.Config{}).StorageLimits().WithDefaults()
	gotStorage.IndexPage = wantStorage.IndexPage // no setting: the page of a job index
	if !reflect.DeepEqual(gotStorage, wantStorage) {
		t.Errorf("dbtsync-svc: the config tags give %+v, jetstream.DefaultLimits %+v", gotStorage, wantStorage)
	}
	if got, want := dbt.ChildLimits(), (dbtconfig.Config{}).ChildLimits().WithDefaults(); got != want {
		t.Errorf("dbtsync-svc: the config tags give %+v, isolate.DefaultLimits %+v", got, want)
	}
	if got, want := dbt.SelectorLimits(), (dbtconfig.Config{}).SelectorLimits().WithDefaults(); got != want {
		t.Errorf("dbtsync-svc: the config tags give %+v, convert.DefaultSelectorLimits %+v", got, want)
	}
}

// load fills cfg from its tags' defaults alone (a required variable gets a placeholder).
func load(t *testing.T, cfg any) {
	t.Helper()
	required := map[string]bool{}
	for _, v := range config.Describe(cfg) {
		required[v.Name] = v.Required
	}
	err := config.LoadFrom(func(name string) (string, bool) {
		if required[name] {
			return "placeholder", true
		}
		return "", false
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
}
