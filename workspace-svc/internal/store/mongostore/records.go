package mongostore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// itemDoc is one folder, workbook or report as stored in items.
type itemDoc struct {
	ID           int64              `bson:"_id"`
	DeploymentID int64              `bson:"dep"`
	Type         workspace.ItemType `bson:"type"`
	Name         string             `bson:"name"`
	Position     float64            `bson:"position"`
	Parent       int64              `bson:"parent"`
	// Key is the item's key (absent: none), kept for good; KSlot is its hold, "dep/TYPE/key",
	// there only while the item is live, under the unique sparse index kslot_1 (keys.go).
	Key   string `bson:"key,omitempty"`
	KSlot string `bson:"kslot,omitempty"`
	// Version is the item's version (absent: stored before versions were kept, 0).
	Version   int64     `bson:"version,omitempty"`
	CreatedBy int64     `bson:"createdBy"`
	UpdatedBy int64     `bson:"updatedBy"`
	CreatedAt time.Time `bson:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt"`
	// TreeV is, for folders, the tree version of the last structural change applied to
	// it: the fence that makes a late re-application of an older move a no-op.
	TreeV  int64      `bson:"treeV"`
	Grants []grantDoc `bson:"grants,omitempty"`
	// Anc and Depth, on folders only: every ancestor's id and the folder's level (1 at the
	// root), kept by the structural ops.
	Anc   []int64 `bson:"anc,omitempty"`
	Depth int     `bson:"depth,omitempty"`
	// EmbedAccess is a folder's or a workbook's own embed grants (absent: none).
	EmbedAccess *embedAccessDoc `bson:"embedAccess,omitempty"`
	// LeaseUntil is set while a request is putting items into this folder; a delete
	// waits for it to lapse. DeletingUntil is set while a delete checks emptiness.
	LeaseUntil    time.Time `bson:"leaseUntil,omitempty"`
	LeaseCount    int64     `bson:"leaseCount,omitempty"`
	DeletingUntil time.Time `bson:"deletingUntil,omitempty"`
	Deleted       bool      `bson:"deleted,omitempty"`
	// Void marks a folder creation applied when its key was taken: a tombstone that was
	// never live.
	Void bool `bson:"void,omitempty"`
	// JSON documents kept as strings: meta and calculated fields verbatim, the draft
	// and the published dashboard encoded.
	Meta             string `bson:"meta,omitempty"`
	CalculatedFields string `bson:"calculatedFields,omitempty"`
	Draft            string `bson:"draft,omitempty"`
	Published        string `bson:"published,omitempty"`
	PublishedVersion int64  `bson:"publishedVersion,omitempty"`
	PublicID         string `bson:"publicId,omitempty"`
	DashboardID      int64  `bson:"dashboardId,omitempty"`
	// PublishedTitle and Embeddable are kept with the published dashboard by every write
	// of it (workspace.PublishedHead); Embeddable is there (true or false) on every workbook whose
	// dashboard was published since they were kept, and absent on one published before
	// until the backfill has given it them (backfillPublishedHeads).
	PublishedTitle *string `bson:"publishedTitle,omitempty"`
	Embeddable     *bool   `bson:"embeddable,omitempty"`
	// Sizes are the bytes of each of the four strings above them, kept beside them so a
	// projected read knows what the content would cost (workspace.Item.Bytes).
	Sizes *sizesDoc `bson:"sizes,omitempty"`
	// Trash is what a trashed item keeps for its restore (trashDoc); absent on live items.
	Trash *trashDoc `bson:"trash,omitempty"`
}

// sizesDoc is the size of each large part as stored. Every write of a part sets its
// size; an item written before sizes were kept has none, or only those of the parts
// changed since: its Bytes are unknown.
type sizesDoc struct {
	Meta             *int `bson:"meta,omitempty"`
	CalculatedFields *int `bson:"calculatedFields,omitempty"`
	Draft            *int `bson:"draft,omitempty"`
	Published        *int `bson:"published,omitempty"`
}

