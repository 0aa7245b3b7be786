package deploytest_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// TestProductionBinariesDoNotLinkDevDependencies keeps FerretDB (and the drivers and SDK
// it brings, which every service's go.mod lists as indirect because its tests require
// devstack), nats-server, the devstack helpers and the in-process test gateway out of
// every production binary.
func TestProductionBinariesDoNotLinkDevDependencies(t *testing.T) {
	root := devstack.RepoRoot(t)
	forbidden := []string{
		"github.com/FerretDB/",
		"github.com/SAP/go-hdb",
		"github.com/go-sql-driver/mysql",
		"modernc.org/sqlite",
		"github.com/jackc/pgx",
		"github.com/antithesishq/antithesis-sdk-go",
		"github.com/nats-io/nats-server",
		"github.com/analyticsco/platform/devstack",
		"github.com/analyticsco/platform/systemtest",
	}
	for _, bin := range []string{"./gateway/cmd/gateway", "./gateway/cmd/platformctl", "./workspace-svc/cmd/workspace-svc",
		"./embed-svc/cmd/embed-svc", "./dbtsync-svc/cmd/dbtsync-svc"} {
		cmd := exec.Command("go", "list", "-deps", bin)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", bin, err, out)
		}
		for _, pkg := range strings.Split(string(out), "\n") {
			for _, f := range forbidden {
				if strings.HasPrefix(pkg, f) {
					t.Errorf("%s links %s (a dev/test-only dependency)", bin, pkg)
				}
			}
		}
	}
}
