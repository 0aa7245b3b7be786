// Package workspace is the workspace tree of a deployment: folders, workbooks and
// reports, their access model, single and bulk moves, dashboards, favorites and search.
// It holds the Service, its domain types and rules, the ports it needs from storage
// (ports.go), its decorators and its go-kit endpoints and HTTP transport.
package workspace

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/kit"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// Limits and timings of the service.
const (
	MaxBulkItems   = 100
	MaxNameLength  = 255
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
	CreateFolder(ctx context.Context, p *identity.Principal, deploymentID int64, in CreateFolderInput) (Folder, error)
	GetFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64) (Folder, error)
	UpdateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in UpdateFolderInput) (Folder, error)
	DeleteFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64) error
	GetPermissions(ctx context.Context, p *identity.Principal, deploymentID, id int64) ([]Grant, error)
	SetPermissions(ctx context.Context, p *identity.Principal, deploymentID, id int64, grants []Grant) ([]Grant, error)
	List(ctx context.Context, p *identity.Principal, deploymentID, folder int64, first int, after string) (httpx.Page[ItemSummary], error)
	Search(ctx context.Context, p *identity.Principal, deploymentID int64, in SearchInput) (httpx.Page[ItemSummary], error)
	Move(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, dest int64) (MoveResult, error)
	BulkMove(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, dest int64) (BulkMoveResult, error)
	CreateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, in CreateItemInput) (Workbook, error)
	GetItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64) (Workbook, error)
	UpdateItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64, in UpdateItemInput) (Workbook, error)
	DeleteItem(ctx context.Context, p *identity.Principal, deploymentID int64, typ ItemType, id int64) error
	Publish(ctx context.Context, p *identity.Principal, deploymentID, id int64, allowEmbed *bool) (Workbook, error)
	Unpublish(ctx context.Context, p *identity.Principal, deploymentID, id int64) (Workbook, error)
	SetFavorite(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, on bool) error
	// Embed grants (embedgrants.go).
	GetEmbedAccess(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject) (EmbedAccessView, error)
	PutEmbedAccess(ctx context.Context, p *identity.Principal, deploymentID int64, obj EmbedObject, g embedaccess.Grants) (EmbedAccessView, error)
	TenantWorkbooks(ctx context.Context, p *identity.Principal, deploymentID int64, tenant string, in TenantWorkbooksInput) (httpx.Page[TenantWorkbook], error)
	// The embed viewer's read path (embedview.go): the session's deployment, tenant and
	// narrowing are the principal's (identity.Embed).
	EmbedDashboards(ctx context.Context, p *identity.Principal, first int, after string) (httpx.Page[EmbedDashboardSummary], error)
	EmbedDashboard(ctx context.Context, p *identity.Principal, publicID string) (Dashboard, error)
	// Create-or-replace by key (keys.go).
	KeyService
	// The published versions of workbooks' dashboards (versions.go).
	VersionService
	// The trash (trash.go).
	TrashService
	PromotionService // promotion.go
	DuplicateService // duplicate.go
	TransferService  // export and import (transfer.go)
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
	applied     sync.Map // deployment id -> int64
	limits      Limits
	viewers     ViewerGroups // nil: every embed viewer has no groups
	deployments Deployments  // nil: promotions answer 503
}

// Limits bound what clients can store; zero fields take the defaults.
type Limits struct {
	ItemsPerDeployment    int64 // folders, workbooks and reports of one deployment
	MetaBytes             int   // an item's meta JSON
	CalculatedFieldsBytes int   // an item's calculatedFields JSON
	DraftBytes            int   // a workbook's dashboard draft, as stored
	PublishedBytes        int   // a workbook's published dashboard (its config and report snapshots), as stored
	Grants                int   // grants of one folder
	EmbedAccessEntries    int   // embed access entries of one workbook, folder or the root
	Favorites             int   // favorites of one user in one deployment
	SearchScan            int   // items a search examines per page
	ListScan              int   // children a listing examines per page
	DashboardReports      int   // distinct reports (config.reportId) one dashboard draft names
	// MoveAnswerBytes bounds the moved workbooks and reports (their large parts, as
	// stored) one bulk move answers with; the first moved item always fits.
	MoveAnswerBytes int
	// DashboardVersionsKept is how many published versions of one workbook's dashboard
	// are kept: the publish past it removes the oldest.
	DashboardVersionsKept int
	// RecursiveDeleteItems bounds the items (the folder, the folders below it and the
	// workbooks and reports inside them) one recursive folder delete trashes.
	RecursiveDeleteItems int
	DuplicateItems       int // folders, workbooks and reports one duplicate creates
	// Export and import (transfer.go): an import's request body and items, an export's
	// items and its size as estimated from the stored sizes before it starts.
	ImportBytes int64
	ImportItems int
	ExportItems int
	ExportBytes int64
}

