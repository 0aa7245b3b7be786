// Package workspace is the workspace tree of a deployment: folders, workbooks and
// reports, their access model, and single and bulk moves.
package workspace

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Limits and timings of the service.
const (
	MaxBulkItems   = 100
	MaxNameLength  = 255
	DefaultPage    = httpx.DefaultPage
	MaxPage        = httpx.MaxPage
	maxTreeRetries = 64
	// A request that puts items into a folder holds a lease on it for leaseTTL; its
	// writes run under writeDeadline < leaseTTL, so a folder delete that waits for the
	// lease to lapse can never interleave with them.
	leaseTTL      = 2 * time.Minute
	writeDeadline = time.Minute
)

// Service is the workspace of the deployments of the caller's account: folders, their
// permissions, workbooks and reports, moves, dashboards, favorites and search.
type Service interface {
	CreateFolder(ctx context.Context, p *identity.Principal, dep int64, in CreateFolderInput) (Folder, error)
	GetFolder(ctx context.Context, p *identity.Principal, dep, id int64) (Folder, error)
	UpdateFolder(ctx context.Context, p *identity.Principal, dep, id int64, name *string, position *float64) (Folder, error)
	DeleteFolder(ctx context.Context, p *identity.Principal, dep, id int64) error
	GetPermissions(ctx context.Context, p *identity.Principal, dep, id int64) ([]Grant, error)
	SetPermissions(ctx context.Context, p *identity.Principal, dep, id int64, grants []Grant) ([]Grant, error)
	List(ctx context.Context, p *identity.Principal, dep, folder int64, first int, after string) (Page, error)
	Search(ctx context.Context, p *identity.Principal, dep int64, in SearchInput) (Page, error)
	Move(ctx context.Context, p *identity.Principal, dep int64, ref ItemRef, dest int64) (Workbook, error)
	BulkMove(ctx context.Context, p *identity.Principal, dep int64, refs []ItemRef, dest int64) (BulkMoveResult, error)
	CreateItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, in CreateItemInput) (Workbook, error)
	GetItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, id int64) (Workbook, error)
	UpdateItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, id int64, in UpdateItemInput) (Workbook, error)
	DeleteItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, id int64) error
	Publish(ctx context.Context, p *identity.Principal, dep, id int64, allowEmbed *bool) (Workbook, error)
	Unpublish(ctx context.Context, p *identity.Principal, dep, id int64) (Workbook, error)
	SetFavorite(ctx context.Context, p *identity.Principal, dep int64, ref ItemRef, on bool) error
}

// service implements Service over the store's ports.
type service struct {
	store Store
	// treeConflicts counts the structural changes retried because another change of the
	// deployment committed first: an event inside the commit loop, which a decorator
	// cannot see.
	treeConflicts Counter
	now           func() time.Time
	seen          sync.Map // user id -> User last recorded
	// applied remembers, per deployment, the tree version whose op this replica has
	// applied in full, so a request does not apply it again (one write saved per
	// structural request; another replica applies it once, then remembers too).
	applied sync.Map // deployment id -> int64
	limits  Limits
}

// Limits bound what clients can store; zero fields take the defaults.
type Limits struct {
	ItemsPerDeployment    int64 // folders, workbooks and reports of one deployment
	MetaBytes             int   // an item's meta JSON
	CalculatedFieldsBytes int   // an item's calculatedFields JSON
	DraftBytes            int   // a workbook's dashboard draft, as stored
	Favorites             int   // favorites of one user in one deployment
	SearchScan            int   // items a search examines per page
}

// DefaultLimits are the limits when none are configured.
var DefaultLimits = Limits{ItemsPerDeployment: 100_000, MetaBytes: 256 << 10, CalculatedFieldsBytes: 256 << 10, DraftBytes: 512 << 10,
	Favorites: 1000, SearchScan: 1000}

func (l Limits) withDefaults() Limits {
	if l.ItemsPerDeployment <= 0 {
		l.ItemsPerDeployment = DefaultLimits.ItemsPerDeployment
	}
	if l.MetaBytes <= 0 {
		l.MetaBytes = DefaultLimits.MetaBytes
	}
	if l.CalculatedFieldsBytes <= 0 {
		l.CalculatedFieldsBytes = DefaultLimits.CalculatedFieldsBytes
	}
	if l.DraftBytes <= 0 {
		l.DraftBytes = DefaultLimits.DraftBytes
	}
	if l.Favorites <= 0 {
		l.Favorites = DefaultLimits.Favorites
	}
	if l.SearchScan <= 0 {
		l.SearchScan = DefaultLimits.SearchScan
	}
	return l
}

// Counter counts an event; a prometheus.Counter is one.
type Counter interface{ Inc() }

type noCounter struct{}

func (noCounter) Inc() {}

// NewService builds the service over store; zero limits take DefaultLimits' values, and
// treeConflicts may be nil. The other domain counters are InstrumentingMiddleware's.
func NewService(store Store, limits Limits, treeConflicts Counter) Service {
	if treeConflicts == nil {
		treeConflicts = noCounter{}
	}
	return &service{store: store, treeConflicts: treeConflicts, limits: limits.withDefaults(),
		now: func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }}
}

// checkRoom refuses a new item when the deployment already holds the configured
// maximum. Concurrent creates may pass the count together, so the bound holds to within
// the number of creates in flight at once.
func (s *service) checkRoom(ctx context.Context, dep int64) error {
	n, err := s.store.CountItems(ctx, dep, s.limits.ItemsPerDeployment)
	if err != nil {
		return err
	}
	if n >= s.limits.ItemsPerDeployment {
		return errs.New(errs.Invalid, "deployment %d holds %d items (folders, workbooks and reports), the limit (WORKSPACE_MAX_ITEMS_PER_DEPLOYMENT); delete some before creating more", dep, s.limits.ItemsPerDeployment).WithCode(httpx.CodeItemLimit)
	}
	return nil
}

// checkSizes refuses item documents over their size limits, naming the limit. A draft is
// measured as its JSON, as stored.
func (s *service) checkSizes(meta, calculated json.RawMessage, draft *DashboardConfig) error {
	draftBytes := 0
	if draft != nil {
		b, _ := json.Marshal(draft) // decoded from JSON, so it encodes
		draftBytes = len(b)
	}
	for _, c := range []struct {
		field, env string
		n, max     int
	}{
		{"meta", "WORKSPACE_MAX_META_BYTES", len(meta), s.limits.MetaBytes},
		{"calculatedFields", "WORKSPACE_MAX_CALCULATED_FIELDS_BYTES", len(calculated), s.limits.CalculatedFieldsBytes},
		{"dashboardDraft", "WORKSPACE_MAX_DRAFT_BYTES", draftBytes, s.limits.DraftBytes},
	} {
		if c.n > c.max {
			return errs.New(errs.TooLarge, "%s is %d bytes, over the limit of %d bytes (%s)", c.field, c.n, c.max, c.env)
		}
	}
	return nil
}

