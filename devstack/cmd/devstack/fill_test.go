package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
)

// TestFilledDeploymentIsServedLikeOneBuiltByRequests fills a deployment in bulk
// (devstack.FillWorkspace) and has workspace-svc serve it through the gateway: a deep
// folder's path is its ancestors, a listing pages the root, a filled subtree moves with
// its folders' ancestors, a folder created in it takes the next tree version and an id
// past the filled ones; and all of it is still there after the stack restarts on the
// same data directory.
func TestFilledDeploymentIsServedLikeOneBuiltByRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildStack(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	a := freshAddrs(t)
	r := startRunner(t, filepath.Join(bin, "devstack"), bin, dataDir, a)
	r.waitReady(ctx)
	s := r.stack()
	sd := seed(ctx, t, filepath.Join(bin, "platformctl"), filepath.Join(dataDir, "stack.json"))
	initech := sd.Accounts["initech"]
	dep, admin := initech.Deployments[0].ID, initech.Users["admin"]

	client, err := mongo.Connect(options.Client().ApplyURI(s.MongoDBURI))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	// 110 folders: 10 at the root, 100 below them; 440 workbooks.
	f, err := devstack.FillWorkspace(ctx, client.Database("workspace"), devstack.Fill{Deployment: dep, By: admin.ID, Items: 550})
	if err != nil {
		t.Fatalf("FillWorkspace: %v", err)
	}
	if f.Folders != 110 || f.Workbooks != 440 || f.LastID-f.FirstID != 549 {
		t.Fatalf("filled %+v, want 110 folders, 440 workbooks, 550 ids", f)
	}
	if _, err := devstack.FillWorkspace(ctx, client.Database("workspace"), devstack.Fill{Deployment: dep, By: admin.ID, Items: 10}); err == nil {
		t.Error("a second fill of the same deployment succeeded, want it refused")
	}

	api := apiCaller{t: t, ctx: ctx, base: fmt.Sprintf("%s/api/v1/deployments/%d", s.Gateway, dep), bearer: admin.Bearer}
	// The deep folder (index 109) is under folder 109/10-1 = 9, a root folder.
	deep, parent := f.Deep, f.FirstID+9
	var folder struct {
		ParentID   int64 `json:"parentId"`
		FolderPath []struct {
			ID int64 `json:"id"`
		} `json:"folderPath"`
	}
	api.call(http.MethodGet, fmt.Sprintf("/folders/%d", deep), nil, &folder)
	if folder.ParentID != parent || len(folder.FolderPath) != 1 || folder.FolderPath[0].ID != parent {
		t.Errorf("folder %d: parent %d, path %+v; want parent %d, path [%d]", deep, folder.ParentID, folder.FolderPath, parent, parent)
	}
	var page struct {
		Items []struct {
			ID   int64  `json:"id"`
			Type string `json:"type"`
		} `json:"items"`
	}
	api.call(http.MethodGet, "/workspace?first=20", nil, &page)
	if len(page.Items) != 10 || page.Items[0].ID != f.Root {
		t.Errorf("root listing: %+v, want the 10 root folders, %d first", page.Items, f.Root)
	}

	// Move root folder 9 (with its 10 subfolders) into root folder 0.
	api.call(http.MethodPost, "/workspace/move", map[string]any{"type": "FOLDER", "id": parent, "folderId": f.Root}, nil)
	api.call(http.MethodGet, fmt.Sprintf("/folders/%d", deep), nil, &folder)
	if len(folder.FolderPath) != 2 || folder.FolderPath[0].ID != f.Root || folder.FolderPath[1].ID != parent {
		t.Errorf("after the move, folder %d's path = %+v, want [%d %d]", deep, folder.FolderPath, f.Root, parent)
	}
	var created struct {
		ID int64 `json:"id"`
	}
	api.call(http.MethodPost, "/folders", map[string]any{"name": "made by a request", "parentId": deep}, &created)
	if created.ID <= f.LastID {
		t.Errorf("a folder created after the fill got id %d, want one past %d", created.ID, f.LastID)
	}
	api.call(http.MethodGet, fmt.Sprintf("/folders/%d", created.ID), nil, &folder)
	if len(folder.FolderPath) != 3 || folder.FolderPath[2].ID != deep {
		t.Errorf("the new folder's path = %+v, want it to end in %d", folder.FolderPath, deep)
	}

	if code := r.stop(60 * time.Second); code != 0 {
		t.Fatalf("devstack exit code after SIGTERM = %d, want 0", code)
	}
	r = startRunner(t, filepath.Join(bin, "devstack"), bin, dataDir, a)
	r.waitReady(ctx)
	api.call(http.MethodGet, fmt.Sprintf("/folders/%d", created.ID), nil, &folder)
	if len(folder.FolderPath) != 3 || folder.FolderPath[0].ID != f.Root {
		t.Errorf("after a restart, the new folder's path = %+v, want it kept", folder.FolderPath)
	}
	if code := r.stop(60 * time.Second); code != 0 {
		t.Errorf("devstack exit code after SIGTERM = %d, want 0", code)
	}
}

// apiCaller sends JSON requests with a bearer token and wants 200.
type apiCaller struct {
	t      *testing.T
	ctx    context.Context
	base   string
	bearer string
}

func (c apiCaller) call(method, path string, body, out any) {
	c.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(c.ctx, method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, buf.String())
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, buf.String())
		}
	}
}
