package workspace

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// EmbedObject names the object embed grants sit on: a workbook, a folder, or the
// deployment's root (Type "", ID 0).
type EmbedObject struct {
	Type ItemType // TypeWorkbook, TypeFolder, or "" for the root
	ID   int64
}

// Root reports whether o is the deployment's root.
func (o EmbedObject) Root() bool { return o.Type == "" }

// EmbedAccessView is an object's embed access as GET and PUT answer it: its own grants
// (allEmbedUsers, tenants, groups) and what it inherits, nearest first. A PUT ignores
// inherited, so a GET's body can be sent back.
type EmbedAccessView struct {
	embedaccess.Grants
	Inherited []InheritedEmbedAccess `json:"inherited"`
	// Changed says a PUT replaced different grants, which were Previous: what the audit
	// trail records of it (a PUT of the grants already there changes nothing).
	Changed  bool               `json:"-"`
	Previous embedaccess.Grants `json:"-"`
}

// InheritedEmbedAccess is the own grants of one object above: a folder (Source
// "folder", FolderID and FolderName) or the root (Source "root", FolderID null). Only
// objects with at least one entry are listed.
type InheritedEmbedAccess struct {
	Source     string  `json:"source"`
	FolderID   *int64  `json:"folderId"`
	FolderName *string `json:"folderName,omitempty"`
	embedaccess.Grants
}

// TenantWorkbooksInput asks for a page of an embed tenant's effective access.
type TenantWorkbooksInput struct {
	AccessSource string // "" any, or one of tenant, group, allEmbedUsers, folder
	First        int
	After        string
}

// TenantWorkbook is one workbook an embed tenant's viewers may read, and the grant that
// decided it: accessSource tenant, group or allEmbedUsers for a grant on the workbook
// itself, folder for one inherited (viaFolderId, or viaRoot). Embeddable says whether a
// viewer can open its dashboard now (published, allowEmbed).
type TenantWorkbook struct {
	WorkbookID   int64               `json:"workbookId"`
	Name         string              `json:"name"`
	FolderID     *int64              `json:"folderId"`
	PublicID     *string             `json:"publicId"`
	Embeddable   bool                `json:"embeddable"`
	AccessSource string              `json:"accessSource"`
	Subject      embedaccess.Subject `json:"subject"`
	ViaFolderID  *int64              `json:"viaFolderId,omitempty"`
	ViaRoot      bool                `json:"viaRoot,omitempty"`
}

// EmbedDashboardSummary is one dashboard an embed session may open, as the viewer's
// listing shows it.
type EmbedDashboardSummary struct {
	PublicID     string  `json:"publicId"`
	WorkbookID   int64   `json:"workbookId"`
	Title        *string `json:"title"`
	AccessSource string  `json:"accessSource"`
}

// ViewerGroups asks embed-svc, which keeps group memberships, for an embed viewer's
// current groups (embed-svc/contract.Viewers over NATS).
type ViewerGroups interface {
	Groups(ctx context.Context, req contract.ViewerRequest) (contract.ViewerReply, error)
}

// EmbedAccessStore keeps embed grants and finds the dashboards the viewer's read path
// serves. A folder's and a workbook's own grants are kept on the item, read with its
// head (Item.EmbedAccess, FolderNode.EmbedAccess); the root's beside the deployment's
// items.
type EmbedAccessStore interface {
	// SetEmbedAccess replaces the own grants of the live item id of type typ (a folder
	// or a workbook); an empty g clears them. False when there is no such item.
	SetEmbedAccess(ctx context.Context, deploymentID, id int64, typ ItemType, g embedaccess.Grants, by int64, at time.Time) (bool, error)
	// RootEmbedAccess returns the grants on the deployment's root (empty when none).
	RootEmbedAccess(ctx context.Context, deploymentID int64) (embedaccess.Grants, error)
	// SetRootEmbedAccess replaces the grants on the deployment's root.
	SetRootEmbedAccess(ctx context.Context, deploymentID int64, g embedaccess.Grants, by int64, at time.Time) error
	// WorkbookByPublicID returns the live workbook of deploymentID whose published dashboard has
	// publicID, with the large parts that parts names, or nil when there is none: one
	// read by the {dep, publicId} index.
	WorkbookByPublicID(ctx context.Context, deploymentID int64, publicID string, parts Parts) (*Item, error)
	// EmbeddableWorkbooks returns heads of at most limit live workbooks of deploymentID, by id
	// after afterID, whose dashboard is published with allowEmbed.
	EmbeddableWorkbooks(ctx context.Context, deploymentID, afterID int64, limit int) ([]*Item, error)
	// WorkbookHeads returns heads of at most limit live workbooks of deploymentID, by id after
	// afterID.
	WorkbookHeads(ctx context.Context, deploymentID, afterID int64, limit int) ([]*Item, error)
}

// MaxPublishedTitleBytes bounds the title a workbook's head keeps of its published
// dashboard (Item.PublishedTitle): a dashboard's own title is bounded only by its
// config's size, and every head read carries the head's title, so the head keeps at most
// this many bytes of it, cut at a character boundary. The viewer's listing shows that
// title; the dashboard itself has the whole one.
const MaxPublishedTitleBytes = 255

// PublishedHead is what a workbook's head keeps of its published dashboard p (nil: none):
// its title (config.title, else the dashboard's title; a copy, at most
// MaxPublishedTitleBytes) and whether it is published with allowEmbed. Both stores keep
// it with every write of the published dashboard.
func PublishedHead(p *Dashboard) (*string, bool) {
	if p == nil {
		return nil, false
	}
	title := p.Config.Title
	if title == nil {
		title = p.Title
	}
	if title != nil {
		t := *title
		if len(t) > MaxPublishedTitleBytes {
			cut := MaxPublishedTitleBytes
			for cut > 0 && !utf8.RuneStart(t[cut]) {
				cut--
			}
			t = t[:cut]
		}
		title = &t
	}
	return title, p.Status == StatusPublished && p.AllowEmbed
}