// CreateFolderInput is the body of folder creation.
type CreateFolderInput struct {
	Name     string
	ParentID int64 // 0: the root
	Position *float64
}

// CreateItemInput is the body of workbook and report creation.
type CreateItemInput struct {
	Name             string
	FolderID         int64
	Meta             json.RawMessage
	CalculatedFields json.RawMessage
	DashboardDraft   *DashboardConfig
}

// BulkFailure is one item that did not move.
type BulkFailure struct {
	Ref ItemRef
	Err *errs.Error
}

// BulkMoveResult is the outcome of a bulk move, in request order.
type BulkMoveResult struct {
	Moved  []Workbook
	Failed []BulkFailure
	// From is where each item was before the request (0: the root), for the items the
	// request read: what the audit trail records of a move.
	From map[ItemRef]int64
}

// Page is one page of a folder's children.
type Page struct {
	Items       []ItemSummary
	HasNextPage bool
	EndCursor   *string
}

// request is the state of one request: the part of the folder tree it has read and, for
// a request that changes the tree's structure, the tree version that part was read at.
type request struct {
	s    *service
	p    *identity.Principal
	dep  int64
	v    int64
	tree *tree
	// loaded: the tree version has been read (load) and r.v is the version the tree
	// read since then is checked against.
	loaded bool
	users  map[int64]User // users read so far (creators)
}

// usersFor returns the users among ids, reading only those not read yet.
func (s *service) usersFor(ctx context.Context, r *request, ids []int64) (map[int64]User, error) {
	if r.users == nil {
		r.users = map[int64]User{}
	}
	var missing []int64
	for _, id := range ids {
		if _, ok := r.users[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		got, err := s.store.Users(ctx, missing)
		if err != nil {
			return nil, err
		}
		for _, id := range missing {
			r.users[id] = got[id] // the zero User: not known
		}
	}
	return r.users, nil
}

func (s *service) begin(ctx context.Context, p *identity.Principal, dep int64) (*request, error) {
	if p == nil || p.User == nil {
		return nil, forbiddenf("the workspace needs a user's bearer token")
	}
	s.recordUser(ctx, p)
	return &request{s: s, p: p, dep: dep, tree: newTree()}, nil
}

// load reads the tree version and finishes the structural op recorded there
// (idempotent), then forgets what the request had read: every folder read afterwards
// reflects that version or a later one, and a later one makes the commit's
// compare-and-set fail, so what a committed change was checked against is exactly the
// tree at the version it replaced.
func (r *request) load(ctx context.Context) error {
	d, err := r.s.store.ReadTree(ctx, r.dep)
	if err != nil {
		return err
	}
	if v, ok := r.s.applied.Load(r.dep); d.Op != nil && (!ok || v.(int64) != d.V) {
		if err := r.s.store.ApplyTreeOp(ctx, d.V, d.Op); err != nil {
			return err
		}
		if d.Op.Kind == OpMove && d.Op.Depth == 0 {
			if err := r.s.store.SettleLegacyOp(ctx, r.dep, d.V); err != nil {
				return err
			}
		}
		r.s.applied.Store(r.dep, d.V)
	}
	r.v, r.tree, r.loaded = d.V, newTree(), true
	return nil
}

// addDocs puts the folders among docs into the tree.
func (r *request) addDocs(docs ...*Item) {
	for _, d := range docs {
		if d != nil && d.Type == TypeFolder {
			r.tree.add(&FolderNode{ID: d.ID, Parent: d.Parent, Name: d.Name, Position: d.Position, CreatedBy: d.CreatedBy,
				Grants: d.Grants, Anc: d.Anc, Depth: d.Depth})
		}
	}
}

// need loads folders ids (0, the root, is skipped) and their ancestor chains: at most
// two queries, one for the folders not yet read and one for their ancestors not yet read.
// A folder that does not exist stays missing (the caller answers 404). A chain that does
// not add up was read while a structural op was half applied, or was written before
// folders kept their ancestors: the op is finished (or the deployment backfilled) and the
// chains read again.
func (r *request) need(ctx context.Context, ids ...int64) error {
	for attempt := 0; ; attempt++ {
		var missing []int64
		for _, id := range ids {
			if id != 0 && r.tree.folders[id] == nil && !containsID(missing, id) {
				missing = append(missing, id)
			}
		}
		nodes, err := r.s.store.Folders(ctx, r.dep, missing)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			r.tree.add(n)
		}
		var anc []int64
		for _, id := range ids {
			if n := r.tree.folders[id]; n != nil {
				for _, a := range n.Anc {
					if r.tree.folders[a] == nil && !containsID(anc, a) {
						anc = append(anc, a)
					}
				}
			}
		}
		if nodes, err = r.s.store.Folders(ctx, r.dep, anc); err != nil {
			return err
		}
		for _, n := range nodes {
			r.tree.add(n)
		}
		broken, unmigrated := false, false
		for _, id := range ids {
			if n := r.tree.folders[id]; n != nil && !r.tree.complete(id) {
				broken = true
				unmigrated = unmigrated || n.Depth == 0
			}
		}
		if !broken {
			return nil
		}
		if attempt == 3 {
			return busyf("the workspace tree kept changing while it was read; retry")
		}
		if unmigrated {
			if err := r.s.store.BackfillAncestors(ctx, r.dep); err != nil {
				return err
			}
		}
		if err := r.load(ctx); err != nil {
			return err
		}
	}
}

// needSubtree loads every folder below each of ids (one query for all of them).
func (r *request) needSubtree(ctx context.Context, ids ...int64) error {
	var missing []int64
	for _, id := range ids {
		if !r.tree.subtree[id] {
			missing = append(missing, id)
		}
	}
	nodes, err := r.s.store.SubtreeFolders(ctx, r.dep, missing)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if r.tree.folders[n.ID] == nil {
			r.tree.add(n)
		}
	}
	for _, id := range missing {
		r.tree.subtree[id] = true
	}
	return nil
}

