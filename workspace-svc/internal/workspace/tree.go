package workspace

import (
	"slices"
	"sort"

	"github.com/analyticsco/platform/libs/identity"
)

// Level is a folder access level.
type Level int

// Access levels, lowest first.
const (
	LevelNone Level = iota
	LevelView
	LevelEdit
	LevelManage
)

// levelNames are the names of the levels, indexed by level.
var levelNames = []string{LevelNone: "", LevelView: "view", LevelEdit: "edit", LevelManage: "manage"}

func (l Level) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return ""
	}
	return levelNames[l]
}

// ParseLevel parses "view", "edit" or "manage".
func ParseLevel(s string) (Level, bool) {
	if i := slices.Index(levelNames, s); i > 0 {
		return Level(i), true
	}
	return LevelNone, false
}

// Grant gives a user a level on a folder's whole subtree.
type Grant struct {
	UserID int64  `json:"userId"`
	Level  string `json:"level"`
}

// tree is the part of a deployment's folder tree a request has read: the ancestor
// chains of the folders it touches and, for a folder move, the moved subtree. Anc (the
// ids of every ancestor) and Depth are kept on each folder by the structural ops, so the
// whole ancestor chain of any folder is one read by id away: a request reads what it
// needs (request.need, request.needSubtree), so what it reads follows the request, not
// the size of the deployment.
type tree struct {
	folders map[int64]*FolderNode
	subtree map[int64]bool // folders whose whole subtree of folders is loaded
}

func newTree() *tree {
	return &tree{folders: map[int64]*FolderNode{}, subtree: map[int64]bool{}}
}

// add puts n into the tree, replacing what was known of that folder.
func (t *tree) add(n *FolderNode) { t.folders[n.ID] = n }

// chain returns id and its ancestors, nearest first, as far as they are loaded. It is
// cut at MaxDepth+1 so an inconsistent read can never loop.
func (t *tree) chain(id int64) []*FolderNode {
	var out []*FolderNode
	for cur := id; cur != 0 && len(out) <= MaxDepth; {
		n := t.folders[cur]
		if n == nil {
			break
		}
		out = append(out, n)
		cur = n.Parent
	}
	return out
}

// complete reports whether folder id and its whole ancestor chain are loaded and agree
// with each other: the chain reaches the root in exactly Depth steps and every folder on
// it is one of id's recorded ancestors. A chain read while a structural op was half
// applied fails this check, and the request rolls the op forward and reads again.
func (t *tree) complete(id int64) bool {
	n := t.folders[id]
	if n == nil {
		return false
	}
	c := t.chain(id)
	if n.Depth < 1 || len(c) != n.Depth || c[len(c)-1].Parent != 0 {
		return false
	}
	anc := map[int64]bool{}
	for _, a := range n.Anc {
		anc[a] = true
	}
	if len(anc) != n.Depth-1 {
		return false
	}
	for i, a := range c[1:] {
		if !anc[a.ID] || a.Depth != n.Depth-1-i {
			return false
		}
	}
	return true
}

// path is the folderPath of an item whose folder is parent, as the caller p may see it:
// the folders from the highest one p can view down to parent inclusive. View access flows
// down the tree, so the folders above that one are exactly those p cannot view: they are
// left out (the path then does not start at the root), and the path is empty when p
// cannot view parent itself (an item p sees as its creator).
func (t *tree) path(p *identity.Principal, parent int64) []FolderPathEntry {
	c := t.chain(parent) // nearest first
	top := -1            // the index in c of the highest folder p can view
	for i := len(c) - 1; i >= 0 && top < 0; i-- {
		// From the root down: the folders above c[i] give p nothing, so its own
		// creatorship and grants decide.
		if levelAlong(p, c[i:i+1]) >= LevelView {
			top = i
		}
	}
	out := make([]FolderPathEntry, top+1)
	for i := 0; i <= top; i++ {
		out[top-i] = FolderPathEntry{ID: c[i].ID, Name: c[i].Name}
	}
	return out
}

// level is the depth of folder id: 1 at the root, 0 for the root itself.
func (t *tree) level(id int64) int { return len(t.chain(id)) }

