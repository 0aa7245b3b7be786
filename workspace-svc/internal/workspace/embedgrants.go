package workspace

import (
	"cmp"
	"context"
	"slices"

	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// Who manages embed grants: a workbook's or a folder's, whoever manages the object by the
// folder rules (tree.go: its creator, a manage grant along its folders, admins always);
// the root's, and an embed tenant's listing, admins. Only a user's bearer token: embed
// tokens (internal users' included) and API keys are refused, as on every workspace
// route.

// The sources an inherited entry names.
const (
	inheritedFolder = "folder"
	inheritedRoot   = "root"
)

// TenantAccessSources are the accessSource values a tenant's listing filters by.
var TenantAccessSources = []string{embedaccess.SourceTenant, embedaccess.SourceGroup, embedaccess.SourceAllEmbedUsers, embedaccess.SourceFolder}

// embedManager refuses every credential but a user's bearer token.
func embedManager(p *identity.Principal) error {
	if p == nil || p.User == nil || p.Credential != identity.CredentialBearer {
		return errs.Forbiddenf("the workspace needs a user's bearer token")
	}
	return nil
}

// embedTarget is what a GET or a PUT of embed access read of its object: the request
// (its tree holds the folders above the object), the object's own grants and the folder
// that holds it (0: the root, or the object is the root).
type embedTarget struct {
	r      *request
	own    embedaccess.Grants
	parent int64
}

// embedObjectFor reads obj's own grants and its ancestor chain, and checks that the
// caller manages it (verb says what for, in a 403's message).
func (s *service) embedObjectFor(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject, verb string) (*embedTarget, error) {
	if err := embedManager(p); err != nil {
		return nil, err
	}
	switch obj.Type {
	case "":
		r, err := s.begin(ctx, p, deploymentID)
		if err != nil {
			return nil, err
		}
		if !p.HasRole(identity.RoleAdmin) {
			return nil, errs.Forbiddenf("you need the admin role to %s of the deployment's root", verb)
		}
		g, err := s.store.RootEmbedAccess(ctx, deploymentID)
		if err != nil {
			return nil, err
		}
		return &embedTarget{r: r, own: canonicalGrants(g)}, nil
	case TypeFolder, TypeWorkbook:
		if obj.ID <= 0 {
			return nil, errs.Invalidf("%s id must be a positive integer", obj.Type.lower())
		}
	default:
		return nil, errs.Invalidf("embed access is set on a workbook, a folder or the deployment's root, not a %s", obj.Type.lower())
	}
	if obj.Type == TypeFolder {
		r, d, err := s.folderForRead(ctx, p, deploymentID, obj.ID, LevelManage, verb)
		if err != nil {
			return nil, err
		}
		return &embedTarget{r: r, own: canonicalGrants(d.EmbedAccess), parent: r.tree.folders[obj.ID].Parent}, nil
	}
	r, d, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, obj.ID, LevelManage, verb)
	if err != nil {
		return nil, err
	}
	return &embedTarget{r: r, own: canonicalGrants(d.EmbedAccess), parent: d.Parent}, nil
}

// view is t's object's embed access with own as its grants: what it inherits is each
// folder above it with at least one entry, nearest first, then the root (one read). A
// folder the caller cannot view is listed without its name.
func (s *service) embedView(ctx context.Context, t *embedTarget, obj EmbedObject, own embedaccess.Grants) (EmbedAccessView, error) {
	v := EmbedAccessView{Grants: own, Inherited: []InheritedEmbedAccess{}}
	if obj.Root() {
		return v, nil
	}
	for _, n := range t.r.tree.chain(t.parent) {
		if n.EmbedAccess.Empty() {
			continue
		}
		in := InheritedEmbedAccess{Source: inheritedFolder, FolderID: &n.ID, Grants: canonicalGrants(n.EmbedAccess)}
		if t.r.tree.folderLevel(t.r.p, n.ID) >= LevelView {
			in.FolderName = &n.Name
		}
		v.Inherited = append(v.Inherited, in)
	}
	root, err := s.store.RootEmbedAccess(ctx, t.r.deploymentID)
	if err != nil {
		return EmbedAccessView{}, err
	}
	if !root.Empty() {
		v.Inherited = append(v.Inherited, InheritedEmbedAccess{Source: inheritedRoot, Grants: canonicalGrants(root)})
	}
	return v, nil
}