// commit validates and records one structural change against the tree as read at the
// request's version, then applies it. prepare reads what build needs (it runs again
// after a reload). When another change got in first, the tree is read again and the
// change validated again, so nothing is ever written that was checked against a stale
// tree. The op is recorded before it is applied: a crash in between leaves a validated
// op that the next structural change of the deployment applies first.
func (r *request) commit(ctx context.Context, prepare func(ctx context.Context) error, build func(t *tree) (*TreeOp, error)) error {
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		if attempt > 0 || !r.loaded {
			if err := r.load(ctx); err != nil {
				return err
			}
		}
		if err := prepare(ctx); err != nil {
			return err
		}
		op, err := build(r.tree)
		if err != nil || op == nil {
			return err
		}
		ok, err := r.s.store.CommitTreeOp(ctx, r.dep, r.v, op)
		if err != nil {
			return err
		}
		if !ok {
			r.s.treeConflicts.Inc()
			continue
		}
		r.v++
		if err := r.s.store.ApplyTreeOp(ctx, r.v, op); err != nil {
			return err
		}
		r.s.applied.Store(r.dep, r.v)
		r.tree.apply(op)
		return nil
	}
	// Leave a current tree behind: the later items of a bulk move are checked against it.
	if err := r.load(ctx); err != nil {
		return err
	}
	return busyf("the workspace tree kept changing during the request; retry")
}

// recordUser keeps the users projection that renders `user` of items, writing only when
// this replica has not recorded the same details yet.
func (s *service) recordUser(ctx context.Context, p *identity.Principal) {
	u := User{ID: p.User.ID, Account: p.Account.ID, Email: p.User.Email, FirstName: p.User.FirstName, Picture: p.User.Picture, Role: p.User.Role}
	if prev, ok := s.seen.Load(u.ID); ok && prev.(User) == u {
		return
	}
	if err := s.store.RecordUser(ctx, u); err == nil {
		s.seen.Store(u.ID, u)
	}
}

func validName(field, name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", invalidf("%s is required and must not be blank", field)
	case len([]rune(name)) > MaxNameLength:
		return "", invalidf("%s must be at most %d characters", field, MaxNameLength)
	}
	return name, nil
}

// CreateFolder creates a folder at the root or in a parent the caller can edit.
func (s *service) CreateFolder(ctx context.Context, p *identity.Principal, dep int64, in CreateFolderInput) (Folder, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return Folder{}, err
	}
	name, err := validName("name", in.Name)
	if err != nil {
		return Folder{}, err
	}
	if !p.HasRole(identity.RoleAIBIUser) {
		return Folder{}, forbiddenf("creating a folder needs the ai_bi_user role or higher")
	}
	if err := s.checkRoom(ctx, dep); err != nil {
		return Folder{}, err
	}
	id, err := s.store.NextID(ctx)
	if err != nil {
		return Folder{}, err
	}
	now := s.now()
	leased := false
	defer func() {
		if leased {
			s.release(ctx, dep, in.ParentID)
		}
	}()
	pos := 0.0
	if in.Position != nil {
		pos = *in.Position
	} else {
		max, err := s.store.MaxFolderPosition(ctx, dep, in.ParentID)
		if err != nil {
			return Folder{}, err
		}
		pos = max + 1
	}
	var doc *Item
	err = r.commit(ctx, func(ctx context.Context) error { return r.need(ctx, in.ParentID) }, func(t *tree) (*TreeOp, error) {
		if in.ParentID != 0 {
			if t.folders[in.ParentID] == nil {
				return nil, notFound(TypeFolder, in.ParentID)
			}
			if t.folderLevel(p, in.ParentID) < LevelEdit {
				return nil, forbiddenf("you need edit access to folder %d to create a folder in it", in.ParentID)
			}
			if lvl := t.level(in.ParentID) + 1; lvl > MaxDepth {
				return nil, invalidf("folder %d is at level %d: a folder in it would be at level %d, and folders nest at most %d levels deep", in.ParentID, lvl-1, lvl, MaxDepth).WithCode(httpx.CodeDepthLimit)
			}
			if !leased {
				ok, err := s.store.LeaseFolder(ctx, dep, in.ParentID, now, now.Add(leaseTTL))
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, notFound(TypeFolder, in.ParentID)
				}
				leased = true
			}
		}
		anc, depth := t.ancestorsOf(in.ParentID)
		doc = &Item{ID: id, DeploymentID: dep, Type: TypeFolder, Name: name, Position: pos, Parent: in.ParentID,
			CreatedBy: p.User.ID, UpdatedBy: p.User.ID, CreatedAt: now, UpdatedAt: now, Anc: anc, Depth: depth}
		return &TreeOp{Kind: OpCreate, Folder: id, To: in.ParentID, By: p.User.ID, At: now, Created: doc}, nil
	})
	if err != nil {
		return Folder{}, err
	}
	return s.renderFolder(ctx, r, doc)
}

func (s *service) renderFolder(ctx context.Context, r *request, d *Item) (Folder, error) {
	users, err := s.usersFor(ctx, r, []int64{d.CreatedBy})
	if err != nil {
		return Folder{}, err
	}
	fav, err := s.store.FavoriteSet(ctx, r.dep, r.p.User.ID, []int64{d.ID})
	if err != nil {
		return Folder{}, err
	}
	isFav := fav[d.ID]
	return Folder{ID: d.ID, DeploymentID: d.DeploymentID, Name: d.Name, Position: d.Position, Type: TypeFolder,
		CreatedAt: formatTime(d.CreatedAt), UpdatedAt: formatTime(d.UpdatedAt), CreatedBy: d.CreatedBy, UpdatedBy: d.UpdatedBy,
		ParentID: optionalID(d.Parent), FolderPath: r.tree.path(d.Parent), User: owner(users, d.CreatedBy), IsFavorite: &isFav}, nil
}

// release gives a folder lease back, even when the request's context has ended.
func (s *service) release(ctx context.Context, dep, folder int64) {
	_ = s.store.ReleaseFolder(context.WithoutCancel(ctx), dep, folder)
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func optionalID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

func owner(users map[int64]User, id int64) *ResourceOwner {
	u, ok := users[id]
	if !ok || u.ID == 0 {
		return nil
	}
	o := &ResourceOwner{ID: u.ID, Email: u.Email}
	if u.FirstName != "" {
		o.FirstName = &u.FirstName
	}
	if u.Picture != "" {
		o.Picture = &u.Picture
	}
	return o
}

// folderForRead loads the snapshot and checks the caller's level on folder id.
func (s *service) folderForRead(ctx context.Context, p *identity.Principal, dep, id int64, need Level, verb string) (*request, error) {
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return nil, err
	}
	if err := r.need(ctx, id); err != nil {
		return nil, err
	}
	if r.tree.folders[id] == nil {
		return nil, notFound(TypeFolder, id)
	}
	if r.tree.folderLevel(p, id) < need {
		return nil, forbiddenf("you need %s access to folder %d to %s", need, id, verb)
	}
	return r, nil
}

