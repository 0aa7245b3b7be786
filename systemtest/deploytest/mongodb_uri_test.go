package deploytest_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/mongox"
)

// mongoURI matches a MongoDB URI in a configuration file or a shell example.
var mongoURI = regexp.MustCompile("mongodb(\\+srv)?://[A-Za-z0-9$][^\\s'\"`]*")

// TestEveryShippedMongoURIIsAccepted: every MongoDB URI the deployment files show (compose,
// the Kubernetes Secret's example, the deploy guide) names the replica set and passes the
// client's durability and timeout checks, so copying one never gives a process that
// refuses to start or one that writes with less than majority.
func TestEveryShippedMongoURIIsAccepted(t *testing.T) {
	root := repoRoot(t)
	placeholder := regexp.MustCompile(`\$\{[^}]*\}`)
	seen := 0
	for _, name := range []string{"docker-compose.yml", "deploy/k8s/secret.example.yaml", "deploy/README.md"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		text := placeholder.ReplaceAllString(string(b), "secret")
		for _, uri := range mongoURI.FindAllString(text, -1) {
			seen++
			uri = strings.ReplaceAll(uri, "HOSTS", "mongo-0.example.net:27017")
			if !strings.Contains(uri, "replicaSet=") && !strings.HasPrefix(uri, "mongodb+srv://") {
				t.Errorf("%s: %s names no replica set", name, uri)
			}
			client, err := mongox.Connect(context.Background(), uri, nil)
			if err != nil {
				t.Errorf("%s: %s is refused: %v", name, uri, err)
				continue
			}
			_ = client.Disconnect(context.Background())
		}
	}
	if seen < 9 {
		t.Fatalf("found %d MongoDB URIs in the deployment files, want at least 9 (5 in compose, 4 in the Secret's example)", seen)
	}
}
