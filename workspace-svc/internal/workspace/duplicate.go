package workspace

import (
	"context"
	"strconv"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// DuplicateService copies a workbook (with the reports it names, when deep) or a
// folder's subtree into a folder the caller may edit. Copies are the caller's, have no
// key (keys are unique) and are not published; each takes an item slot.
type DuplicateService interface {
	DuplicateWorkbook(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (WorkbookDuplicate, error)
	DuplicateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (FolderDuplicate, error)
}

// DuplicateInput is the body of a duplicate.
type DuplicateInput struct {
	FolderSet bool  // folderId was sent: FolderID is the destination (0: the root)
	FolderID  int64 // else the copy goes beside the original
	Name      *string
	Deep      bool // a workbook's: its reports are duplicated too, and the copy's widgets name the copies
}

// DuplicateCounts are the items a duplicate created.
type DuplicateCounts struct {
	Folders   int `json:"folders"`
	Workbooks int `json:"workbooks"`
	Reports   int `json:"reports"`
}

// WorkbookDuplicate answers a workbook's duplicate: the copy and the reports copied.
type WorkbookDuplicate struct {
	Workbook Workbook        `json:"workbook"`
	Reports  []Workbook      `json:"reports"`
	Created  DuplicateCounts `json:"created"`
}

// FolderDuplicate answers a folder's duplicate: the copy of the folder and what was created.
type FolderDuplicate struct {
	Folder  Folder          `json:"folder"`
	Created DuplicateCounts `json:"created"`
}

// copyName is the name of a copy: the one asked for, else the original's with " (copy)".
func copyName(asked *string, original string) (string, error) {
	if asked != nil {
		return validName("name", *asked)
	}
	r := []rune(original + " (copy)")
	if len(r) > MaxNameLength {
		r = append(r[:MaxNameLength-len([]rune(" (copy)"))], []rune(" (copy)")...)
	}
	return string(r), nil
}

func (s *service) duplicateLimit(n int) error {
	return errs.New(errs.Invalid, "the duplicate would create %d items (folders, workbooks and reports), over the limit of %d of one duplicate", n, s.limits.DuplicateItems).WithCode(errs.CodeDuplicateLimit)
}

// copyOf is a new item of r's deployment with d's content, in folder, created by the caller now.
func (s *service) copyOf(ctx context.Context, r *request, d *Item, name string, folder int64) (*Item, error) {
	id, err := s.store.NextID(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	return &Item{ID: id, DeploymentID: r.deploymentID, Type: d.Type, Name: name, Position: d.Position, Parent: folder, CreatedBy: r.p.User.ID,
		UpdatedBy: r.p.User.ID, CreatedAt: now, UpdatedAt: now, Meta: d.Meta, CalculatedFields: d.CalculatedFields}, nil
}

// copyDraft is a deep copy of draft whose widgets name mapped[id] instead of id where
// there is one.
func copyDraft(draft *DashboardConfig, mapped map[int64]int64) *DashboardConfig {
	return mapConfigReports(draft, func(id int64) any {
		if t, ok := mapped[id]; ok {
			return float64(t)
		}
		return float64(id)
	})
}

// DuplicateWorkbook copies a workbook the caller can view into in's folder; with Deep,
// the reports its draft names that the caller can view are copied beside it first.
func (s *service) DuplicateWorkbook(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (WorkbookDuplicate, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	if p != nil && !p.HasRole(identity.RoleAIBIUser) {
		return WorkbookDuplicate{}, errs.Forbiddenf("duplicating a workbook needs the ai_bi_user role or higher")
	}
	r, head, err := s.itemForAccess(ctx, p, deploymentID, TypeWorkbook, id, LevelView, "duplicate it")
	if err != nil {
		return WorkbookDuplicate{}, err
	}
	name, err := copyName(in.Name, head.Name)
	if err != nil {
		return WorkbookDuplicate{}, err
	}
	dest := head.Parent
	if in.FolderSet {
		dest = in.FolderID
	}
	if err := s.checkCreateIn(ctx, r, dest, TypeWorkbook); err != nil {
		return WorkbookDuplicate{}, err
	}
	src, err := s.withParts(ctx, r, head, PartMeta|PartCalculatedFields|PartDraft, LevelView, "duplicate it")
	if err != nil {
		return WorkbookDuplicate{}, err
	}
	var reports []*Item
	if in.Deep && src.Draft != nil {
		ids := reportIDs(src.Draft)
		if n := 1 + len(ids); n > s.limits.DuplicateItems {
			return WorkbookDuplicate{}, s.duplicateLimit(n)
		}
		got, err := s.readReports(ctx, r, ids, LevelView)
		if err != nil {
			return WorkbookDuplicate{}, err
		}
		for _, rid := range ids {
			if d := got[rid]; d != nil {
				reports = append(reports, d)
			}
		}
	}
	out := WorkbookDuplicate{Reports: []Workbook{}}
	mapped := map[int64]int64{}
	var copies []*Item
	for _, d := range reports {
		c, err := s.copyOf(ctx, r, d, d.Name, dest)
		if err != nil {
			return WorkbookDuplicate{}, err
		}
		if err := s.insertInto(ctx, r, c); err != nil {
			return WorkbookDuplicate{}, err
		}
		mapped[d.ID] = c.ID
		copies = append(copies, c)
	}
	wb, err := s.copyOf(ctx, r, src, name, dest)
	if err != nil {
		return WorkbookDuplicate{}, err
	}
	wb.Position, wb.Draft = 0, copyDraft(src.Draft, mapped)
	if err := s.insertInto(ctx, r, wb); err != nil {
		return WorkbookDuplicate{}, err
	}
	r.created = wb.ID
	rendered, err := s.render(ctx, r, append([]*Item{wb}, copies...))
	if err != nil {
		return WorkbookDuplicate{}, err
	}
	out.Workbook, out.Reports = rendered[0], append(out.Reports, rendered[1:]...)
	out.Created = DuplicateCounts{Workbooks: 1, Reports: len(copies)}
	return out, nil
}

// duplicateBatch bounds the items one read of a folder duplicate asks for.
const duplicateBatch = 100

// DuplicateFolder copies a folder the caller can view, with its whole subtree, into in's
// folder (beside the original when none is sent). The subtree is counted before
// anything is written, so a subtree over WORKSPACE_MAX_DUPLICATE_ITEMS is refused (400
// duplicate_limit) with nothing created; folders are created top down (each one tree
// operation), then the reports, then the workbooks, whose widgets name the copies of the
// reports copied with them. Grants and embed access are not copied: the copies are the
// caller's. A failure part-way leaves what was created (each item is its own write).
func (s *service) DuplicateFolder(ctx context.Context, p *identity.Principal, deploymentID, id int64, in DuplicateInput) (FolderDuplicate, error) {
	ctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	if p != nil && !p.HasRole(identity.RoleAIBIUser) {
		return FolderDuplicate{}, errs.Forbiddenf("duplicating a folder needs the ai_bi_user role or higher")
	}
	r, d, err := s.folderForRead(ctx, p, deploymentID, id, LevelView, "duplicate it")
	if err != nil {
		return FolderDuplicate{}, err
	}
	name, err := copyName(in.Name, d.Name)
	if err != nil {
		return FolderDuplicate{}, err
	}
	dest := d.Parent
	if in.FolderSet {
		dest = in.FolderID
	}
	if err := s.checkCreateIn(ctx, r, dest, TypeFolder); err != nil {
		return FolderDuplicate{}, err
	}
	if err := r.needSubtree(ctx, id); err != nil {
		return FolderDuplicate{}, err
	}
	if lvl := r.tree.level(dest) + r.tree.height(id); lvl > MaxDepth {
		return FolderDuplicate{}, errs.Invalidf("a copy of folder %d in %s would reach level %d, and folders nest at most %d levels deep", id, folderName(dest), lvl, MaxDepth).WithCode(errs.CodeDepthLimit)
	}
	// The folders, parents before children, and every item in them, counted first.
	folders := []*FolderNode{r.tree.folders[id]}
	for i := 0; i < len(folders); i++ {
		for _, n := range r.tree.folders {
			if n.Parent == folders[i].ID && containsID(n.Anc, id) {
				folders = append(folders, n)
			}
		}
	}
	total := len(folders)
	if total > s.limits.DuplicateItems {
		return FolderDuplicate{}, s.duplicateLimit(total)
	}
	var reports, workbooks []*Item
	for _, f := range folders {
		var after *ListKey
		for {
			batch, err := s.store.Children(ctx, deploymentID, ChildrenQuery{Parent: f.ID, After: after, Limit: duplicateBatch})
			if err != nil {
				return FolderDuplicate{}, err
			}
			for _, it := range batch {
				if it.Type == TypeReport {
					reports = append(reports, it)
				} else {
					workbooks = append(workbooks, it)
				}
			}
			if total += len(batch); total > s.limits.DuplicateItems {
				return FolderDuplicate{}, s.duplicateLimit(total)
			}
			if len(batch) < duplicateBatch {
				break
			}
			last := batch[len(batch)-1]
			after = &ListKey{Position: last.Position, Name: last.Name, ID: last.ID}
		}
	}
	// Folders: each one created as a create request would (its own tree operation).
	copied := map[int64]int64{} // original folder -> copy
	var top Folder
	for i, f := range folders {
		parent, fname := dest, f.Name
		if i == 0 {
			fname = name
		} else {
			parent = copied[f.Parent]
		}
		pos := f.Position
		c, err := s.CreateFolder(ctx, p, deploymentID, CreateFolderInput{Name: fname, ParentID: parent, Position: &pos})
		if err != nil {
			return FolderDuplicate{}, err
		}
		copied[f.ID] = c.ID
		if i == 0 {
			top = c
		}
	}
	out := FolderDuplicate{Created: DuplicateCounts{Folders: len(folders)}}
	mapped := map[int64]int64{} // original report -> copy
	for _, group := range [][]*Item{reports, workbooks} {
		for len(group) > 0 {
			n := min(len(group), duplicateBatch)
			ids := make([]int64, n)
			for i, it := range group[:n] {
				ids[i] = it.ID
			}
			docs, err := s.store.Items(ctx, deploymentID, ids, PartMeta|PartCalculatedFields|PartDraft)
			if err != nil {
				return FolderDuplicate{}, err
			}
			for _, it := range group[:n] {
				src := docs[it.ID]
				if src == nil || copied[src.Parent] == 0 {
					continue // deleted or moved out since it was counted
				}
				c, err := s.copyOf(ctx, r, src, src.Name, copied[src.Parent])
				if err != nil {
					return FolderDuplicate{}, err
				}
				if src.Type == TypeWorkbook {
					c.Draft = copyDraft(src.Draft, mapped)
				}
				if err := s.insertInto(ctx, r, c); err != nil {
					return FolderDuplicate{}, err
				}
				if src.Type == TypeReport {
					mapped[src.ID] = c.ID
					out.Created.Reports++
				} else {
					out.Created.Workbooks++
				}
			}
			group = group[n:]
		}
	}
	out.Folder = top
	return out, nil
}

func folderName(id int64) string {
	if id == 0 {
		return "the workspace root"
	}
	return "folder " + strconv.FormatInt(id, 10)
}
