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