// GetEmbedAccess answers obj's embed grants and what it inherits.
func (s *service) GetEmbedAccess(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject) (EmbedAccessView, error) {
	t, err := s.embedObjectFor(ctx, p, deploymentID, obj, "see its embed access")
	if err != nil {
		return EmbedAccessView{}, err
	}
	return s.embedView(ctx, t, obj, t.own)
}

// PutEmbedAccess replaces obj's own embed grants. The grants are validated before
// anything is read; grants equal to those already there (in any order) write nothing,
// and the answer says so (Changed false).
func (s *service) PutEmbedAccess(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject, g embedaccess.Grants) (EmbedAccessView, error) {
	if err := embedManager(p); err != nil {
		return EmbedAccessView{}, err
	}
	if err := embedaccess.Validate(g, s.limits.EmbedAccessEntries); err != nil {
		return EmbedAccessView{}, err
	}
	g = canonicalGrants(g)
	t, err := s.embedObjectFor(ctx, p, deploymentID, obj, "change its embed access")
	if err != nil {
		return EmbedAccessView{}, err
	}
	changed := !sameGrants(t.own, g)
	if changed {
		now := s.now()
		if obj.Root() {
			err = s.store.SetRootEmbedAccess(ctx, deploymentID, g, p.User.ID, now)
		} else {
			var ok bool
			ok, err = s.store.SetEmbedAccess(ctx, deploymentID, obj.ID, obj.Type, g, p.User.ID, now)
			if err == nil && !ok {
				err = notFound(obj.Type, obj.ID)
			}
		}
		if err != nil {
			return EmbedAccessView{}, err
		}
	}
	v, err := s.embedView(ctx, t, obj, g)
	if err != nil {
		return EmbedAccessView{}, err
	}
	v.Changed, v.Previous = changed, t.own
	return v, nil
}

// canonicalGrants is g with its lists never nil and in a stable order (tenants by name,
// groups by scope, tenant and name): two PUTs of the same entries store the same grants,
// and every answer lists them alike.
func canonicalGrants(g embedaccess.Grants) embedaccess.Grants {
	out := embedaccess.Grants{AllEmbedUsers: g.AllEmbedUsers,
		Tenants: append([]embedaccess.TenantEntry{}, g.Tenants...), Groups: append([]embedaccess.GroupEntry{}, g.Groups...)}
	slices.SortStableFunc(out.Tenants, func(a, b embedaccess.TenantEntry) int { return cmp.Compare(a.EmbedTenantName, b.EmbedTenantName) })
	slices.SortStableFunc(out.Groups, func(a, b embedaccess.GroupEntry) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.EmbedTenantName, b.EmbedTenantName), cmp.Compare(a.GroupName, b.GroupName))
	})
	return out
}

// sameGrants reports whether two canonical grants hold the same entries.
func sameGrants(a, b embedaccess.Grants) bool {
	return a.AllEmbedUsers == b.AllEmbedUsers && slices.Equal(a.Tenants, b.Tenants) && slices.Equal(a.Groups, b.Groups)
}

// embedChain is the walk of a workbook with grants own in folder parent (0: the root):
// the workbook, the folders above it nearest first (as far as t holds them), the root.
func embedChain(t *tree, own embedaccess.Grants, parent int64, root embedaccess.Grants) []embedaccess.Level {
	folders := t.chain(parent)
	chain := make([]embedaccess.Level, 0, len(folders)+2)
	chain = append(chain, embedaccess.Level{Grants: own})
	for _, n := range folders {
		chain = append(chain, embedaccess.Level{Grants: n.EmbedAccess, FolderID: n.ID})
	}
	return append(chain, embedaccess.Level{Grants: root, Root: true})
}

// tenantCursor is the id of the last workbook a tenant's listing page examined.
type tenantCursor struct {
	ID int64 `json:"w"`
}