// DefaultLimits are the limits when none are configured: the defaults of the config
// tags (WORKSPACE_MAX_*), which a fitness test keeps equal (systemtest/architecture).
var DefaultLimits = Limits{ItemsPerDeployment: 100_000, MetaBytes: 256 << 10, CalculatedFieldsBytes: 256 << 10, DraftBytes: 512 << 10,
	PublishedBytes: 4 << 20, Grants: 1000, EmbedAccessEntries: embedaccess.DefaultMaxEntries, Favorites: 1000, SearchScan: 1000, ListScan: 1000, DashboardReports: 200, MoveAnswerBytes: 16 << 20,
	DashboardVersionsKept: 50, RecursiveDeleteItems: 10_000, DuplicateItems: 1000,
	ImportBytes: 64 << 20, ImportItems: 10_000, ExportItems: 10_000, ExportBytes: 64 << 20}

// WithDefaults is l with every limit not set (zero or less) at its DefaultLimits value.
func (l Limits) WithDefaults() Limits { return config.OrDefaults(l, DefaultLimits) }

// Counter counts an event; a prometheus.Counter is one.
type Counter interface{ Inc() }

type noCounter struct{}

func (noCounter) Inc() {}

// Ports are what the service is built on: its store (the tree, items, leases, users and
// favorites).
type Ports struct {
	Store Store
	// Viewers answers an embed viewer's current groups (nil: every viewer has none).
	Viewers ViewerGroups
	// Deployments answers whose a promotion's target deployment is (nil: promotions
	// answer 503).
	Deployments Deployments
}

// Options tune the service; zero values take the defaults.
type Options struct {
	Limits Limits // zero fields: DefaultLimits
	// TreeConflicts counts structural changes retried after another change of the
	// deployment committed first (nil: Metrics.TreeConflicts, or not counted).
	TreeConflicts Counter
	// What the service's decorators are built from, each nil to leave its decorator out:
	// the audit trail (audit.go), the logger of the changes done (logging.go) and the
	// domain counters (metrics.go).
	Audit   audit.Recorder
	Logger  *slog.Logger
	Metrics *Metrics
}

// NewService builds the service over p, wrapped in its decorators in the platform's
// order (kit.Decorate).
func NewService(p Ports, o Options) Service {
	treeConflicts := o.TreeConflicts
	if treeConflicts == nil && o.Metrics != nil {
		treeConflicts = o.Metrics.TreeConflicts
	}
	if treeConflicts == nil {
		treeConflicts = noCounter{}
	}
	s := &service{store: p.Store, treeConflicts: treeConflicts, limits: o.Limits.WithDefaults(), viewers: p.Viewers, deployments: p.Deployments,
		now: func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }}
	return kit.Decorate[Service](s, kit.Decorators[Service]{Audit: auditingMiddleware(o.Audit), Log: loggingMiddleware(o.Logger), Metrics: instrumentingMiddleware(o.Metrics)})
}

// CreateFolderInput is the body of folder creation.
type CreateFolderInput struct {
	Name     string
	ParentID int64 // 0: the root
	Position *float64
	Key      string // "": none (KeyPattern)
}

// UpdateFolderInput is a change of a folder; nil fields stay as they are.
type UpdateFolderInput struct {
	Name     *string
	Position *float64
	// Key sets the key of a folder without one (the key it has is a no-op, another is
	// key_immutable); ExpectedVersion requires the folder to be at that version.
	Key             *string
	ExpectedVersion *int64
}

// CreateItemInput is the body of workbook and report creation.
type CreateItemInput struct {
	Name             string
	FolderID         int64
	Meta             json.RawMessage
	CalculatedFields json.RawMessage
	DashboardDraft   *DashboardConfig
	Key              string // "": none (KeyPattern)
}

// UpdateItemInput is a change of a workbook or report; nil fields stay as they are.
type UpdateItemInput struct {
	Name             *string
	Meta             json.RawMessage
	CalculatedFields json.RawMessage
	DashboardDraft   *DashboardConfig
	// Key sets the key of an item without one (the key it has is a no-op, another is
	// key_immutable); ExpectedVersion requires the item to be at that version.
	Key             *string
	ExpectedVersion *int64
}

// SearchInput is a filtered listing: GET /workspace with q, type, createdBy, favorites or
// sort. Without folderId it covers the whole tree the caller can see; with it, that
// folder's direct children.
type SearchInput struct {
	Folder      *int64
	Q           string
	Type        ItemType
	CreatedByMe bool
	Favorites   bool
	Sort        string // name, -name, updatedAt, -updatedAt
	First       int
	After       string
}

// SearchSorts are the orders a search accepts.
var SearchSorts = []string{"name", "-name", "updatedAt", "-updatedAt"}

// BulkFailure is one item that did not move.
type BulkFailure struct {
	Ref ItemRef
	Err *errs.Error
}

