package workspace

import (
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

var levelNames = map[Level]string{LevelView: "view", LevelEdit: "edit", LevelManage: "manage"}

func (l Level) String() string { return levelNames[l] }

// ParseLevel parses "view", "edit" or "manage".
func ParseLevel(s string) (Level, bool) {
	for l, n := range levelNames {
		if n == s {
			return l, true
		}
	}
	return LevelNone, false
}

// Grant gives a user a level on a folder's whole subtree.
type Grant struct {
	UserID int64  `json:"userId" bson:"userId"`
	Level  string `json:"level" bson:"level"`
}

// folderNode is what the tree snapshot keeps of a folder.
type folderNode struct {
	ID        int64   `bson:"_id"`
	Parent    int64   `bson:"parent"`
	Name      string  `bson:"name"`
	Position  float64 `bson:"position"`
	CreatedBy int64   `bson:"createdBy"`
	Grants    []Grant `bson:"grants"`
}

// tree is a snapshot of a deployment's folders, loaded with one query per request: the
// ancestors, descendants and access levels of every item of the request come from it,
// so nothing walks the tree in the database per item.
type tree struct {
	folders  map[int64]*folderNode
	children map[int64][]int64 // parent (0 = root) -> child folder ids
}

func newTree(nodes []*folderNode) *tree {
	t := &tree{folders: make(map[int64]*folderNode, len(nodes)), children: map[int64][]int64{}}
	for _, n := range nodes {
		t.folders[n.ID] = n
	}
	for _, n := range nodes {
		t.children[n.Parent] = append(t.children[n.Parent], n.ID)
	}
	return t
}

// chain returns id and its ancestors, nearest first. A chain longer than the number of
// folders means a cycle, which the move protocol never writes; it is cut short anyway
// so a corrupted tree cannot hang a request.
func (t *tree) chain(id int64) []*folderNode {
	var out []*folderNode
	for cur := id; cur != 0 && len(out) <= len(t.folders); {
		n := t.folders[cur]
		if n == nil {
			break
		}
		out = append(out, n)
		cur = n.Parent
	}
	return out
}

// path is the folderPath of an item whose folder is parent: the ancestors from the root
// down to parent inclusive.
func (t *tree) path(parent int64) []FolderPathEntry {
	c := t.chain(parent)
	out := make([]FolderPathEntry, len(c))
	for i, n := range c {
		out[len(c)-1-i] = FolderPathEntry{ID: n.ID, Name: n.Name}
	}
	return out
}

// level is the depth of folder id: 1 at the root, 0 for the root itself.
func (t *tree) level(id int64) int { return len(t.chain(id)) }

// height is the number of folder levels of the subtree rooted at id (1 for a leaf).
func (t *tree) height(id int64) int {
	best := 0
	var walk func(id int64, d int)
	seen := map[int64]bool{}
	walk = func(id int64, d int) {
		if seen[id] {
			return
		}
		seen[id] = true
		if d > best {
			best = d
		}
		for _, c := range t.children[id] {
			walk(c, d+1)
		}
	}
	walk(id, 1)
	return best
}

// isSelfOrDescendant reports whether candidate is folder or lies inside its subtree.
func (t *tree) isSelfOrDescendant(candidate, folder int64) bool {
	for _, n := range t.chain(candidate) {
		if n.ID == folder {
			return true
		}
	}
	return false
}

// move re-parents a folder in the snapshot after a committed move.
func (t *tree) move(id, to int64) {
	n := t.folders[id]
	if n == nil {
		return
	}
	sib := t.children[n.Parent]
	for i, c := range sib {
		if c == id {
			t.children[n.Parent] = append(sib[:i:i], sib[i+1:]...)
			break
		}
	}
	n.Parent = to
	t.children[to] = append(t.children[to], id)
}

func (t *tree) add(n *folderNode) {
	t.folders[n.ID] = n
	t.children[n.Parent] = append(t.children[n.Parent], n.ID)
}

// maxChildPosition is the highest position among parent's child folders, or -1.
func (t *tree) maxChildPosition(parent int64) float64 {
	best := -1.0
	for _, c := range t.children[parent] {
		if p := t.folders[c].Position; p > best {
			best = p
		}
	}
	return best
}

// folderLevel is the caller's effective level on folder id: admins manage everything;
// otherwise the highest of the grants and creatorships along the ancestor chain.
// Viewers never get more than view: writing needs the ai_bi_user role.
func (t *tree) folderLevel(p *identity.Principal, id int64) Level {
	if p.User == nil {
		return LevelNone
	}
	if p.HasRole(identity.RoleAdmin) {
		return LevelManage
	}
	best := LevelNone
	for _, n := range t.chain(id) {
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
// root (0) is editable by every ai_bi_user and above and viewable by everyone.
func (t *tree) containerLevel(p *identity.Principal, parent int64) Level {
	if parent == 0 {
		switch {
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