// bytes is the total, or -1 when a part's size is missing.
func (s *sizesDoc) bytes() int {
	if s == nil || s.Meta == nil || s.CalculatedFields == nil || s.Draft == nil || s.Published == nil {
		return -1
	}
	return *s.Meta + *s.CalculatedFields + *s.Draft + *s.Published
}

func sizeOf(s string) *int {
	n := len(s)
	return &n
}

type grantDoc struct {
	UserID int64  `bson:"userId"`
	Level  string `bson:"level"`
}

// folderDoc is the projection of a folder a request keeps (folderProjection).
type folderDoc struct {
	ID        int64      `bson:"_id"`
	Parent    int64      `bson:"parent"`
	Name      string     `bson:"name"`
	Position  float64    `bson:"position"`
	CreatedBy int64      `bson:"createdBy"`
	Grants    []grantDoc `bson:"grants"`
	Anc       []int64    `bson:"anc"`
	Depth     int        `bson:"depth"`
	// EmbedAccess is the folder's own embed grants (absent: none).
	EmbedAccess *embedAccessDoc `bson:"embedAccess"`
}

// treeOpDoc is a structural op as recorded in a trees document.
type treeOpDoc struct {
	Kind   string    `bson:"kind"` // "move", "create", or "none"
	Folder int64     `bson:"folder"`
	To     int64     `bson:"to"`
	By     int64     `bson:"by"`
	At     time.Time `bson:"at"`
	Doc    *itemDoc  `bson:"doc,omitempty"`
	Anc    []int64   `bson:"anc,omitempty"`
	Depth  int       `bson:"depth,omitempty"`
	Pull   []int64   `bson:"pull,omitempty"`
	Push   []int64   `bson:"push,omitempty"`
	Delta  int       `bson:"delta,omitempty"`
	IDs    []int64   `bson:"ids,omitempty"`
	N      int       `bson:"n,omitempty"`
}

// treeDoc is a deployment's tree version: {_id: dep, v, op}.
type treeDoc struct {
	ID int64      `bson:"_id"`
	V  int64      `bson:"v"`
	Op *treeOpDoc `bson:"op"`
}

type userDoc struct {
	ID        int64  `bson:"_id"`
	Account   int64  `bson:"acct"`
	Email     string `bson:"email"`
	FirstName string `bson:"firstName"`
	Picture   string `bson:"picture"`
	Role      string `bson:"role"`
}

// favoriteDoc is one item a user marked as a favorite in one deployment.
type favoriteDoc struct {
	ID           string             `bson:"_id"` // dep:user:item
	DeploymentID int64              `bson:"dep"`
	User         int64              `bson:"user"`
	Item         int64              `bson:"item"`
	Type         workspace.ItemType `bson:"type"`
	At           time.Time          `bson:"at"`
}

func grantDocs(g []workspace.Grant) []grantDoc {
	if g == nil {
		return nil
	}
	out := make([]grantDoc, len(g))
	for i, x := range g {
		out[i] = grantDoc(x)
	}
	return out
}

func grants(g []grantDoc) []workspace.Grant {
	if g == nil {
		return nil
	}
	out := make([]workspace.Grant, len(g))
	for i, x := range g {
		out[i] = workspace.Grant(x)
	}
	return out
}

// encodeJSON is v (a draft or a dashboard) as stored; "" for nil.
func encodeJSON[T any](what string, v *T) (string, error) {
	if v == nil {
		return "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", what, err)
	}
	return string(b), nil
}

// decodeJSON is the stored s (a draft or a dashboard); nil when there is none, or when
// it does not decode (it then renders as null).
func decodeJSON[T any](s string) *T {
	if s == "" {
		return nil
	}
	var v T
	if json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	return &v
}