// GetFolder returns a folder the caller can view.
func (s *service) GetFolder(ctx context.Context, p *identity.Principal, dep, id int64) (Folder, error) {
	r, err := s.folderForRead(ctx, p, dep, id, LevelView, "view it")
	if err != nil {
		return Folder{}, err
	}
	docs, err := s.store.Items(ctx, dep, []int64{id})
	if err != nil {
		return Folder{}, err
	}
	d := docs[id]
	if d == nil || d.Type != TypeFolder {
		return Folder{}, notFound(TypeFolder, id)
	}
	return s.renderFolder(ctx, r, d)
}

// UpdateFolder renames or repositions a folder the caller can edit.
func (s *service) UpdateFolder(ctx context.Context, p *identity.Principal, dep, id int64, name *string, position *float64) (Folder, error) {
	u := ItemUpdate{Position: position}
	if name != nil {
		n, err := validName("name", *name)
		if err != nil {
			return Folder{}, err
		}
		u.Name = &n
	}
	if name == nil && position == nil {
		return Folder{}, invalidf("nothing to update: send name and/or position")
	}
	r, err := s.folderForRead(ctx, p, dep, id, LevelEdit, "change it")
	if err != nil {
		return Folder{}, err
	}
	u.UpdatedAt, u.UpdatedBy = s.now(), p.User.ID
	d, err := s.store.UpdateItem(ctx, dep, id, TypeFolder, ItemPrecondition{}, u)
	if err != nil {
		return Folder{}, err
	}
	if d == nil {
		return Folder{}, notFound(TypeFolder, id)
	}
	if n := r.tree.folders[id]; n != nil {
		n.Name = d.Name
	}
	return s.renderFolder(ctx, r, d)
}

// DeleteFolder deletes an empty folder the caller manages. The folder is marked as being
// deleted (refused while a request holds a lease on it for putting items in), the last
// structural op is finished, and only then is emptiness checked: nothing can land in it
// after the check.
func (s *service) DeleteFolder(ctx context.Context, p *identity.Principal, dep, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	if _, err := s.folderForRead(ctx, p, dep, id, LevelManage, "delete it"); err != nil {
		return err
	}
	now := s.now()
	ok, err := s.store.BeginFolderDelete(ctx, dep, id, now, now.Add(leaseTTL))
	if err != nil {
		return err
	}
	if !ok {
		return conflictf("folder %d is receiving items right now; retry the delete shortly", id)
	}
	r := &request{s: s, p: p, dep: dep}
	if err := r.load(ctx); err != nil {
		_ = s.store.EndFolderDelete(context.WithoutCancel(ctx), dep, id, false, p.User.ID, now)
		return err
	}
	busy, err := s.store.HasChildren(ctx, dep, id)
	if err != nil || busy {
		_ = s.store.EndFolderDelete(context.WithoutCancel(ctx), dep, id, false, p.User.ID, now)
		if err != nil {
			return err
		}
		return conflictf("folder %d is not empty: move or delete its contents first", id).WithCode(httpx.CodeFolderNotEmpty)
	}
	return s.store.EndFolderDelete(ctx, dep, id, true, p.User.ID, now)
}

// GetPermissions returns the grants set directly on a folder the caller manages.
func (s *service) GetPermissions(ctx context.Context, p *identity.Principal, dep, id int64) ([]Grant, error) {
	r, err := s.folderForRead(ctx, p, dep, id, LevelManage, "see its permissions")
	if err != nil {
		return nil, err
	}
	return sortedGrants(r.tree.folders[id].Grants), nil
}

// SetPermissions replaces the grants of a folder the caller manages.
func (s *service) SetPermissions(ctx context.Context, p *identity.Principal, dep, id int64, grants []Grant) ([]Grant, error) {
	seen := map[int64]bool{}
	for i, g := range grants {
		if g.UserID <= 0 {
			return nil, invalidf("grants[%d].userId must be a positive integer", i)
		}
		if _, ok := ParseLevel(g.Level); !ok {
			return nil, invalidf("grants[%d].level must be one of view, edit, manage, not %q", i, g.Level)
		}
		if seen[g.UserID] {
			return nil, invalidf("grants[%d].userId %d is listed twice", i, g.UserID)
		}
		seen[g.UserID] = true
	}
	if _, err := s.folderForRead(ctx, p, dep, id, LevelManage, "change its permissions"); err != nil {
		return nil, err
	}
	if grants == nil {
		grants = []Grant{}
	}
	d, err := s.store.UpdateItem(ctx, dep, id, TypeFolder, ItemPrecondition{}, ItemUpdate{Grants: &grants, UpdatedAt: s.now(), UpdatedBy: p.User.ID})
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, notFound(TypeFolder, id)
	}
	return sortedGrants(d.Grants), nil
}

// Move moves one item; it is BulkMove of one item, so both answer the same.
func (s *service) Move(ctx context.Context, p *identity.Principal, dep int64, ref ItemRef, dest int64) (Workbook, error) {
	res, err := s.BulkMove(ctx, p, dep, []ItemRef{ref}, dest)
	if err != nil {
		return Workbook{}, err
	}
	if len(res.Failed) > 0 {
		return Workbook{}, res.Failed[0].Err
	}
	return res.Moved[0], nil
}

