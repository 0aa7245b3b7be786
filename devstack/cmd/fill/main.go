// Command fill writes items into a deployment of the running local stack in bulk, as
// workspace-svc would have written them one request at a time (devstack.FillWorkspace):
// to try the stack, or run a suite on it, with a platform that holds tens of thousands of
// items. The deployment must hold no items yet.
//
//	go run ./devstack/cmd/fill -deployment 3 -by 7 -items 50000
//
// It finds the stack's MongoDB in $DATA_DIR/stack.json (PLATFORM_STACK_FILE, default
// .data/stack.json) and prints what it wrote as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
)

func main() {
	var f devstack.Fill
	flag.Int64Var(&f.Deployment, "deployment", 0, "deployment id to fill (required; it must hold no items)")
	flag.Int64Var(&f.By, "by", 1, "user id recorded as the items' creator")
	flag.IntVar(&f.Items, "items", 50_000, "items to write: a fifth folders, the rest workbooks")
	db := flag.String("database", "workspace", "workspace-svc's database (its MONGODB_DATABASE)")
	flag.Parse()
	if err := run(f, *db); err != nil {
		fmt.Fprintln(os.Stderr, "fill:", err)
		os.Exit(1)
	}
}

func run(f devstack.Fill, database string) error {
	stackFile := os.Getenv("PLATFORM_STACK_FILE")
	if stackFile == "" {
		stackFile = filepath.Join(".data", "stack.json")
	}
	raw, err := os.ReadFile(stackFile)
	if err != nil {
		return fmt.Errorf("is the stack running (make run)? %w", err)
	}
	var sf struct {
		MongoDBURI string `json:"mongodbUri"`
	}
	if err := json.Unmarshal(raw, &sf); err != nil {
		return fmt.Errorf("%s: %w", stackFile, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(sf.MongoDBURI))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	start := time.Now()
	out, err := devstack.FillWorkspace(ctx, client.Database(database), f)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"filled": out, "seconds": time.Since(start).Seconds()})
}
