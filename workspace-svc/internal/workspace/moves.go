package workspace

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// Move moves one item; it is BulkMove of one item, so both answer the same: a refused
// item is the error, and where the item was is From as BulkMove read it.
func (s *service) Move(ctx context.Context, p *identity.Principal, deploymentID int64, ref ItemRef, dest int64) (MoveResult, error) {
	res, err := s.BulkMove(ctx, p, deploymentID, []ItemRef{ref}, dest)
	if err != nil {
		return MoveResult{}, err
	}
	var out MoveResult
	out.From, out.Read = res.From[ref]
	if len(res.Failed) > 0 {
		return out, res.Failed[0].Err
	}
	out.Item = res.Moved[0]
	return out, nil
}

// BulkMove moves items, one at a time in order, into dest (0: the root). Repeated
// references collapse to the first. Each item is its own single-document write (a folder
// move is recorded in the tree version first, see commit); a failed item does not undo
// earlier ones.
// BulkMove answers one outcome per distinct item, also when the store fails midway:
// items applied before a fault are in Moved, the rest in Failed with a 503 that says they
// were not applied (Rule 2: 200 whenever the request is well formed; Rule 4: an empty
// Failed means everything applied). Each item has its own deadline (writeDeadline).
//
// Nothing is read before access is decided: a caller below ai_bi_user can move nothing
// (every level it holds is capped at view), so its items are refused before any read;
// otherwise access is checked on the items' heads (Items without parts). What the answer
// carries is bounded by MoveAnswerBytes (WORKSPACE_MAX_BULK_MOVE_BYTES), decided on the
// heads' sizes before each move; the moved workbooks and reports are then read in full,
// in one query, to be answered. When the store fails after some moves, those are
// answered as far as they were read (without their owners, and without their content if
// that read failed too).
//
// Each moved item is answered as its own move left it (movedItem): in the destination,
// at the destination's path as that move checked it, never at a later place or path that
// another client's move, or a reload of the tree for a later item, made.
func (s *service) BulkMove(ctx context.Context, p *identity.Principal, deploymentID int64, refs []ItemRef, dest int64) (BulkMoveResult, error) {
	r, err := s.begin(ctx, p, deploymentID)
	if err != nil {
		return BulkMoveResult{}, err
	}
	distinct := distinctRefs(refs)
	res := BulkMoveResult{Moved: []Workbook{}, Failed: []BulkFailure{}}
	if !p.HasRole(identity.RoleAIBIUser) {
		for _, ref := range distinct {
			res.fail(ref, errs.Forbiddenf("moving a %s needs the ai_bi_user role or higher", ref.Type.lower()))
		}
		return res, nil
	}
	pctx, cancel := context.WithTimeout(ctx, writeDeadline)
	docs, err := s.loadForMove(pctx, r, distinct, dest)
	cancel()
	if err != nil {
		if _, ok := errs.As(err); ok {
			return BulkMoveResult{}, err
		}
		res.notApplied(distinct, false, err)
		return res, nil
	}
	res.From = make(map[ItemRef]int64, len(docs))
	for _, ref := range distinct {
		if d := docs[ref.ID]; d != nil && d.Type == ref.Type {
			res.From[ref] = d.Parent
		}
	}
	lease := &destLease{s: s, deploymentID: deploymentID, dest: dest}
	defer lease.release(ctx)
	answer := &moveAnswer{max: s.limits.MoveAnswerBytes, read: map[int64]bool{}}
	var moved []movedItem
	for i, ref := range distinct {
		d := docs[ref.ID]
		if d == nil || d.Type != ref.Type {
			res.fail(ref, notFound(ref.Type, ref.ID))
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, writeDeadline)
		var ferr error
		if ref.Type == TypeFolder {
			ferr = s.moveFolder(ictx, r, d, dest, lease)
		} else {
			ferr = s.moveItem(ictx, r, d, dest, lease, answer)
		}
		cancel()
		if f, ok := errs.As(ferr); ok {
			res.fail(ref, f)
			continue
		}
		if ferr != nil {
			// The store failed: the moved items are rendered as read so far, without
			// their owners or content (no further wait on it), and the rest are reported
			// not applied at once.
			if len(moved) > 0 {
				res.Moved = renderMovedWithoutOwners(moved)
			}
			res.notApplied(distinct[i:], true, ferr)
			return res, nil
		}
		// The tree holds dest's chain as this move checked it; a later item may reload it.
		moved = append(moved, movedItem{d: d, path: r.tree.path(r.p, dest)})
	}
	if len(moved) > 0 {
		if err := s.readMoved(ctx, r, moved, answer); err != nil {
			res.Moved = renderMovedWithoutOwners(moved)
			return res, nil
		}
		out, err := s.renderMoved(ctx, r, moved)
		if err != nil {
			out = renderMovedWithoutOwners(moved) // moved all the same
		}
		res.Moved = out
	}
	return res, nil
}