// BulkMove moves items, one at a time in order, into dest (0: the root). Repeated
// references collapse to the first. Each item is its own single-document write (a folder
// move is recorded in the tree version first, see commit); a failed item does not undo
// earlier ones.
// BulkMove answers one outcome per distinct item, also when the store fails midway:
// items applied before a fault are in Moved, the rest in Failed with a 503 that says they
// were not applied (Rule 2: 200 whenever the request is well formed; Rule 4: an empty
// Failed means everything applied). Each item has its own deadline (writeDeadline).
func (s *service) BulkMove(ctx context.Context, p *identity.Principal, dep int64, refs []ItemRef, dest int64) (BulkMoveResult, error) {
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return BulkMoveResult{}, err
	}
	distinct := make([]ItemRef, 0, len(refs))
	seen := map[ItemRef]bool{}
	ids := make([]int64, 0, len(refs))
	for _, ref := range refs {
		if !seen[ref] {
			seen[ref] = true
			distinct = append(distinct, ref)
			ids = append(ids, ref.ID)
		}
	}
	res := BulkMoveResult{Moved: []Workbook{}, Failed: []BulkFailure{}}
	// notApplied fails every item from i on. Item i was being moved when the store
	// failed, so its write may or may not have landed (a reply lost with the connection);
	// the items after it were not touched.
	notApplied := func(i int, inFlight bool, cause error) (BulkMoveResult, error) {
		reason := "the workspace store failed"
		if errors.Is(cause, context.DeadlineExceeded) {
			reason = "the item's deadline passed"
		}
		for j, ref := range distinct[i:] {
			if j == 0 && inFlight {
				res.fail(ref, notAppliedf("%s %d may not have been moved: %s while moving it; check where it is and retry", ref.Type.lower(), ref.ID, reason))
				continue
			}
			res.fail(ref, notAppliedf("%s %d was not moved: %s; retry it", ref.Type.lower(), ref.ID, reason))
		}
		return res, nil
	}
	pctx, cancel := context.WithTimeout(ctx, writeDeadline)
	docs, err := s.loadForMove(pctx, r, distinct, dest)
	cancel()
	if err != nil {
		if _, ok := errs.As(err); ok {
			return BulkMoveResult{}, err
		}
		return notApplied(0, false, err)
	}
	res.From = make(map[ItemRef]int64, len(docs))
	for _, ref := range distinct {
		if d := docs[ref.ID]; d != nil && d.Type == ref.Type {
			res.From[ref] = d.Parent
		}
	}
	var movedDocs []*Item
	leased, destGone := false, false
	var leaseCtx context.Context // the item being moved's context, for the lease write
	lease := func() error {      // once per request, before the first write into dest
		if dest == 0 || leased {
			return nil
		}
		now := s.now()
		ok, err := s.store.LeaseFolder(leaseCtx, dep, dest, now, now.Add(leaseTTL))
		if err != nil {
			return err
		}
		leased, destGone = true, !ok
		return nil
	}
	defer func() {
		if leased && !destGone {
			s.release(ctx, dep, dest)
		}
	}()
	for i, ref := range distinct {
		d := docs[ref.ID]
		if d == nil || d.Type != ref.Type {
			res.fail(ref, notFound(ref.Type, ref.ID))
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, writeDeadline)
		leaseCtx = ictx
		var ferr error
		if ref.Type == TypeFolder {
			ferr = s.moveFolder(ictx, r, d, dest, lease, &destGone)
		} else {
			ferr = s.moveItem(ictx, r, d, dest, lease, &destGone)
		}
		cancel()
		if f, ok := errs.As(ferr); ok {
			res.fail(ref, f)
			continue
		}
		if ferr != nil {
			// The store failed: the moved items are rendered without their owners (no
			// further wait on it), and the rest are reported not applied at once.
			if len(movedDocs) > 0 {
				res.Moved = s.renderWithoutOwners(r.tree, movedDocs)
			}
			return notApplied(i, true, ferr)
		}
		movedDocs = append(movedDocs, d)
	}
	if len(movedDocs) > 0 {
		_ = r.need(ctx, dest) // read again only if a conflict made the request forget it
		out, err := s.render(ctx, r, movedDocs)
		if err != nil {
			out = s.renderWithoutOwners(r.tree, movedDocs) // moved all the same
		}
		res.Moved = out
	}
	return res, nil
}

func (res *BulkMoveResult) fail(ref ItemRef, err *errs.Error) {
	res.Failed = append(res.Failed, BulkFailure{Ref: ref, Err: err})
}

// checkDestination is the part of a move's checks that concerns where the item goes.
func checkDestination(t *tree, p *identity.Principal, dest int64, destGone bool) *errs.Error {
	if dest != 0 && (destGone || t.folders[dest] == nil) {
		return notFound(TypeFolder, dest)
	}
	return nil
}

func checkDestinationAccess(t *tree, p *identity.Principal, dest int64) *errs.Error {
	if t.containerLevel(p, dest) >= LevelEdit {
		return nil
	}
	if dest == 0 {
		return forbiddenf("moving items to the workspace root needs the ai_bi_user role or higher")
	}
	return forbiddenf("you need edit access to folder %d to move items into it", dest)
}

// loadForMove reads what a move of refs into dest is checked against, in a fixed number
// of queries whatever the number of items: the tree version (when a folder moves), the items and the
// destination (one query), the folders holding the workbooks and reports (one), every
// ancestor of all of them (one), and the subtrees of the moved folders (one).
func (s *service) loadForMove(ctx context.Context, r *request, refs []ItemRef, dest int64) (map[int64]*Item, error) {
	// Only folder moves compare-and-set the tree version (moveFolder's commit); workbooks
	// and reports move with a conditional update of their own document.
	for _, ref := range refs {
		if ref.Type == TypeFolder {
			if err := r.load(ctx); err != nil {
				return nil, err
			}
			break
		}
	}
	ids := make([]int64, 0, len(refs)+1)
	for _, ref := range refs {
		ids = append(ids, ref.ID)
	}
	if dest != 0 {
		ids = append(ids, dest)
	}
	docs, err := s.store.Items(ctx, r.dep, ids)
	if err != nil {
		return nil, err
	}
	var chains, folders []int64
	if d := docs[dest]; d != nil && d.Type == TypeFolder {
		r.addDocs(d)
	}
	if dest != 0 {
		chains = append(chains, dest)
	}
	for _, ref := range refs {
		d := docs[ref.ID]
		switch {
		case d == nil || d.Type != ref.Type:
		case d.Type == TypeFolder:
			r.addDocs(d)
			chains, folders = append(chains, d.ID), append(folders, d.ID)
		default:
			chains = append(chains, d.Parent)
		}
	}
	if err := r.need(ctx, chains...); err != nil {
		return nil, err
	}
	if err := r.needSubtree(ctx, folders...); err != nil {
		return nil, err
	}
	var found []*Item
	for _, ref := range refs {
		if d := docs[ref.ID]; d != nil {
			found = append(found, d)
		}
	}
	// The creators: to render the moved items, and to keep each workbook and report
	// visible to its creator (moveItem).
	if _, err := s.usersFor(ctx, r, creators(found)); err != nil {
		return nil, err
	}
	return docs, nil
}

