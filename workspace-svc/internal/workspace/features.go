package workspace

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

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

// searchCursor is the sort key of the last item a search page examined.
type searchCursor struct {
	Sort string `json:"s"`
	Name string `json:"n,omitempty"`
	At   int64  `json:"t,omitempty"` // updatedAt, Unix milliseconds
	ID   int64  `json:"i"`
}

func searchKey(sort string, d *Item) searchCursor {
	return searchCursor{Sort: sort, Name: d.Name, At: d.UpdatedAt.UnixMilli(), ID: d.ID}
}

// Search answers a filtered listing. The database filters, sorts and limits (each batch no
// larger than what the page still needs, plus one); the caller's access to each hit is
// checked from its folder's chain. A page examines at most SearchScan items: when the
// caller can see few of many matches, the page ends early with hasNextPage and a cursor
// to go on, so no request reads without bound.
func (s *service) Search(ctx context.Context, p *identity.Principal, dep int64, in SearchInput) (Page, error) {
	if in.Sort == "" {
		in.Sort = "name"
	}
	var from *searchCursor
	if in.After != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.After)
		var c searchCursor
		if err != nil || json.Unmarshal(raw, &c) != nil || c.Sort != in.Sort {
			return Page{}, httpx.BadCursor() // a cursor of another sort, too
		}
		from = &c
	}
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return Page{}, err
	}
	q := SearchQuery{Parent: in.Folder, NameContains: in.Q, Type: in.Type, Desc: strings.HasPrefix(in.Sort, "-")}
	if strings.TrimPrefix(in.Sort, "-") == "updatedAt" {
		q.Sort = ByUpdatedAt
	}
	if in.CreatedByMe {
		q.CreatedBy = p.User.ID
	}
	if in.Folder != nil && *in.Folder != 0 {
		if err := r.need(ctx, *in.Folder); err != nil {
			return Page{}, err
		}
		if r.tree.folders[*in.Folder] == nil {
			return Page{}, notFound(TypeFolder, *in.Folder)
		}
		if r.tree.folderLevel(p, *in.Folder) < LevelView {
			return Page{}, forbiddenf("you need view access to folder %d to list it", *in.Folder)
		}
	}
	if in.Favorites {
		if q.IDs, err = s.store.FavoriteIDs(ctx, dep, p.User.ID, s.limits.Favorites); err != nil {
			return Page{}, err
		}
	}
	var out []*Item
	more, scanned := false, 0
	var last *Item
	for !more {
		limit := in.First + 1 - len(out)
		q.After, q.Limit = from.searchKey(), limit
		batch, err := s.store.Search(ctx, dep, q)
		if err != nil {
			return Page{}, err
		}
		var chains []int64
		for _, d := range batch {
			if d.Type == TypeFolder {
				r.addDocs(d)
				chains = append(chains, d.ID)
			} else {
				chains = append(chains, d.Parent)
			}
		}
		if err := r.need(ctx, chains...); err != nil {
			return Page{}, err
		}
		for _, d := range batch {
			if !r.visible(d) {
				scanned++
				last = d
				continue
			}
			if len(out) == in.First {
				more = true
				break
			}
			out = append(out, d)
			scanned++
			last = d
		}
		if len(batch) < limit {
			break
		}
		if scanned >= s.limits.SearchScan && !more {
			more = true // the page so far; the cursor goes on from the last examined item
			break
		}
		c := searchKey(in.Sort, batch[len(batch)-1])
		from = &c
	}
	items, err := s.renderSummaries(ctx, r, out)
	if err != nil {
		return Page{}, err
	}
	page := Page{Items: items, HasNextPage: more}
	// The cursor is the last item of the page, or the last one examined when the page
	// ended at the scan limit.
	cursorDoc := last
	if len(out) > 0 && (!more || len(out) == in.First) {
		cursorDoc = out[len(out)-1]
	}
	if cursorDoc != nil && (more || len(out) > 0) {
		b, _ := json.Marshal(searchKey(in.Sort, cursorDoc))
		c := base64.RawURLEncoding.EncodeToString(b)
		page.EndCursor = &c
	}
	return page, nil
}

// searchKey is the position in the search's order the cursor stands for.
func (c *searchCursor) searchKey() *SearchKey {
	if c == nil {
		return nil
	}
	return &SearchKey{Name: c.Name, UpdatedAt: time.UnixMilli(c.At).UTC(), ID: c.ID}
}

// visible reports whether the caller can view d; its chain must be loaded.
func (r *request) visible(d *Item) bool {
	if d.Type == TypeFolder {
		return r.tree.folders[d.ID] != nil && r.tree.folderLevel(r.p, d.ID) >= LevelView
	}
	return r.tree.itemLevel(r.p, d.CreatedBy, d.Parent) >= LevelView
}

// SetFavorite marks (on) or unmarks an item the caller can view as one of their
// favorites. Both are idempotent.
func (s *service) SetFavorite(ctx context.Context, p *identity.Principal, dep int64, ref ItemRef, on bool) error {
	r, err := s.begin(ctx, p, dep)
	if err != nil {
		return err
	}
	if !on {
		return s.store.RemoveFavorite(ctx, dep, p.User.ID, ref.ID)
	}
	docs, err := s.store.Items(ctx, dep, []int64{ref.ID})
	if err != nil {
		return err
	}
	d := docs[ref.ID]
	if d == nil || d.Type != ref.Type {
		return notFound(ref.Type, ref.ID)
	}
	r.addDocs(d)
	chain := d.Parent
	if d.Type == TypeFolder {
		chain = d.ID
	}
	if err := r.need(ctx, chain); err != nil {
		return err
	}
	if !r.visible(d) {
		return forbiddenf("you need view access to %s %d to make it a favorite", ref.Type.lower(), ref.ID)
	}
	have, err := s.store.FavoriteIDs(ctx, dep, p.User.ID, s.limits.Favorites)
	if err != nil {
		return err
	}
	if len(have) >= s.limits.Favorites && !containsID(have, ref.ID) {
		return errs.New(errs.Invalid, "you already have %d favorites in deployment %d, the limit (WORKSPACE_MAX_FAVORITES); remove one first", s.limits.Favorites, dep).WithCode(httpx.CodeFavoritesLimit)
	}
	return s.store.AddFavorite(ctx, dep, p.User.ID, ref, s.now())
}

