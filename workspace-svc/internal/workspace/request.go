package workspace

import (
	"context"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// request is the state of one request: the part of the folder tree it has read and, for
// a request that changes the tree's structure, the tree version that part was read at.
type request struct {
	s            *service
	p            *identity.Principal
	deploymentID int64
	v            int64
	tree         *tree
	// loaded: the tree version has been read (load) and r.v is the version the tree
	// read since then is checked against.
	loaded bool
	// committing: commit sent its op's compare-and-set, which may have recorded it (an
	// error leaves that unknown); false once the store said it did not.
	committing bool
	users      map[int64]User // users read so far (creators)
	created    int64          // the item this request created, if any (0: none)
}

// load reads the tree version and finishes the structural op recorded there
// (idempotent; a creation void because its id was another item's, ErrIDTaken, or its
// key a live folder's, ErrKeyTaken, has nothing to finish), then forgets what the request had read: every folder read afterwards
// reflects that version or a later one, and a later one makes the commit's
// compare-and-set fail, so what a committed change was checked against is exactly the
// tree at the version it replaced.
func (r *request) load(ctx context.Context) error {
	d, err := r.s.store.ReadTree(ctx, r.deploymentID)
	if err != nil {
		return err
	}
	if v, ok := r.s.applied.Load(r.deploymentID); d.Op != nil && (!ok || v.(int64) != d.V) {
		if err := r.s.store.ApplyTreeOp(ctx, r.deploymentID, d.V, d.Op); err != nil && !errors.Is(err, ErrIDTaken) && !errors.Is(err, ErrKeyTaken) {
			return err
		}
		r.s.applied.Store(r.deploymentID, d.V)
	}
	r.v, r.tree, r.loaded = d.V, newTree(), true
	return nil
}

// addDocs puts the folders among docs into the tree.
func (r *request) addDocs(docs ...*Item) {
	for _, d := range docs {
		if d != nil && d.Type == TypeFolder {
			r.tree.add(&FolderNode{ID: d.ID, Parent: d.Parent, Name: d.Name, Position: d.Position, CreatedBy: d.CreatedBy,
				Grants: d.Grants, Anc: d.Anc, Depth: d.Depth, EmbedAccess: d.EmbedAccess})
		}
	}
}

// need loads folders ids (0, the root, is skipped) and their ancestor chains: at most
// two queries, one for the folders not yet read and one for their ancestors not yet read.
// A folder that does not exist stays missing (the caller answers 404). A chain that does
// not add up was read while a structural op was half applied: the op is finished and the
// chains read again.
func (r *request) need(ctx context.Context, ids ...int64) error {
	for attempt := 0; ; attempt++ {
		var missing []int64
		for _, id := range ids {
			if id != 0 && r.tree.folders[id] == nil && !containsID(missing, id) {
				missing = append(missing, id)
			}
		}
		nodes, err := r.s.store.Folders(ctx, r.deploymentID, missing)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			r.tree.add(n)
		}
		var anc []int64
		for _, id := range ids {
			if n := r.tree.folders[id]; n != nil {
				for _, a := range n.Anc {
					if r.tree.folders[a] == nil && !containsID(anc, a) {
						anc = append(anc, a)
					}
				}
			}
		}
		if nodes, err = r.s.store.Folders(ctx, r.deploymentID, anc); err != nil {
			return err
		}
		for _, n := range nodes {
			r.tree.add(n)
		}
		broken := false
		for _, id := range ids {
			if n := r.tree.folders[id]; n != nil && !r.tree.complete(id) {
				broken = true
			}
		}
		if !broken {
			return nil
		}
		if attempt == 3 {
			return errs.Unavailablef("the workspace tree kept changing while it was read; retry")
		}
		if err := r.load(ctx); err != nil {
			return err
		}
	}
}

// needSubtree loads every folder below each of ids (one query for all of them).
func (r *request) needSubtree(ctx context.Context, ids ...int64) error {
	var missing []int64
	for _, id := range ids {
		if !r.tree.subtree[id] {
			missing = append(missing, id)
		}
	}
	nodes, err := r.s.store.SubtreeFolders(ctx, r.deploymentID, missing)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if r.tree.folders[n.ID] == nil {
			r.tree.add(n)
		}
	}
	for _, id := range missing {
		r.tree.subtree[id] = true
	}
	return nil
}

// commit validates and records one structural change against the tree as read at the
// request's version, then applies it. prepare reads what build needs (it runs again
// after a reload). When another change got in first, the tree is read again and the
// change validated again, so nothing is ever written that was checked against a stale
// tree. The op is recorded before it is applied: a crash in between leaves a validated
// op that the next structural change of the deployment applies first.
func (r *request) commit(ctx context.Context, prepare func(ctx context.Context) error, build func(t *tree) (*TreeOp, error)) error {
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		if attempt > 0 || !r.loaded {
			if err := r.load(ctx); err != nil {
				return err
			}
		}
		if err := prepare(ctx); err != nil {
			return err
		}
		op, err := build(r.tree)
		if err != nil || op == nil {
			return err
		}
		r.committing = true
		ok, err := r.s.store.CommitTreeOp(ctx, r.deploymentID, r.v, op)
		if err != nil {
			return err
		}
		if !ok {
			r.committing = false
			r.s.treeConflicts.Inc()
			continue
		}
		r.v++
		if err := r.s.store.ApplyTreeOp(ctx, r.deploymentID, r.v, op); err != nil {
			return err
		}
		r.s.applied.Store(r.deploymentID, r.v)
		r.tree.apply(op)
		return nil
	}
	// Leave a current tree behind: the later items of a bulk move are checked against it.
	if err := r.load(ctx); err != nil {
		return err
	}
	return errs.Unavailablef("the workspace tree kept changing during the request; retry")
}

// visible reports whether the caller can view d; its chain must be loaded.
func (r *request) visible(d *Item) bool {
	if d.Type == TypeFolder {
		return r.tree.folders[d.ID] != nil && r.tree.folderLevel(r.p, d.ID) >= LevelView
	}
	return r.tree.itemLevel(r.p, d.CreatedBy, d.Parent) >= LevelView
}