// TenantWorkbooks answers a page of an embed tenant's effective access: the workbooks of
// deploymentID some viewer of the tenant reads (embedaccess.TenantReach), by id, each with the
// grant that decided it, optionally only those decided by one accessSource. What a page
// costs does not depend on how many grants there are: it reads the root's grants once,
// then batches of workbook heads (their own grants come with them) and, per batch, their
// folders and those folders' ancestors (at most two reads). A page examines at most
// ListScan workbooks, then answers what it has with hasNextPage and a cursor that goes on
// from the last one examined.
func (s *service) TenantWorkbooks(ctx context.Context, p *identity.Principal, deploymentID int64, tenant string, in TenantWorkbooksInput) (httpx.Page[TenantWorkbook], error) {
	if err := embedManager(p); err != nil {
		return httpx.Page[TenantWorkbook]{}, err
	}
	if err := validTenantPath(tenant); err != nil {
		return httpx.Page[TenantWorkbook]{}, err
	}
	if in.AccessSource != "" && !slices.Contains(TenantAccessSources, in.AccessSource) {
		return httpx.Page[TenantWorkbook]{}, badAccessSource(in.AccessSource)
	}
	first := in.First
	if first <= 0 {
		first = httpx.DefaultPage
	}
	first = min(first, httpx.MaxPage)
	from, err := httpx.AfterCursor[tenantCursor](in.After)
	if err != nil {
		return httpx.Page[TenantWorkbook]{}, err
	}
	after := int64(0)
	if from != nil {
		if from.ID <= 0 {
			return httpx.Page[TenantWorkbook]{}, httpx.BadCursor()
		}
		after = from.ID
	}
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return httpx.Page[TenantWorkbook]{}, err
	}
	if !p.HasRole(identity.RoleAdmin) {
		return httpx.Page[TenantWorkbook]{}, errs.Forbiddenf("you need the admin role to list an embed tenant's workbooks")
	}
	root, err := s.store.RootEmbedAccess(ctx, deploymentID)
	if err != nil {
		return httpx.Page[TenantWorkbook]{}, err
	}
	out := []TenantWorkbook{}
	// page ends the listing: more says whether it goes on, end is the last workbook
	// examined when it stopped at the scan limit.
	page := func(more bool, end int64) httpx.Page[TenantWorkbook] {
		if n := len(out); n > 0 && end == 0 {
			end = out[n-1].WorkbookID
		}
		if end == 0 {
			return httpx.PageEndingAt[TenantWorkbook, tenantCursor](out, more, nil)
		}
		return httpx.PageEndingAt(out, more, &tenantCursor{ID: end})
	}
	scanned := 0
	for {
		limit := min(max(first+1-len(out), minListBatch), s.limits.ListScan-scanned)
		batch, err := s.store.WorkbookHeads(ctx, deploymentID, after, limit)
		if err != nil {
			return httpx.Page[TenantWorkbook]{}, err
		}
		parents := make([]int64, 0, len(batch))
		for _, d := range batch {
			if d.Parent != 0 && !slices.Contains(parents, d.Parent) {
				parents = append(parents, d.Parent)
			}
		}
		if err := r.need(ctx, parents...); err != nil {
			return httpx.Page[TenantWorkbook]{}, err
		}
		for _, d := range batch {
			dec, ok := embedaccess.TenantReach(tenant, embedChain(r.tree, d.EmbedAccess, d.Parent, root))
			match := ok && (in.AccessSource == "" || dec.Source == in.AccessSource)
			if match && len(out) == first {
				return page(true, 0), nil
			}
			scanned++
			if match {
				out = append(out, tenantWorkbook(d, dec))
			}
		}
		if len(batch) < limit {
			return page(false, 0), nil
		}
		after = batch[len(batch)-1].ID
		if scanned >= s.limits.ListScan {
			return page(true, after), nil
		}
	}
}

func tenantWorkbook(d *Item, dec embedaccess.Decision) TenantWorkbook {
	w := TenantWorkbook{WorkbookID: d.ID, Name: d.Name, Embeddable: d.Embeddable, AccessSource: dec.Source, Subject: dec.Subject, ViaRoot: dec.ViaRoot}
	if d.Parent != 0 {
		parent := d.Parent
		w.FolderID = &parent
	}
	if d.PublicID != "" {
		publicID := d.PublicID
		w.PublicID = &publicID
	}
	if dec.ViaFolderID != 0 {
		via := dec.ViaFolderID
		w.ViaFolderID = &via
	}
	return w
}

// validTenantPath checks the embedTenantName of a tenant's listing.
func validTenantPath(tenant string) error {
	if !contract.ValidTenantName(tenant) {
		const rule = "lowercase, 5 to 36 characters, starting with a letter, ending with a letter or digit, only a-z, 0-9 and -"
		if len(tenant) > 64 { // not echoed: a path can be long
			return errs.Invalidf("embedTenantName in the path is invalid: %s", rule)
		}
		return errs.Invalidf("embedTenantName %q is invalid: %s", tenant, rule)
	}
	return nil
}

func badAccessSource(raw string) error {
	return errs.Invalidf("accessSource must be one of tenant, group, allEmbedUsers, folder, not %q", raw)
}