// UpdateItemInput is a change of a workbook or report; nil fields stay as they are.
type UpdateItemInput struct {
	Name             *string
	Meta             json.RawMessage
	CalculatedFields json.RawMessage
	DashboardDraft   *DashboardConfig
}

// UpdateItem renames a workbook or report, or replaces its meta, calculated fields or
// dashboard draft; it needs edit on the item.
func (s *service) UpdateItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, id int64, in UpdateItemInput) (Workbook, error) {
	u := ItemUpdate{Meta: in.Meta, CalculatedFields: in.CalculatedFields, Draft: in.DashboardDraft}
	if in.Name != nil {
		n, err := validName("name", *in.Name)
		if err != nil {
			return Workbook{}, err
		}
		u.Name = &n
	}
	if in.DashboardDraft != nil {
		if typ != TypeWorkbook {
			return Workbook{}, invalidf("only workbooks have a dashboardDraft")
		}
		if err := in.DashboardDraft.Validate("dashboardDraft"); err != nil {
			return Workbook{}, err
		}
	}
	if err := s.checkSizes(in.Meta, in.CalculatedFields, in.DashboardDraft); err != nil {
		return Workbook{}, err
	}
	if in.Name == nil && in.Meta == nil && in.CalculatedFields == nil && in.DashboardDraft == nil {
		return Workbook{}, invalidf("nothing to update: send name, meta, calculatedFields or dashboardDraft")
	}
	r, d, err := s.itemForAccess(ctx, p, dep, typ, id, LevelEdit, "change it")
	if err != nil {
		return Workbook{}, err
	}
	u.UpdatedAt, u.UpdatedBy = s.now(), p.User.ID
	nd, err := s.store.UpdateItem(ctx, dep, id, typ, ItemPrecondition{Parent: &d.Parent}, u)
	if err != nil {
		return Workbook{}, err
	}
	if nd == nil {
		return Workbook{}, conflictf("%s %d was moved or deleted during the change; retry", typ.lower(), id)
	}
	out, err := s.render(ctx, r, []*Item{nd})
	if err != nil {
		return Workbook{}, err
	}
	return out[0], nil
}

// DeleteItem deletes a workbook or report the caller manages (its creator, or manage on
// its folder). It leaves a tombstone; later publishes no longer snapshot a deleted report,
// and every user's favorite of it is dropped.
func (s *service) DeleteItem(ctx context.Context, p *identity.Principal, dep int64, typ ItemType, id int64) error {
	_, d, err := s.itemForAccess(ctx, p, dep, typ, id, LevelManage, "delete it")
	if err != nil {
		return err
	}
	nd, err := s.store.UpdateItem(ctx, dep, id, typ, ItemPrecondition{Parent: &d.Parent}, ItemUpdate{Deleted: true, UpdatedAt: s.now(), UpdatedBy: p.User.ID})
	if err != nil {
		return err
	}
	if nd == nil {
		return conflictf("%s %d was moved or deleted during the delete; retry", typ.lower(), id)
	}
	return s.store.RemoveItemFavorites(ctx, dep, id)
}

// creatorCanView reports whether the creator of an item would still see it in folder
// dest, judged from their grants and creatorships along dest's chain and the role they
// had when this service last saw them.
func (r *request) creatorCanView(creator int64, dest int64) bool {
	if dest == 0 {
		return true
	}
	u := r.users[creator]
	cp := &identity.Principal{User: &identity.User{ID: creator, Role: u.Role}}
	return r.tree.containerLevel(cp, dest) >= LevelView
}

// Unpublish archives a workbook's published dashboard (status archived; the version
// stays, and a later publish makes it published again). Archiving an archived dashboard
// changes nothing. It needs edit on the workbook.
func (s *service) Unpublish(ctx context.Context, p *identity.Principal, dep, id int64) (Workbook, error) {
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		r, d, err := s.itemForAccess(ctx, p, dep, TypeWorkbook, id, LevelEdit, "unpublish it")
		if err != nil {
			return Workbook{}, err
		}
		if d.Published == nil {
			return Workbook{}, conflictf("workbook %d has no published dashboard to unpublish", id)
		}
		nd := d
		if d.Published.Status != StatusArchived {
			by := p.User.ID
			dash := *d.Published
			dash.Status, dash.UpdatedBy = StatusArchived, &by
			if nd, err = s.store.UpdateItem(ctx, dep, id, TypeWorkbook, ItemPrecondition{PublishedVersion: &d.PublishedVersion},
				ItemUpdate{Published: &dash, UpdatedAt: s.now(), UpdatedBy: by}); err != nil {
				return Workbook{}, err
			}
			if nd == nil {
				continue // published again meanwhile: start over
			}
		}
		out, err := s.render(ctx, r, []*Item{nd})
		if err != nil {
			return Workbook{}, err
		}
		return out[0], nil
	}
	return Workbook{}, busyf("workbook %d kept changing during the unpublish; retry", id)
}