func (s *service) moveFolder(ctx context.Context, r *request, d *Item, dest int64, lease func() error, destGone *bool) error {
	p := r.p
	prepare := func(ctx context.Context) error {
		if err := r.need(ctx, d.ID, dest); err != nil {
			return err
		}
		return r.needSubtree(ctx, d.ID)
	}
	return r.commit(ctx, prepare, func(t *tree) (*TreeOp, error) {
		if t.folders[d.ID] == nil {
			return nil, notFound(TypeFolder, d.ID)
		}
		if f := checkDestination(t, p, dest, *destGone); f != nil {
			return nil, f
		}
		if t.folderLevel(p, d.ID) < LevelEdit {
			return nil, forbiddenf("you need edit access to folder %d to move it", d.ID)
		}
		if f := checkDestinationAccess(t, p, dest); f != nil {
			return nil, f
		}
		if dest != 0 && t.isSelfOrDescendant(dest, d.ID) {
			return nil, invalidf("cannot move folder %d into itself or one of its descendants (folder %d)", d.ID, dest).WithCode(httpx.CodeFolderCycle)
		}
		if deepest := t.level(dest) + t.height(d.ID); deepest > MaxDepth {
			return nil, invalidf("moving folder %d there would put a folder at level %d: folders nest at most %d levels deep", d.ID, deepest, MaxDepth).WithCode(httpx.CodeDepthLimit)
		}
		cur := t.folders[d.ID]
		d.Parent, d.Name, d.Position, d.Grants = cur.Parent, cur.Name, cur.Position, cur.Grants
		if cur.Parent == dest {
			return nil, nil // already there: nothing to record
		}
		if err := lease(); err != nil {
			return nil, err
		}
		if *destGone {
			return nil, notFound(TypeFolder, dest)
		}
		now := s.now()
		d.Parent, d.UpdatedAt, d.UpdatedBy = dest, now, p.User.ID
		op := t.moveOp(d.ID, dest)
		op.By, op.At = p.User.ID, now
		return op, nil
	})
}

func (s *service) moveItem(ctx context.Context, r *request, d *Item, dest int64, lease func() error, destGone *bool) error {
	p := r.p
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		if err := r.need(ctx, d.Parent, dest); err != nil {
			return err
		}
		t := r.tree
		if f := checkDestination(t, p, dest, *destGone); f != nil {
			return f
		}
		if t.itemLevel(p, d.CreatedBy, d.Parent) < LevelEdit {
			return forbiddenf("you need edit access to %s %d to move it", d.Type.lower(), d.ID)
		}
		if f := checkDestinationAccess(t, p, dest); f != nil {
			return f
		}
		if d.Parent == dest {
			return nil
		}
		// No item becomes invisible to its creator through someone else's move: that
		// needs manage on the item, not just edit.
		if d.CreatedBy != p.User.ID && !r.creatorCanView(d.CreatedBy, dest) && t.itemLevel(p, d.CreatedBy, d.Parent) < LevelManage {
			return forbiddenf("moving %s %d into folder %d would hide it from its creator (user %d cannot view that folder); that needs manage access to the %s",
				d.Type.lower(), d.ID, dest, d.CreatedBy, d.Type.lower())
		}
		if err := lease(); err != nil {
			return err
		}
		if *destGone {
			return notFound(TypeFolder, dest)
		}
		now := s.now()
		ok, err := s.store.MoveItem(ctx, r.dep, d.ID, d.Parent, dest, p.User.ID, now)
		if err != nil {
			return err
		}
		if ok {
			d.Parent, d.UpdatedAt, d.UpdatedBy = dest, now, p.User.ID
			return nil
		}
		// Moved or deleted since we read it: check again against where it is now.
		fresh, err := s.store.Items(ctx, r.dep, []int64{d.ID})
		if err != nil {
			return err
		}
		nd := fresh[d.ID]
		if nd == nil || nd.Type != d.Type {
			return notFound(d.Type, d.ID)
		}
		*d = *nd
	}
	return busyf("%s %d kept changing during the move; retry", d.Type.lower(), d.ID)
}

// render serializes items in the Workbook shape, loading their creators and the caller's
// favorites among them at once.
func (s *service) render(ctx context.Context, r *request, docs []*Item) ([]Workbook, error) {
	users, err := s.usersFor(ctx, r, creators(docs))
	if err != nil {
		return nil, err
	}
	fav, err := s.store.FavoriteSet(ctx, r.dep, r.p.User.ID, idsOf(docs))
	if err != nil {
		return nil, err
	}
	out := make([]Workbook, len(docs))
	for i, d := range docs {
		out[i] = renderItem(r.tree, users, d)
		isFav := fav[d.ID]
		out[i].IsFavorite = &isFav
	}
	return out, nil
}

func idsOf(docs []*Item) []int64 {
	out := make([]int64, len(docs))
	for i, d := range docs {
		out[i] = d.ID
	}
	return out
}

// renderWithoutOwners renders docs with no user lookup (their `user` is null).
func (s *service) renderWithoutOwners(t *tree, docs []*Item) []Workbook {
	out := make([]Workbook, len(docs))
	for i, d := range docs {
		out[i] = renderItem(t, nil, d)
	}
	return out
}

var emptyObject = json.RawMessage(`{}`)

func rawOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return emptyObject
	}
	return raw
}

var slugUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// slugOf is `<name-slug>-<id>` for workbooks and reports, nil for folders.
func slugOf(d *Item) *string {
	if d.Type == TypeFolder {
		return nil
	}
	slug := strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(d.Name), "-"), "-")
	slug = strings.TrimPrefix(slug+"-", "-") + fmt.Sprint(d.ID)
	return &slug
}

func renderItem(t *tree, users map[int64]User, d *Item) Workbook {
	createdBy := d.CreatedBy
	w := Workbook{ID: d.ID, DeploymentID: d.DeploymentID, Name: d.Name, Type: d.Type,
		Meta: rawOrEmpty(d.Meta), CalculatedFields: rawOrEmpty(d.CalculatedFields),
		CreatedAt: formatTime(d.CreatedAt), UpdatedAt: formatTime(d.UpdatedAt), CreatedBy: d.CreatedBy,
		UserID: &createdBy, User: owner(users, d.CreatedBy), FolderID: optionalID(d.Parent), FolderPath: t.path(d.Parent)}
	w.Slug = slugOf(d)
	w.DashboardDraft = d.Draft
	if d.Published != nil {
		w.PublishedDashboard = d.Published
		cfg := d.Published.Config
		w.DashboardPublished = &cfg
	}
	return w
}

