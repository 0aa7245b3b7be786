package workspace

import (
	"context"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// cursor is the sort key of the last item of a page. A page that ended at the scan limit
// on a child the caller cannot view keeps that child's name out of the cursor (Hidden):
// the next page reads it again by id.
type cursor struct {
	Rank     int     `json:"r"`
	Position float64 `json:"p"`
	Name     string  `json:"n"`
	ID       int64   `json:"i"`
	Hidden   bool    `json:"h,omitempty"`
}

func keyOf(d *Item) cursor {
	rank := 1
	if d.Type == TypeFolder {
		rank = 0
	}
	return cursor{Rank: rank, Position: d.Position, Name: d.Name, ID: d.ID}
}

// resolve fills in the name of a Hidden cursor's child from the store; a child since
// deleted or moved leaves the name empty, so the next page starts at the cursor's
// position and id.
func (c *cursor) resolve(ctx context.Context, r *request, folder int64) error {
	if c == nil || !c.Hidden {
		return nil
	}
	docs, err := r.s.store.Items(ctx, r.deploymentID, []int64{c.ID}, 0)
	if err != nil {
		return err
	}
	if d := docs[c.ID]; d != nil && d.Parent == folder && keyOf(d).Rank == c.Rank && d.Position == c.Position {
		c.Name = d.Name
	}
	return nil
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
// calculated fields or dashboards: GET the item for those). A page examines at most
// ListScan children: when the caller can view few of many (a root full of other users'
// private folders), the page ends early with hasNextPage and a cursor that goes on from
// the last child examined, so no request reads without bound.
func (s *service) List(ctx context.Context, p *identity.Principal, deploymentID, folder int64, first int, after string) (httpx.Page[ItemSummary], error) {
	from, err := httpx.AfterCursor[cursor](after)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	if err := r.need(ctx, folder); err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	if folder != 0 {
		if r.tree.folders[folder] == nil {
			return httpx.Page[ItemSummary]{}, notFound(TypeFolder, folder)
		}
		if r.tree.folderLevel(p, folder) < LevelView {
			return httpx.Page[ItemSummary]{}, errs.Forbiddenf("you need view access to folder %d to list it", folder)
		}
	}
	if err := from.resolve(ctx, r, folder); err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	visible, last, more, err := s.visibleChildren(ctx, r, folder, from, first)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	items, err := s.renderSummaries(ctx, r, visible)
	if err != nil {
		return httpx.Page[ItemSummary]{}, err
	}
	// The cursor is the page's last item, or the last child examined when the page ended
	// at the scan limit.
	var key *cursor
	switch n := len(visible); {
	case n > 0 && (!more || n == first):
		k := keyOf(visible[n-1])
		key = &k
	case more && last != nil && n > 0 && visible[n-1] == last:
		k := keyOf(last)
		key = &k
	case more && last != nil:
		k := keyOf(last)
		k.Name, k.Hidden = "", true
		key = &k
	}
	return httpx.PageEndingAt(items, more, key), nil
}

// minListBatch is the smallest batch a listing reads once it has met a child the caller
// cannot view: many may follow, and each round trip should be worth it.
const minListBatch = 100

// visibleChildren returns up to first children of folder after the cursor that the caller
// can view, in page order, the last child it examined, and whether more follow (another
// visible child, or children not examined past the ListScan limit). It reads projected
// documents sorted and limited by the database, folders before workbooks and reports:
// while every child is visible, a batch is what the page still needs plus one (a page of
// n reads n+1 children); once one was not, at least minListBatch. A child the caller
// cannot view is examined and dropped, never kept.
func (s *service) visibleChildren(ctx context.Context, r *request, folder int64, from *cursor, first int) (out []*Item, last *Item, more bool, err error) {
	p, t := r.p, r.tree
	scanned, hidden := 0, false
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
			need := first + 1 - len(out)
			limit := need
			if hidden {
				limit = max(need, min(minListBatch, s.limits.ListScan-scanned))
			}
			batch, err := s.store.Children(ctx, r.deploymentID, ChildrenQuery{Parent: folder, Folders: folders, After: after.listKey(), Limit: limit})
			if err != nil {
				return nil, nil, false, err
			}
			for _, d := range batch {
				var l Level
				if d.Type == TypeFolder {
					l = t.childFolderLevel(p, d)
				} else {
					l = t.itemLevel(p, d.CreatedBy, d.Parent)
				}
				if l >= LevelView && len(out) == first {
					return out, last, true, nil
				}
				scanned, last = scanned+1, d
				if l >= LevelView {
					out = append(out, d)
				} else {
					hidden = true
				}
			}
			if len(batch) < limit {
				break
			}
			if scanned >= s.limits.ListScan {
				return out, last, true, nil
			}
			k := keyOf(batch[len(batch)-1])
			after = &k
		}
	}
	return out, last, false, nil
}
