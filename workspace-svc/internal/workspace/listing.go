package workspace

import (
	"context"
	"encoding/base64"
	"encoding/json"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

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