// CreateItem creates a workbook or report at the root or in a folder the caller can edit.
func (s *service) CreateItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, in CreateItemInput) (Workbook, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return Workbook{}, err
	}
	name, err := validName("name", in.Name)
	if err != nil {
		return Workbook{}, err
	}
	if err := in.DashboardDraft.Validate("dashboardDraft"); err != nil {
		return Workbook{}, err
	}
	if !p.HasRole(identity.RoleAIBIUser) {
		return Workbook{}, forbiddenf("creating a %s needs the ai_bi_user role or higher", typ.lower())
	}
	if err := s.checkSizes(in.Meta, in.CalculatedFields, in.DashboardDraft); err != nil {
		return Workbook{}, err
	}
	if err := s.checkRoom(ctx, dep); err != nil {
		return Workbook{}, err
	}
	if err := r.need(ctx, in.FolderID); err != nil {
		return Workbook{}, err
	}
	if in.FolderID != 0 {
		if r.tree.folders[in.FolderID] == nil {
			return Workbook{}, notFound(TypeFolder, in.FolderID)
		}
		if r.tree.folderLevel(p, in.FolderID) < LevelEdit {
			return Workbook{}, forbiddenf("you need edit access to folder %d to create a %s in it", in.FolderID, typ.lower())
		}
		now := s.now()
		ok, err := s.store.LeaseFolder(ctx, dep, in.FolderID, now, now.Add(leaseTTL))
		if err != nil {
			return Workbook{}, err
		}
		if !ok {
			return Workbook{}, notFound(TypeFolder, in.FolderID)
		}
		defer s.release(ctx, dep, in.FolderID)
	}
	id, err := s.store.NextID(ctx)
	if err != nil {
		return Workbook{}, err
	}
	now := s.now()
	d := &Item{ID: id, DeploymentID: dep, Type: typ, Name: name, Parent: in.FolderID, CreatedBy: p.User.ID, UpdatedBy: p.User.ID,
		CreatedAt: now, UpdatedAt: now, Meta: in.Meta, CalculatedFields: in.CalculatedFields, Draft: in.DashboardDraft}
	if err := s.store.InsertItem(ctx, d); err != nil {
		return Workbook{}, err
	}
	out, err := s.render(ctx, r, []*Item{d})
	if err != nil {
		return Workbook{}, err
	}
	return out[0], nil
}

// itemForAccess loads a workbook or report and checks the caller's level on it.
func (s *service) itemForAccess(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, id int64, need Level, verb string) (*request, *Item, error) {
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return nil, nil, err
	}
	docs, err := s.store.Items(ctx, dep, []int64{id})
	if err != nil {
		return nil, nil, err
	}
	d := docs[id]
	if d == nil || d.Type != typ {
		return nil, nil, notFound(typ, id)
	}
	if err := r.need(ctx, d.Parent); err != nil {
		return nil, nil, err
	}
	if r.tree.itemLevel(p, d.CreatedBy, d.Parent) < need {
		return nil, nil, forbiddenf("you need %s access to %s %d to %s", need, typ.lower(), id, verb)
	}
	return r, d, nil
}

// GetItem returns a workbook or report the caller can view.
func (s *service) GetItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, id int64) (Workbook, error) {
	r, d, err := s.itemForAccess(ctx, p, dep, typ, id, LevelView, "view it")
	if err != nil {
		return Workbook{}, err
	}
	out, err := s.render(ctx, r, []*Item{d})
	if err != nil {
		return Workbook{}, err
	}
	return out[0], nil
}

// Publish turns a workbook's dashboard draft into its published dashboard: a new
// version number and version id, the same dashboard id and public id as before, and a
// snapshot of each report that a widget refers to by `config.reportId`.
// The dashboard's createdBy stays its first publisher and updatedBy is the last;
// allowEmbed is what the publish says, else what the previous version had (true at first).
func (s *service) Publish(ctx context.Context, p *identity.Principal, dep, id int64, allowEmbed *bool) (Workbook, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		r, d, err := s.itemForAccess(ctx, p, dep, TypeWorkbook, id, LevelEdit, "publish it")
		if err != nil {
			return Workbook{}, err
		}
		if d.Draft == nil {
			return Workbook{}, conflictf("workbook %d has no dashboard draft to publish", id)
		}
		cfg := *d.Draft
		dashID, publicID := d.DashboardID, d.PublicID
		if dashID == 0 {
			if dashID, err = s.store.NextID(ctx); err != nil {
				return Workbook{}, err
			}
			var b [12]byte
			_, _ = rand.Read(b[:])
			publicID = base64.RawURLEncoding.EncodeToString(b[:])
		}
		versionID, err := s.store.NextID(ctx)
		if err != nil {
			return Workbook{}, err
		}
		version := d.PublishedVersion + 1
		snaps, err := s.snapshotReports(ctx, r, cfg, version)
		if err != nil {
			return Workbook{}, err
		}
		createdBy, updatedBy, embed := p.User.ID, p.User.ID, true
		if prev := d.Published; prev != nil {
			if prev.CreatedBy != nil {
				createdBy = *prev.CreatedBy
			}
			embed = prev.AllowEmbed
		}
		if allowEmbed != nil {
			embed = *allowEmbed
		}
		dash := Dashboard{ID: dashID, PublicID: publicID, DeploymentID: dep, WorkbookID: id, Status: StatusPublished,
			AllowEmbed: embed, Config: cfg, VersionNumber: version, VersionID: versionID, ReportSnapshots: snaps,
			CreatedBy: &createdBy, UpdatedBy: &updatedBy, Title: cfg.Title, Description: cfg.Description}
		nd, err := s.store.UpdateItem(ctx, dep, id, TypeWorkbook, ItemPrecondition{PublishedVersion: &d.PublishedVersion},
			ItemUpdate{Published: &dash, UpdatedAt: s.now(), UpdatedBy: p.User.ID})
		if err != nil {
			return Workbook{}, err
		}
		if nd == nil {
			continue // published or moved concurrently: start over
		}
		out, err := s.render(ctx, r, []*Item{nd})
		if err != nil {
			return Workbook{}, err
		}
		return out[0], nil
	}
	return Workbook{}, busyf("workbook %d kept changing during the publish; retry", id)
}