// height is the number of folder levels of the subtree rooted at id (1 for a leaf); the
// subtree must be loaded (request.needSubtree).
func (t *tree) height(id int64) int {
	n := t.folders[id]
	if n == nil {
		return 0
	}
	best := n.Depth
	for _, x := range t.folders {
		if x.Depth > best && containsID(x.Anc, id) {
			best = x.Depth
		}
	}
	return best - n.Depth + 1
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// isSelfOrDescendant reports whether candidate is folder or lies inside its subtree.
func (t *tree) isSelfOrDescendant(candidate, folder int64) bool {
	n := t.folders[candidate]
	return candidate == folder || (n != nil && containsID(n.Anc, folder))
}

// ancestorsOf is what a folder directly inside parent records as its ancestors.
func (t *tree) ancestorsOf(parent int64) ([]int64, int) {
	if parent == 0 {
		return []int64{}, 1
	}
	p := t.folders[parent]
	return append(append([]int64{}, p.Anc...), parent), p.Depth + 1
}

// moveOp builds the structural op that moves folder id into to: the folder's new
// ancestors and depth, and what changes for every folder below it (ancestors pulled and
// pushed, depth shifted).
func (t *tree) moveOp(id, to int64) *TreeOp {
	n := t.folders[id]
	anc, depth := t.ancestorsOf(to)
	oldSet, newSet := map[int64]bool{}, map[int64]bool{}
	for _, a := range n.Anc {
		oldSet[a] = true
	}
	for _, a := range anc {
		newSet[a] = true
	}
	op := &TreeOp{Kind: OpMove, Folder: id, To: to, Anc: anc, Depth: depth, Delta: depth - n.Depth, Pull: []int64{}, Push: []int64{}}
	for _, a := range n.Anc {
		if !newSet[a] {
			op.Pull = append(op.Pull, a)
		}
	}
	for _, a := range anc {
		if !oldSet[a] {
			op.Push = append(op.Push, a)
		}
	}
	return op
}

// apply records a committed op in the loaded part of the tree.
func (t *tree) apply(op *TreeOp) {
	switch op.Kind {
	case OpCreate:
		d := op.Created
		t.add(&FolderNode{ID: d.ID, Parent: d.Parent, Name: d.Name, Position: d.Position, CreatedBy: d.CreatedBy, Anc: d.Anc, Depth: d.Depth})
	case OpMove:
		n := t.folders[op.Folder]
		if n == nil {
			return
		}
		for _, x := range t.folders {
			if !containsID(x.Anc, op.Folder) {
				continue
			}
			var kept []int64
			for _, a := range x.Anc {
				if !containsID(op.Pull, a) {
					kept = append(kept, a)
				}
			}
			x.Anc, x.Depth = append(kept, op.Push...), x.Depth+op.Delta
		}
		n.Parent, n.Anc, n.Depth = op.To, op.Anc, op.Depth
	}
}

// folderLevel is the caller's effective level on folder id: admins manage everything;
// otherwise the highest of the grants and creatorships along the ancestor chain.
// Viewers never get more than view: writing needs the ai_bi_user role.
func (t *tree) folderLevel(p *identity.Principal, id int64) Level {
	return levelAlong(p, t.chain(id))
}

// childFolderLevel is the caller's level on folder d, a child of a folder whose chain is
// loaded, without putting d into the tree (a listing keeps no folder it does not show).
func (t *tree) childFolderLevel(p *identity.Principal, d *Item) Level {
	n := &FolderNode{ID: d.ID, Parent: d.Parent, CreatedBy: d.CreatedBy, Grants: d.Grants}
	return levelAlong(p, append([]*FolderNode{n}, t.chain(d.Parent)...))
}

// levelAlong is folderLevel from a folder's chain, the folder first.
func levelAlong(p *identity.Principal, chain []*FolderNode) Level {
	if p.User == nil {
		return LevelNone
	}
	if p.HasRole(identity.RoleAdmin) {
		return LevelManage
	}
	best := LevelNone
	for _, n := range chain {
		if n.CreatedBy == p.User.ID {
			best = LevelManage
			break
		}
		for _, g := range n.Grants {
			if g.UserID == p.User.ID {
				if l, _ := ParseLevel(g.Level); l > best {
					best = l
				}
			}
		}
	}
	if best > LevelView && !p.HasRole(identity.RoleAIBIUser) {
		best = LevelView
	}
	return best
}

// containerLevel is the caller's level on a folder as a place to put things in; the
// root (0) is managed by admins, editable by every ai_bi_user and above and viewable by
// everyone.
func (t *tree) containerLevel(p *identity.Principal, parent int64) Level {
	if parent == 0 {
		switch {
		case p.HasRole(identity.RoleAdmin):
			return LevelManage
		case p.HasRole(identity.RoleAIBIUser):
			return LevelEdit
		case p.HasRole(identity.RoleViewer):
			return LevelView
		}
		return LevelNone
	}
	return t.folderLevel(p, parent)
}

// itemLevel is the caller's level on a workbook or report: its creator manages it,
// anyone else has the level of its folder.
func (t *tree) itemLevel(p *identity.Principal, createdBy, parent int64) Level {
	if p.User != nil && createdBy == p.User.ID {
		if p.HasRole(identity.RoleAIBIUser) {
			return LevelManage
		}
		return LevelView
	}
	return t.containerLevel(p, parent)
}

// sortedGrants orders grants by user id for stable output.
func sortedGrants(g []Grant) []Grant {
	out := append([]Grant{}, g...)
	sort.Slice(out, func(i, j int) bool { return out[i].UserID < out[j].UserID })
	return out
}
