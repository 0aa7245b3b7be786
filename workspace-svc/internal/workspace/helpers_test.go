package workspace_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// fixture is the service over the in-memory store: no servers. Every test builds its own.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	store *memstore.Store
	svc   workspace.Service
	dep   int64
}

func newFixture(t *testing.T) *fixture {
	store := memstore.New()
	return &fixture{t: t, ctx: context.Background(), store: store, svc: workspace.NewService(workspace.Ports{Store: store}, workspace.Options{}), dep: 7}
}

// The users of the fixture's account, one per role.
var (
	admin  = principal(1, identity.RoleAdmin)
	dev    = principal(2, identity.RoleDeveloper)
	ai     = principal(3, identity.RoleAIBIUser)
	viewer = principal(4, identity.RoleViewer)
)

func principal(id int64, role string) *identity.Principal {
	return &identity.Principal{Credential: identity.CredentialBearer, Account: identity.Account{ID: 100},
		User: &identity.User{ID: id, Email: role + "@example.com", Role: role}, Deployment: &identity.Deployment{ID: 7}}
}

func (f *fixture) folder(p *identity.Principal, name string, parent int64) int64 {
	f.t.Helper()
	fo, err := f.svc.CreateFolder(f.ctx, p, f.dep, workspace.CreateFolderInput{Name: name, ParentID: parent})
	if err != nil {
		f.t.Fatalf("create folder %q in %d: %v", name, parent, err)
	}
	return fo.ID
}

func (f *fixture) item(p *identity.Principal, typ workspace.ItemType, name string, folder int64) int64 {
	f.t.Helper()
	w, err := f.svc.CreateItem(f.ctx, p, f.dep, typ, workspace.CreateItemInput{Name: name, FolderID: folder})
	if err != nil {
		f.t.Fatalf("create %s %q in %d: %v", typ, name, folder, err)
	}
	return w.ID
}

func (f *fixture) grant(folder int64, grants ...workspace.Grant) {
	f.t.Helper()
	if _, err := f.svc.SetPermissions(f.ctx, admin, f.dep, folder, grants); err != nil {
		f.t.Fatalf("grant on %d: %v", folder, err)
	}
}

func ref(typ workspace.ItemType, id int64) workspace.ItemRef {
	return workspace.ItemRef{Type: typ, ID: id}
}

// wantErr fails unless err is a domain error of kind (and code, when not "").
func wantErr(t *testing.T, err error, kind errs.Kind, code string) *errs.Error {
	t.Helper()
	e, ok := errs.As(err)
	if !ok || e.Kind != kind || (code != "" && e.Code != code) {
		t.Fatalf("error %v (%#v), want kind %d code %q", err, err, kind, code)
	}
	return e
}