// MoveResult is a single move's answer: the item as the move left it, and where it was.
type MoveResult struct {
	Item Workbook
	// From is where the item was before the request (0: the root), when Read: the request
	// read the item. It is what the audit trail records of a move.
	From int64
	Read bool
}

// BulkMoveResult is the outcome of a bulk move, in request order.
type BulkMoveResult struct {
	Moved  []Workbook
	Failed []BulkFailure
	// From is where each item was before the request (0: the root), for the items the
	// request read: what the audit trail records of a move.
	From map[ItemRef]int64
}

func (s *service) begin(ctx context.Context, p *identity.Principal, deploymentID int64) (*request, error) {
	if p == nil || p.User == nil {
		return nil, errs.Forbiddenf("the workspace needs a user's bearer token")
	}
	// The record is best effort, but a database that could not be reached for it is
	// the request's answer (503): the request's next command would wait out another
	// server selection only to fail the same way, past the gateway's deadline.
	if err := s.recordUser(ctx, p); err != nil && errs.IsUnavailable(err) {
		return nil, err
	}
	return &request{s: s, p: p, deploymentID: deploymentID, tree: newTree()}, nil
}

// recordUser keeps the users projection that renders `user` of items, writing only when
// this replica has not recorded the same details yet.
func (s *service) recordUser(ctx context.Context, p *identity.Principal) error {
	u := User{ID: p.User.ID, Account: p.Account.ID, Email: p.User.Email, FirstName: p.User.FirstName, Picture: p.User.Picture, Role: p.User.Role}
	if prev, ok := s.seen.Load(u.ID); ok && prev.(User) == u {
		return nil
	}
	err := s.store.RecordUser(ctx, u)
	if err == nil {
		s.seen.Store(u.ID, u)
	}
	return err
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

func validName(field, name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", errs.Invalidf("%s is required and must not be blank", field)
	case len([]rune(name)) > MaxNameLength:
		return "", errs.Invalidf("%s must be at most %d characters", field, MaxNameLength)
	}
	return name, nil
}

// takeSlot takes one of the deployment's item slots for a create, or refuses it when the
// deployment already holds the configured maximum. The limit is checked and counted in
// one atomic step on a per-deployment counter (Store.TakeItemSlot), never by counting
// the items, so it holds exactly under concurrent creates and costs one write whatever
// the deployment holds.
func (s *service) takeSlot(ctx context.Context, deploymentID int64) error {
	ok, err := s.store.TakeItemSlot(ctx, deploymentID, s.limits.ItemsPerDeployment)
	if err != nil {
		return err
	}
	if !ok {
		return errs.New(errs.Invalid, "deployment %d holds %d items (folders, workbooks and reports), the limit; delete some before creating more", deploymentID, s.limits.ItemsPerDeployment).WithCode(errs.CodeItemLimit)
	}
	return nil
}

// returnSlot gives back the slot of a create that stored nothing, or of an item just
// tombstoned, even when the request's context has ended. A return that fails leaves
// the counter one high: the limit then errs toward refusing, never toward more items.
func (s *service) returnSlot(ctx context.Context, deploymentID int64) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_ = s.store.ReturnItemSlot(ctx, deploymentID)
}

// liftDeleteMark ends a folder delete that did not happen (the mark lapses on its own).
func (s *service) liftDeleteMark(ctx context.Context, deploymentID, folder, by int64, now time.Time) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, _ = s.store.EndFolderDelete(ctx, deploymentID, folder, false, by, now)
}

// cleanupTimeout bounds the writes that tidy up after a request (a lease given back, a
// delete mark lifted, an item slot returned), which run even when the request's context
// has ended. Each has a fallback (the lease and the mark lapse; a slot not returned errs
// toward refusing), so when the database is away the answer does not wait a server
// selection a second time: the request's own wait plus this stays under the gateway's
// UPSTREAM_TIMEOUT.
const cleanupTimeout = 5 * time.Second

func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// checkSizes refuses item documents over their size limits, naming the limit, and a draft
// naming more reports than a dashboard holds. A draft is measured as its JSON, as stored.
func (s *service) checkSizes(meta, calculated json.RawMessage, draft *DashboardConfig) error {
	draftBytes := jsonBytes(draft)
	for _, c := range []struct {
		field  string
		n, max int
	}{
		{"meta", len(meta), s.limits.MetaBytes},
		{"calculatedFields", len(calculated), s.limits.CalculatedFieldsBytes},
		{"dashboardDraft", draftBytes, s.limits.DraftBytes},
	} {
		if c.n > c.max {
			return errs.New(errs.TooLarge, "%s is %d bytes, over the limit of %d bytes", c.field, c.n, c.max)
		}
	}
	return s.checkDashboardReports("dashboardDraft", draft)
}
