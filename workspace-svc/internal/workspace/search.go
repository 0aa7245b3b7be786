package workspace

import (
	"context"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

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

// searchKey is the position in the search's order the cursor stands for.
func (c *searchCursor) searchKey() *SearchKey {
	if c == nil {
		return nil
	}
	return &SearchKey{Name: c.Name, UpdatedAt: time.UnixMilli(c.At).UTC(), ID: c.ID}
}

// Search answers a filtered listing. The database filters, sorts and limits (each batch no
// larger than what the page still needs, plus one); the caller's access to each hit is
// checked from its folder's chain. A page examines at most SearchScan items: when the
// caller can see few of many matches, the page ends early with hasNextPage and a cursor
// to go on, so no request reads without bound.
func (s *service) Search(ctx context.Context, p *identity.Principal, deploymentID int64, in SearchInput) (httpx.Page[ItemSummary], error) {
	if in.Sort == "" {
		in.Sort = "name"
	}
	from, err := parseSearchCursor(in.After, in.Sort)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
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
			return httpx.Page[ItemSummary]{}, err
		}
		if r.tree.folders[*in.Folder] == nil {
			return httpx.Page[ItemSummary]{}, notFound(TypeFolder, *in.Folder)
		}
		if r.tree.folderLevel(p, *in.Folder) < LevelView {
			return httpx.Page[ItemSummary]{}, errs.Forbiddenf("you need view access to folder %d to list it", *in.Folder)
		}
	}
	if in.Favorites {
		if q.IDs, err = s.store.FavoriteIDs(ctx, deploymentID, p.User.ID, s.limits.Favorites); err != nil {
			return httpx.Page[ItemSummary]{}, err
		}
	}
	out, last, more, err := s.scan(ctx, r, q, in, from)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	items, err := s.renderSummaries(ctx, r, out)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	// The cursor is the last item of the page, or the last one examined when the page
	// ended at the scan limit.
	cursorDoc := last
	if len(out) > 0 && (!more || len(out) == in.First) {
		cursorDoc = out[len(out)-1]
	}
	var key *searchCursor
	if cursorDoc != nil && (more || len(out) > 0) {
		k := searchKey(in.Sort, cursorDoc)
		key = &k
	}
	return httpx.PageEndingAt(items, more, key), nil
}

// parseSearchCursor reads a search page's `after`; a cursor of another sort is refused
// too.
func parseSearchCursor(after, sort string) (*searchCursor, error) {
	c, err := httpx.AfterCursor[searchCursor](after)
	if err != nil {
		return nil, err
	}
	if c != nil && c.Sort != sort {
		return nil, httpx.ErrBadCursor
	}
	return c, nil
}

// scan reads batches of q's matches after from until the page holds in.First items the
// caller can view (more: another follows) or SearchScan items were examined (more: the
// page so far; the cursor goes on from last, the last item examined).
func (s *service) scan(ctx context.Context, r *request, q SearchQuery, in SearchInput, from *searchCursor) (out []*Item, last *Item, more bool, err error) {
	scanned := 0
	for !more {
		limit := in.First + 1 - len(out)
		q.After, q.Limit = from.searchKey(), limit
		batch, err := s.store.Search(ctx, r.deploymentID, q)
		if err != nil {
			return nil, nil, false, err
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
			return nil, nil, false, err
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
			more = true
			break
		}
		c := searchKey(in.Sort, batch[len(batch)-1])
		from = &c
	}
	return out, last, more, nil
}