// movedItem is an item as its own move left it, which is what the move answers: d is its
// document with the move applied (Parent the destination, and for a write the move's
// updatedAt and updatedBy), path the destination's folderPath in the tree the move was
// checked against (for a folder, the tree at the version its move committed on).
type movedItem struct {
	d    *Item
	path []FolderPathEntry
}

// distinctRefs is refs without repeats, in the order of their first mention (Rule 1).
func distinctRefs(refs []ItemRef) []ItemRef {
	out := make([]ItemRef, 0, len(refs))
	seen := map[ItemRef]bool{}
	for _, ref := range refs {
		if !seen[ref] {
			seen[ref] = true
			out = append(out, ref)
		}
	}
	return out
}

func (res *BulkMoveResult) fail(ref ItemRef, err *errs.Error) {
	res.Failed = append(res.Failed, BulkFailure{Ref: ref, Err: err})
}

// notApplied fails every item of rest, the items the store's failure (cause) left. With
// inFlight, the first was being moved when the store failed, so its write may or may not
// have landed (a reply lost with the connection); the others were not touched.
func (res *BulkMoveResult) notApplied(rest []ItemRef, inFlight bool, cause error) {
	reason := "the workspace store failed"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "the item's deadline passed"
	}
	for j, ref := range rest {
		if j == 0 && inFlight {
			res.fail(ref, notAppliedf("%s %d may not have been moved: %s while moving it; check where it is and retry", ref.Type.lower(), ref.ID, reason))
			continue
		}
		res.fail(ref, notAppliedf("%s %d was not moved: %s; retry it", ref.Type.lower(), ref.ID, reason))
	}
}

// destLease is the lease a move request holds on its destination folder: taken once,
// before the first write into it (the root needs none), in the context of the item being
// moved, and given back when the request ends. gone records that the destination was not
// there to lease (deleted meanwhile).
type destLease struct {
	s                  *service
	deploymentID, dest int64
	leased             bool
	gone               bool
}

func (l *destLease) take(ctx context.Context) error {
	if l.dest == 0 || l.leased {
		return nil
	}
	now := l.s.now()
	ok, err := l.s.store.LeaseFolder(ctx, l.deploymentID, l.dest, now, now.Add(leaseTTL))
	if err != nil {
		return err
	}
	l.leased, l.gone = true, !ok
	return nil
}

func (l *destLease) release(ctx context.Context) {
	if l.leased && !l.gone {
		l.s.release(ctx, l.deploymentID, l.dest)
	}
}

// checkDestination is the part of a move's checks that concerns where the item goes.
func checkDestination(t *tree, dest int64, destGone bool) *errs.Error {
	if dest != 0 && (destGone || t.folders[dest] == nil) {
		return notFound(TypeFolder, dest)
	}
	return nil
}

func checkDestinationAccess(t *tree, p *identity.Principal, dest int64) *errs.Error {
	if t.containerLevel(p, dest) >= LevelEdit {
		return nil
	}
	if dest == 0 {
		return errs.Forbiddenf("moving items to the workspace root needs the ai_bi_user role or higher")
	}
	return errs.Forbiddenf("you need edit access to folder %d to move items into it", dest)
}

// moveAnswer is what a bulk move's answer carries so far: the size of the large parts
// (as stored) of the workbooks and reports it moved, and those already read in full.
type moveAnswer struct {
	used, max int
	read      map[int64]bool
}

// admit refuses an item of size bytes that would take the answer past its limit; the
// first item always fits, so a single move never fails for its size.
func (b *moveAnswer) admit(d *Item, size int) error {
	if b.used > 0 && b.used+size > b.max {
		return errs.New(errs.TooLarge, "%s %d was not moved: this bulk move already answers with %d bytes of moved items and it holds %d more, over the limit of %d bytes; move it in another request",
			d.Type.lower(), d.ID, b.used, size, b.max)
	}
	return nil
}