// toItemDoc is the record of a new item.
func toItemDoc(it *workspace.Item) (*itemDoc, error) {
	draft, err := encodeJSON("dashboard draft", it.Draft)
	if err != nil {
		return nil, err
	}
	published, err := encodeJSON("published dashboard", it.Published)
	if err != nil {
		return nil, err
	}
	d := &itemDoc{ID: it.ID, DeploymentID: it.DeploymentID, Type: it.Type, Name: it.Name, Position: it.Position, Parent: it.Parent,
		Key: it.Key, KSlot: kslot(it.DeploymentID, it.Type, it.Key), Version: max(it.Version, 1),
		CreatedBy: it.CreatedBy, UpdatedBy: it.UpdatedBy, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		Grants: grantDocs(it.Grants), Anc: it.Anc, Depth: it.Depth, Meta: string(it.Meta), CalculatedFields: string(it.CalculatedFields),
		Draft: draft, Published: published, PublishedVersion: it.PublishedVersion, PublicID: it.PublicID, DashboardID: it.DashboardID}
	d.Sizes = &sizesDoc{Meta: sizeOf(d.Meta), CalculatedFields: sizeOf(d.CalculatedFields), Draft: sizeOf(d.Draft), Published: sizeOf(d.Published)}
	d.EmbedAccess = toEmbedAccessDoc(it.EmbedAccess, it.UpdatedBy, it.UpdatedAt)
	if it.Published != nil {
		title, embeddable := workspace.PublishedHead(it.Published)
		d.PublishedTitle, d.Embeddable = title, &embeddable
	}
	return d, nil
}

func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// item is the domain's view of the record.
func (d *itemDoc) item() *workspace.Item {
	it := d.live()
	it.Trash = d.Trash.info()
	return it
}

func (d *itemDoc) live() *workspace.Item {
	return &workspace.Item{ID: d.ID, DeploymentID: d.DeploymentID, Type: d.Type, Name: d.Name, Position: d.Position, Parent: d.Parent,
		Key: d.Key, Version: d.Version,
		CreatedBy: d.CreatedBy, UpdatedBy: d.UpdatedBy, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
		Grants: grants(d.Grants), Anc: d.Anc, Depth: d.Depth, Meta: rawJSON(d.Meta), CalculatedFields: rawJSON(d.CalculatedFields),
		Draft: decodeJSON[workspace.DashboardConfig](d.Draft), Published: decodeJSON[workspace.Dashboard](d.Published),
		PublishedVersion: d.PublishedVersion, PublicID: d.PublicID, DashboardID: d.DashboardID, Bytes: d.Sizes.bytes(),
		EmbedAccess: d.EmbedAccess.grants(), PublishedTitle: d.PublishedTitle, Embeddable: d.Embeddable != nil && *d.Embeddable}
}

func items(docs []*itemDoc) []*workspace.Item {
	out := make([]*workspace.Item, len(docs))
	for i, d := range docs {
		out[i] = d.item()
	}
	return out
}

func (d *folderDoc) node() *workspace.FolderNode {
	return &workspace.FolderNode{ID: d.ID, Parent: d.Parent, Name: d.Name, Position: d.Position, CreatedBy: d.CreatedBy,
		Grants: grants(d.Grants), Anc: d.Anc, Depth: d.Depth, EmbedAccess: d.EmbedAccess.grants()}
}

// toTreeOpDoc is the record of op; slices are kept as they are (nil or empty), so what
// is recorded and applied is exactly what was validated.
func toTreeOpDoc(op *workspace.TreeOp) (*treeOpDoc, error) {
	d := &treeOpDoc{Kind: string(op.Kind), Folder: op.Folder, To: op.To, By: op.By, At: op.At,
		Anc: op.Anc, Depth: op.Depth, Pull: op.Pull, Push: op.Push, Delta: op.Delta, IDs: op.IDs, N: op.N}
	if op.Created != nil {
		doc, err := toItemDoc(op.Created)
		if err != nil {
			return nil, err
		}
		d.Doc = doc
	}
	return d, nil
}

func (d *treeOpDoc) op() *workspace.TreeOp {
	op := &workspace.TreeOp{Kind: workspace.TreeOpKind(d.Kind), Folder: d.Folder, To: d.To, By: d.By, At: d.At,
		Anc: d.Anc, Depth: d.Depth, Pull: d.Pull, Push: d.Push, Delta: d.Delta, IDs: d.IDs, N: d.N}
	if d.Doc != nil {
		op.Created = d.Doc.item()
	}
	return op
}

func (d userDoc) user() workspace.User { return workspace.User(d) }