// snapshotReports copies each report a widget names into the published dashboard, but
// only reports the publisher can view: the others are left out of the snapshot, so a
// publish never reveals a report in a folder the publisher cannot see.
func (s *service) snapshotReports(ctx context.Context, r *request, cfg DashboardConfig, version int64) ([]ReportSnapshot, error) {
	p, dep := r.p, r.dep
	var ids []int64
	for _, w := range cfg.Widgets {
		if v, ok := w.Config["reportId"].(float64); ok && v > 0 && v == float64(int64(v)) {
			ids = append(ids, int64(v))
		}
	}
	out := []ReportSnapshot{}
	if len(ids) == 0 {
		return out, nil
	}
	docs, err := s.store.Items(ctx, dep, ids)
	if err != nil {
		return nil, err
	}
	var parents []int64
	for _, d := range docs {
		parents = append(parents, d.Parent)
	}
	if err := r.need(ctx, parents...); err != nil {
		return nil, err
	}
	t := r.tree
	done := map[int64]bool{}
	for _, rid := range ids {
		d := docs[rid]
		if d == nil || d.Type != TypeReport || done[rid] || t.itemLevel(p, d.CreatedBy, d.Parent) < LevelView {
			continue
		}
		done[rid] = true
		sid, err := s.store.NextID(ctx)
		if err != nil {
			return nil, err
		}
		name := d.Name
		out = append(out, ReportSnapshot{ID: sid, ReportID: rid, VersionNumber: version, Name: &name, Title: &name, Meta: rawOrEmpty(d.Meta)})
	}
	return out, nil
}

// cursor is the sort key of the last item of a page.
type cursor struct {
	Rank     int     `json:"r"`
	Position float64 `json:"p"`
	Name     string  `json:"n"`
	ID       int64   `json:"i"`
}

func keyOf(d *Item) cursor {
	rank := 1
	if d.Type == TypeFolder {
		rank = 0
	}
	return cursor{Rank: rank, Position: d.Position, Name: d.Name, ID: d.ID}
}

// listKey is where in its batch of folders, or of workbooks and reports, the cursor is.
func (c *cursor) listKey() *ListKey {
	if c == nil {
		return nil
	}
	return &ListKey{Position: c.Position, Name: c.Name, ID: c.ID}
}

// visibleChildren returns up to first children of folder after the cursor that the caller
// can view, in page order, and whether more follow. It reads projected documents sorted
// and limited by the database, folders before workbooks and reports, each batch no larger
// than what the page still needs (plus one, to know whether more follow): when the caller
// can view everything, a page of n reads n+1 children.
func (s *service) visibleChildren(ctx context.Context, r *request, folder int64, from *cursor, first int) ([]*Item, bool, error) {
	p, t := r.p, r.tree
	var out []*Item
	for _, folders := range []bool{true, false} {
		var after *cursor
		if from != nil {
			if from.Rank == 0 && !folders {
				after = nil // the cursor is among the folders: every item follows it
			} else if from.Rank == 1 && folders {
				continue // the cursor is past every folder
			} else {
				c := *from
				after = &c
			}
		}
		for {
			limit := first + 1 - len(out)
			batch, err := s.store.Children(ctx, r.dep, ChildrenQuery{Parent: folder, Folders: folders, After: after.listKey(), Limit: limit})
			if err != nil {
				return nil, false, err
			}
			for _, d := range batch {
				var l Level
				if d.Type == TypeFolder {
					r.addDocs(d)
					l = t.folderLevel(p, d.ID)
				} else {
					l = t.itemLevel(p, d.CreatedBy, d.Parent)
				}
				if l < LevelView {
					continue
				}
				if len(out) == first {
					return out, true, nil
				}
				out = append(out, d)
			}
			if len(batch) < limit {
				break
			}
			k := keyOf(batch[len(batch)-1])
			after = &k
		}
	}
	return out, false, nil
}

// List returns one page of the children of folder (0: the root) that the caller can
// view: folders first, then by position, name and id, in the summary shape (no meta,
// calculated fields or dashboards: GET the item for those).
func (s *service) List(ctx context.Context, p *identity.Principal, dep, folder int64, first int, after string) (Page, error) {
	var from *cursor
	if after != "" {
		raw, err := base64.RawURLEncoding.DecodeString(after)
		var c cursor
		if err != nil || json.Unmarshal(raw, &c) != nil {
			return Page{}, httpx.BadCursor()
		}
		from = &c
	}
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return Page{}, err
	}
	if err := r.need(ctx, folder); err != nil {
		return Page{}, err
	}
	if folder != 0 {
		if r.tree.folders[folder] == nil {
			return Page{}, notFound(TypeFolder, folder)
		}
		if r.tree.folderLevel(p, folder) < LevelView {
			return Page{}, forbiddenf("you need view access to folder %d to list it", folder)
		}
	}
	visible, more, err := s.visibleChildren(ctx, r, folder, from, first)
	if err != nil {
		return Page{}, err
	}
	page := Page{HasNextPage: more}
	items, err := s.renderSummaries(ctx, r, visible)
	if err != nil {
		return Page{}, err
	}
	page.Items = items
	if n := len(visible); n > 0 {
		b, _ := json.Marshal(keyOf(visible[n-1]))
		c := base64.RawURLEncoding.EncodeToString(b)
		page.EndCursor = &c
	}
	return page, nil
}

// renderSummaries renders listed items in the summary shape, loading their creators at
// once.
func (s *service) renderSummaries(ctx context.Context, r *request, docs []*Item) ([]ItemSummary, error) {
	t := r.tree
	users, err := s.usersFor(ctx, r, creators(docs))
	if err != nil {
		return nil, err
	}
	fav, err := s.store.FavoriteSet(ctx, r.dep, r.p.User.ID, idsOf(docs))
	if err != nil {
		return nil, err
	}
	out := make([]ItemSummary, len(docs))
	for i, d := range docs {
		createdBy, isFav := d.CreatedBy, fav[d.ID]
		out[i] = ItemSummary{ID: d.ID, DeploymentID: d.DeploymentID, Name: d.Name, Type: d.Type, Position: d.Position,
			CreatedAt: formatTime(d.CreatedAt), UpdatedAt: formatTime(d.UpdatedAt), CreatedBy: d.CreatedBy, UpdatedBy: d.UpdatedBy,
			UserID: &createdBy, User: owner(users, d.CreatedBy), FolderID: optionalID(d.Parent), FolderPath: t.path(d.Parent), Slug: slugOf(d), IsFavorite: &isFav}
	}
	return out, nil
}

func creators(docs []*Item) []int64 {
	var ids []int64
	for _, d := range docs {
		if !containsID(ids, d.CreatedBy) {
			ids = append(ids, d.CreatedBy)
		}
	}
	return ids
}
