package deploytest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/analyticsco/platform/libs/redisx"
)

// TestK8sRedisOverlaysSetEachMode: the base manifests run on one Redis server (REDIS_MODE
// single in ConfigMap platform-redis, which both the gateway and embed-svc read), and
// deploy/k8s-overlays/redis-sentinel and redis-cluster are the base with only that value
// replaced by their mode. Where kubectl is installed the overlays are also rendered.
func TestK8sRedisOverlaysSetEachMode(t *testing.T) {
	m := loadK8s(t)
	base, ok := m.data(t, "ConfigMap", "platform-redis")
	if !ok || base["REDIS_MODE"] != redisx.ModeSingle {
		t.Fatalf("deploy/k8s: ConfigMap platform-redis REDIS_MODE = %q, want %q", base["REDIS_MODE"], redisx.ModeSingle)
	}
	for _, mode := range []string{redisx.ModeSentinel, redisx.ModeCluster} {
		t.Run(mode, func(t *testing.T) {
			dir := filepath.Join(repoRoot(t), "deploy", "k8s-overlays", "redis-"+mode)
			raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var k struct {
				Resources []string `yaml:"resources"`
				Patches   []struct {
					Target struct{ Kind, Name string } `yaml:"target"`
					Patch  string                      `yaml:"patch"`
				} `yaml:"patches"`
			}
			if err := yaml.Unmarshal(raw, &k); err != nil {
				t.Fatalf("parse %s: %v", dir, err)
			}
			if !slices.Equal(k.Resources, []string{"../../k8s"}) || len(k.Patches) != 1 {
				t.Fatalf("%s: resources %q and %d patches, want the base ../../k8s and one patch", dir, k.Resources, len(k.Patches))
			}
			p := k.Patches[0]
			var ops []struct{ Op, Path, Value string }
			if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
				t.Fatalf("%s: the patch: %v", dir, err)
			}
			want := []struct{ Op, Path, Value string }{{"replace", "/data/REDIS_MODE", mode}}
			if p.Target.Kind != "ConfigMap" || p.Target.Name != "platform-redis" || !slices.Equal(ops, want) {
				t.Errorf("%s: patch %s/%s %+v, want ConfigMap/platform-redis %+v", dir, p.Target.Kind, p.Target.Name, ops, want)
			}
			if _, err := exec.LookPath("kubectl"); err != nil {
				return
			}
			out, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
			}
			if !strings.Contains(string(out), "REDIS_MODE: "+mode+"\n") || strings.Contains(string(out), "REDIS_MODE: single") {
				t.Errorf("kubectl kustomize %s does not set REDIS_MODE to %s", dir, mode)
			}
		})
	}
}

// Compose's Redis requires a password (REDIS_PASSWORD from .env, which gen-env.sh
// writes) and sits on a network of its own, internal, that only the gateway and
// embed-svc join with the password in their REDIS_URL; the dbt worker (and every other
// process) neither reaches Redis nor holds its password. Kubernetes gives REDIS_URL to
// the gateway and embed-svc only.
func TestComposeRedisRequiresAPasswordOnlyItsClientsHold(t *testing.T) {
	c := loadCompose(t)
	redis := c.Services["redis"]
	i := slices.Index(redis.Command, "--requirepass")
	if i < 0 || i+1 >= len(redis.Command) || !strings.HasPrefix(redis.Command[i+1], "${REDIS_PASSWORD:?") {
		t.Errorf("compose redis: command %q, want --requirepass ${REDIS_PASSWORD:?...}", redis.Command)
	}
	if !strings.HasPrefix(redis.Environment["REDISCLI_AUTH"], "${REDIS_PASSWORD:?") {
		t.Errorf("compose redis: the healthcheck's redis-cli has no password (REDISCLI_AUTH %q)", redis.Environment["REDISCLI_AUTH"])
	}
	if len(redis.Ports) > 0 {
		t.Errorf("compose redis publishes %v", redis.Ports)
	}
	if got := redis.Networks.joined(); !slices.Equal(got, []string{"redis"}) {
		t.Errorf("compose redis is on %v, want its own network redis alone", got)
	}
	if n := c.Networks["redis"]; n == nil || !n.Internal {
		t.Errorf("compose network redis: %+v, want internal: true", n)
	}
	clients := []string{"gateway", "embed-svc"}
	for name, svc := range c.Services {
		onRedis := slices.Contains(svc.Networks.joined(), "redis")
		raw, hasURL := svc.Environment["REDIS_URL"]
		switch {
		case name == "redis":
		case slices.Contains(clients, name):
			if !onRedis {
				t.Errorf("compose %s is not on the redis network", name)
			}
			if !strings.Contains(raw, ":${REDIS_PASSWORD:?") || !strings.HasSuffix(raw, "@redis:6379/0") {
				t.Errorf("compose %s: REDIS_URL %q, want redis://:${REDIS_PASSWORD:?...}@redis:6379/0", name, raw)
			}
		default:
			if onRedis || hasURL {
				t.Errorf("compose %s: on the redis network %v, REDIS_URL %q; only %v reach Redis", name, onRedis, raw, clients)
			}
			for k, v := range svc.Environment {
				if strings.Contains(v, "REDIS_PASSWORD") {
					t.Errorf("compose %s: %s carries Redis's password", name, k)
				}
			}
		}
	}
	m := loadK8s(t)
	for _, p := range processes {
		containers, ok := m.containers(t, p.name)
		if !ok {
			t.Fatalf("no Deployment %s", p.name)
		}
		var has bool
		for _, e := range containers[0].Env {
			has = has || e.Name == "REDIS_URL"
		}
		if want := slices.Contains(clients, p.name); has != want {
			t.Errorf("k8s %s: REDIS_URL set %v, want %v", p.name, has, want)
		}
	}
}