// readMoved completes the moved workbooks and reports not read in full yet with their
// large parts, in one query (bounded by the answer's limit); one deleted since stays as
// it was. The read comes after the moves, so it may see later writes of other clients:
// an item whose stored head is still the one its move left (same folder, updatedAt and
// updatedBy; every write of an item sets its updatedAt) is taken as read, since that is
// its state at the move; an item written since keeps the head its move left, and only
// its large parts are taken from the read (the request cannot read them as they were).
func (s *service) readMoved(ctx context.Context, r *request, moved []movedItem, answer *moveAnswer) error {
	var ids []int64
	for _, m := range moved {
		if m.d.Type != TypeFolder && !answer.read[m.d.ID] {
			ids = append(ids, m.d.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	full, err := s.store.Items(ctx, r.deploymentID, ids, AllParts)
	if err != nil {
		return err
	}
	for _, m := range moved {
		d := m.d
		fd := full[d.ID]
		if fd == nil || fd.Type != d.Type {
			continue
		}
		if fd.Parent == d.Parent && fd.UpdatedBy == d.UpdatedBy && fd.UpdatedAt.Equal(d.UpdatedAt) {
			*d = *fd
		} else {
			d.Meta, d.CalculatedFields, d.Draft, d.Published = fd.Meta, fd.CalculatedFields, fd.Draft, fd.Published
		}
		answer.read[d.ID] = true
	}
	return nil
}

// jsonBytes is the size of v as JSON (0 for nil).
func jsonBytes[T any](v *T) int {
	if v == nil {
		return 0
	}
	b, _ := json.Marshal(v) // decoded from JSON, so it encodes
	return len(b)
}

// loadForMove reads what a move of refs into dest is checked against, in a fixed number
// of queries whatever the number of items: the tree version (when a folder moves), the
// heads of the items and of the destination (one query; no item's content), the folders
// holding the workbooks and reports (one), every ancestor of all of them (one), and the
// subtrees of the moved folders (one).
func (s *service) loadForMove(ctx context.Context, r *request, refs []ItemRef, dest int64) (map[int64]*Item, error) {
	// Only folder moves compare-and-set the tree version (moveFolder's commit); workbooks
	// and reports move with a conditional update of their own document.
	for _, ref := range refs {
		if ref.Type == TypeFolder {
			if err := r.load(ctx); err != nil {
				return nil, err
			}
			break
		}
	}
	ids := make([]int64, 0, len(refs)+1)
	for _, ref := range refs {
		ids = append(ids, ref.ID)
	}
	if dest != 0 {
		ids = append(ids, dest)
	}
	docs, err := s.store.Items(ctx, r.deploymentID, ids, 0)
	if err != nil {
		return nil, err
	}
	var chains, folders []int64
	if d := docs[dest]; d != nil && d.Type == TypeFolder {
		r.addDocs(d)
	}
	if dest != 0 {
		chains = append(chains, dest)
	}
	for _, ref := range refs {
		d := docs[ref.ID]
		switch {
		case d == nil || d.Type != ref.Type:
		case d.Type == TypeFolder:
			r.addDocs(d)
			chains, folders = append(chains, d.ID), append(folders, d.ID)
		default:
			chains = append(chains, d.Parent)
		}
	}
	if err := r.need(ctx, chains...); err != nil {
		return nil, err
	}
	if err := r.needSubtree(ctx, folders...); err != nil {
		return nil, err
	}
	var found []*Item
	for _, ref := range refs {
		if d := docs[ref.ID]; d != nil {
			found = append(found, d)
		}
	}
	// The creators: to render the moved items, and to keep each workbook and report
	// visible to its creator (moveItem).
	if _, err := s.usersFor(ctx, r, creators(found)); err != nil {
		return nil, err
	}
	return docs, nil
}

func (s *service) moveFolder(ctx context.Context, r *request, d *Item, dest int64, lease *destLease) error {
	p := r.p
	prepare := func(ctx context.Context) error {
		if err := r.need(ctx, d.ID, dest); err != nil {
			return err
		}
		return r.needSubtree(ctx, d.ID)
	}
	// The op's application counts the move in the folder's version; the answer shows it.
	version := d.Version
	return r.commit(ctx, prepare, func(t *tree) (*TreeOp, error) {
		if t.folders[d.ID] == nil {
			return nil, notFound(TypeFolder, d.ID)
		}
		if f := checkDestination(t, dest, lease.gone); f != nil {
			return nil, f
		}
		if t.folderLevel(p, d.ID) < LevelEdit {
			return nil, errs.Forbiddenf("you need edit access to folder %d to move it", d.ID)
		}
		if f := checkDestinationAccess(t, p, dest); f != nil {
			return nil, f
		}
		if dest != 0 && t.isSelfOrDescendant(dest, d.ID) {
			return nil, errs.Invalidf("cannot move folder %d into itself or one of its descendants (folder %d)", d.ID, dest).WithCode(errs.CodeFolderCycle)
		}
		if deepest := t.level(dest) + t.height(d.ID); deepest > MaxDepth {
			return nil, errs.Invalidf("moving folder %d there would put a folder at level %d: folders nest at most %d levels deep", d.ID, deepest, MaxDepth).WithCode(errs.CodeDepthLimit)
		}
		cur := t.folders[d.ID]
		d.Parent, d.Name, d.Position, d.Grants = cur.Parent, cur.Name, cur.Position, cur.Grants
		if cur.Parent == dest {
			return nil, nil // already there: nothing to record
		}
		if err := lease.take(ctx); err != nil {
			return nil, err
		}
		if lease.gone {
			return nil, notFound(TypeFolder, dest)
		}
		now := s.now()
		d.Parent, d.UpdatedAt, d.UpdatedBy, d.Version = dest, now, p.User.ID, version+1
		op := t.moveOp(d.ID, dest)
		op.By, op.At = p.User.ID, now
		return op, nil
	})
}

// moveItem moves a workbook or report whose head is d, once the move is allowed and the
// item admitted to the answer by its size; after the move, d is where it now is.
func (s *service) moveItem(ctx context.Context, r *request, d *Item, dest int64, lease *destLease, answer *moveAnswer) error {
	for attempt := 0; attempt < maxTreeRetries; attempt++ {
		if err := r.need(ctx, d.Parent, dest); err != nil {
			return err
		}
		if err := r.checkItemMove(d, dest, lease); err != nil {
			return err
		}
		done, err := s.applyItemMove(ctx, r, d, dest, lease, answer)
		if done || err != nil {
			return err
		}
		// Moved or deleted since we read it: check again against where it is now.
		fresh, err := s.store.Items(ctx, r.deploymentID, []int64{d.ID}, 0)
		if err != nil {
			return err
		}
		nd := fresh[d.ID]
		if nd == nil || nd.Type != d.Type {
			return notFound(d.Type, d.ID)
		}
		*d = *nd
		delete(answer.read, d.ID) // a head again
	}
	return errs.Unavailablef("%s %d kept changing during the move; retry", d.Type.lower(), d.ID)
}

// checkItemMove decides whether the caller may move the workbook or report d (its
// folder's chain and dest's loaded) into dest.
func (r *request) checkItemMove(d *Item, dest int64, lease *destLease) error {
	p, t := r.p, r.tree
	if f := checkDestination(t, dest, lease.gone); f != nil {
		return f
	}
	if t.itemLevel(p, d.CreatedBy, d.Parent) < LevelEdit {
		return errs.Forbiddenf("you need edit access to %s %d to move it", d.Type.lower(), d.ID)
	}
	if f := checkDestinationAccess(t, p, dest); f != nil {
		return f
	}
	// No item becomes invisible to its creator through someone else's move: that needs
	// manage on the item, not just edit.
	if d.Parent != dest && d.CreatedBy != p.User.ID && !r.creatorCanView(d.CreatedBy, dest) && t.itemLevel(p, d.CreatedBy, d.Parent) < LevelManage {
		return errs.Forbiddenf("moving %s %d into folder %d would hide it from its creator (user %d cannot view that folder); that needs manage access to the %s",
			d.Type.lower(), d.ID, dest, d.CreatedBy, d.Type.lower())
	}
	return nil
}

// applyItemMove admits the allowed item to the answer by its size and moves it if it is
// still where the check saw it (done false: it is not, check again). An item whose size
// the store does not know (written before sizes were kept) is read in full to learn it.
func (s *service) applyItemMove(ctx context.Context, r *request, d *Item, dest int64, lease *destLease, answer *moveAnswer) (bool, error) {
	if d.Bytes < 0 {
		full, err := s.store.Items(ctx, r.deploymentID, []int64{d.ID}, AllParts)
		if err != nil {
			return false, err
		}
		fd := full[d.ID]
		if fd == nil || fd.Type != d.Type || fd.Parent != d.Parent {
			return false, nil
		}
		*d = *fd
		d.Bytes, answer.read[d.ID] = len(d.Meta)+len(d.CalculatedFields)+jsonBytes(d.Draft)+jsonBytes(d.Published), true
	}
	if err := answer.admit(d, d.Bytes); err != nil {
		return false, err
	}
	if d.Parent != dest { // else already there: answered as moved
		if err := lease.take(ctx); err != nil {
			return false, err
		}
		if lease.gone {
			return false, notFound(TypeFolder, dest)
		}
		now := s.now()
		ok, err := s.store.MoveItem(ctx, r.deploymentID, d.ID, d.Parent, dest, r.p.User.ID, now)
		if err != nil || !ok {
			return false, err
		}
		d.Parent, d.UpdatedAt, d.UpdatedBy = dest, now, r.p.User.ID
	}
	answer.used += d.Bytes
	return true, nil
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
