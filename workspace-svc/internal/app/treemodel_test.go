package app_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// The sequential specification of a deployment's workspace tree that the linearizability
// test (linearizability_test.go) checks concurrent API histories against: the contract's
// rules for folder creation and single and bulk moves (api/openapi.yaml, README "Spec
// rules"), and what a read of an item's place answers.
//
// The state is where every item is: its folder, 0 at the root. A folder create succeeds
// iff the new folder is at most workspace.MaxDepth levels deep (else 400 depth_limit); a
// folder move succeeds iff the destination is neither the folder nor below it (else 400
// folder_cycle) and the deepest folder of the moved subtree stays within MaxDepth (else
// 400 depth_limit); a workbook move always succeeds. A refused operation changes nothing.
// An operation without a definite answer (a 5xx, or none) may or may not have taken effect
// (the model is nondeterministic there); taking effect, it follows the same rules. A 5xx
// ends it (a structural change takes effect when its tree version is committed, before
// the answer); one with no answer has no end in the history. A read answers the
// item's folder and that folder's path from the root. A successful move, of a folder or a
// workbook, single or one item of a bulk move, answers the state right after it: the item
// in the destination, at the destination's path. The final observation is the stored tree
// after every client ended.

// treeInput is an operation of the history.
type treeInput struct {
	Kind     string // "create", "move", "read", "final"
	Item     int64  // move, read: the item; create: the new folder's parent
	Dest     int64  // move: the destination folder, 0 the root
	Workbook bool   // move, read: Item is a workbook
	Bulk     bool   // move: one item of a bulk move
	Client   int
}

// treeOutput is what the operation answered.
type treeOutput struct {
	Known    bool   // a definite answer; false: it may or may not have been applied
	Answered bool   // not Known, but answered (a 5xx): it did not take effect after the answer
	Status   int    // the HTTP status (the bulk move entry's)
	Code     string // the error code of a 4xx
	ID       int64  // create: the new folder's id
	Parent   int64  // create, move, read: the answer's parentId or folderId (0: none)
	Path     []int64
	CheckPth bool            // Path is the answer's folderPath, to check
	Final    map[int64]int64 // final: every item's folder as stored
}

// treeState maps every item to its folder; it is never changed in place.
type treeState map[int64]int64

// treeModel is the model for a deployment whose workbooks are those of workbooks.
func treeModel(workbooks map[int64]bool, initial treeState) porcupine.Model {
	chain := func(s treeState, id int64) []int64 { // root first, id last; nil for the root
		var out []int64
		for cur := id; cur != 0 && len(out) <= len(s); cur = s[cur] {
			out = append(out, cur)
		}
		slices.Reverse(out)
		return out
	}
	var height func(s treeState, f int64) int
	height = func(s treeState, f int64) int {
		h := 1
		for id, p := range s {
			if p == f && !workbooks[id] {
				h = max(h, 1+height(s, id))
			}
		}
		return h
	}
	with := func(s treeState, id, parent int64) treeState {
		n := maps.Clone(s)
		n[id] = parent
		return n
	}
	// moveOutcome is the status and code the contract gives moving item to dest in s.
	moveOutcome := func(s treeState, in treeInput) (int, string) {
		if in.Workbook {
			return 200, ""
		}
		if in.Dest != 0 && slices.Contains(chain(s, in.Dest), in.Item) {
			return 400, "folder_cycle"
		}
		if len(chain(s, in.Dest))+height(s, in.Item) > workspace.MaxDepth {
			return 400, "depth_limit"
		}
		return 200, ""
	}
	// definite is the next state after an answer that says what happened; ok false: the
	// answer is not possible in s.
	definite := func(s treeState, in treeInput, out treeOutput) (ok bool, next treeState) {
		switch in.Kind {
		case "create": // also one without an answer whose folder was found stored (out.ID)
			_, taken := s[out.ID]
			deep := len(chain(s, in.Item))+1 > workspace.MaxDepth
			switch {
			case out.Status == 200 || !out.Known:
				ok := !taken && !deep && (!out.Known || out.Parent == in.Item) && (!out.CheckPth || slices.Equal(out.Path, chain(s, in.Item)))
				return ok, with(s, out.ID, in.Item)
			case out.Status == 400 && out.Code == "depth_limit":
				return deep, s
			}
			return false, s
		case "move":
			if _, ok := s[in.Item]; !ok {
				return false, s
			}
			status, code := moveOutcome(s, in)
			if out.Status != status || out.Code != code {
				return false, s
			}
			if status != 200 {
				return true, s
			}
			if out.Parent != in.Dest || out.CheckPth && !slices.Equal(out.Path, chain(s, in.Dest)) {
				return false, s
			}
			return true, with(s, in.Item, in.Dest)
		case "read":
			p, ok := s[in.Item]
			return ok && out.Parent == p && (!out.CheckPth || slices.Equal(out.Path, chain(s, p))), s
		case "final":
			return maps.Equal(map[int64]int64(s), out.Final), s
		}
		return false, s
	}
	// step is every state the answer may leave: the one of a definite answer, none when the
	// answer is not possible in the state, and for a move without an answer both the state
	// with the move and without it.
	step := func(state, input, output any) []any {
		s, in, out := state.(treeState), input.(treeInput), output.(treeOutput)
		if !out.Known && in.Kind == "move" {
			if status, _ := moveOutcome(s, in); status == 200 {
				return []any{s, with(s, in.Item, in.Dest)}
			}
			return []any{s}
		}
		if !out.Known && out.ID == 0 { // a create without an answer, never stored
			return []any{s}
		}
		if ok, next := definite(s, in, out); ok {
			return []any{next}
		}
		return nil
	}
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{initial} },
		Step: step,
		Equal: func(a, b any) bool {
			return maps.Equal(a.(treeState), b.(treeState))
		},
		Hash: func(state any) uint64 {
			var h uint64
			for id, p := range state.(treeState) {
				x := uint64(id)*0x9e3779b97f4a7c15 ^ uint64(p)*0xc2b2ae3d27d4eb4f
				x ^= x >> 29
				h += x * 0xbf58476d1ce4e5b9
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(treeInput), output.(treeOutput)
			res := "?"
			if out.Answered {
				res = fmt.Sprintf("%d?", out.Status)
			}
			if out.Known {
				res = fmt.Sprint(out.Status)
				if out.Code != "" {
					res += " " + out.Code
				}
			}
			item := func(id int64) string {
				if workbooks[id] {
					return fmt.Sprintf("W%d", id)
				}
				return fmt.Sprintf("F%d", id)
			}
			switch in.Kind {
			case "create":
				return fmt.Sprintf("c%d create in %s → %s F%d path %v", in.Client, item(in.Item), res, out.ID, out.Path)
			case "move":
				bulk := ""
				if in.Bulk {
					bulk = "bulk "
				}
				return fmt.Sprintf("c%d %smove %s to %s → %s parent %d path %v", in.Client, bulk, item(in.Item), item(in.Dest), res, out.Parent, out.Path)
			case "read":
				return fmt.Sprintf("c%d read %s → parent %d path %v", in.Client, item(in.Item), out.Parent, out.Path)
			}
			return "stored tree " + describeTree(out.Final)
		},
		DescribeState: func(state any) string { return describeTree(state.(treeState)) },
	}
	return nm.ToModel()
}

// describeTree is "item←folder" for every item, in id order.
func describeTree(s map[int64]int64) string {
	ids := slices.Sorted(maps.Keys(s))
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d←%d", id, s[id])
	}
	return strings.Join(parts, " ")
}
