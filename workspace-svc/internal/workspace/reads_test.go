package workspace_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// readLog is the fixture's store noting every Items read: which ids, with which parts.
type readLog struct {
	workspace.Store
	mu    sync.Mutex
	reads []itemRead
}

type itemRead struct {
	ids   []int64
	parts workspace.Parts
}

func (l *readLog) Items(ctx context.Context, dep int64, ids []int64, parts workspace.Parts) (map[int64]*workspace.Item, error) {
	l.mu.Lock()
	l.reads = append(l.reads, itemRead{ids: slices.Clone(ids), parts: parts})
	l.mu.Unlock()
	return l.Store.Items(ctx, dep, ids, parts)
}

// reset forgets the reads so far.
func (l *readLog) reset() {
	l.mu.Lock()
	l.reads = nil
	l.mu.Unlock()
}

// itemReads is how many Items reads there were.
func (l *readLog) itemReads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reads)
}

// contentRead is the ids read with any of their large parts, sorted, each once.
func (l *readLog) contentRead() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, r := range l.reads {
		if r.parts != 0 {
			for _, id := range r.ids {
				if !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// logged is a fixture whose service reads through a readLog, with limits.
func logged(t *testing.T, limits workspace.Limits) (*fixture, *readLog) {
	f := newFixture(t)
	log := &readLog{Store: f.store}
	f.svc = workspace.NewService(workspace.Ports{Store: log}, workspace.Options{Limits: limits})
	return f, log
}

// bigItem creates a workbook or report of p's with a meta of about n bytes.
func (f *fixture) bigItem(p *identity.Principal, typ workspace.ItemType, name string, folder int64, n int) int64 {
	f.t.Helper()
	meta := json.RawMessage(`{"blob":"` + strings.Repeat("m", n) + `"}`)
	w, err := f.svc.CreateItem(f.ctx, p, f.dep, typ, workspace.CreateItemInput{Name: name, FolderID: folder, Meta: meta, CalculatedFields: meta})
	if err != nil {
		f.t.Fatalf("create %s %q: %v", typ, name, err)
	}
	return w.ID
}

// TestViewerBulkMoveReadsNoItem: a viewer can move nothing, so its bulk move of 100 items
// is refused item by item (403) before any item is read from the store.
func TestViewerBulkMoveReadsNoItem(t *testing.T) {
	f, log := logged(t, workspace.Limits{})
	private := f.folder(admin, "private", 0)
	var refs []workspace.ItemRef
	for i := range workspace.MaxBulkItems {
		refs = append(refs, ref(workspace.TypeWorkbook, f.bigItem(admin, workspace.TypeWorkbook, fmt.Sprint("wb", i), private, 4000)))
	}
	log.reset()
	res := f.bulk(viewer, 0, refs...)
	if len(res.Moved) != 0 || len(res.Failed) != len(refs) {
		t.Fatalf("moved %d, failed %d, want every item refused", len(res.Moved), len(res.Failed))
	}
	for _, fl := range res.Failed {
		if fl.Err.Kind != errs.Forbidden || !strings.Contains(fl.Err.Message, "ai_bi_user") {
			t.Fatalf("failed entry %+v, want 403 naming the role a move needs", fl)
		}
	}
	if n := log.itemReads(); n != 0 {
		t.Fatalf("the viewer's bulk move read items %d times, want none: %+v", n, log.reads)
	}
}

// TestBulkMoveReadsOnlyTheHeadsOfItemsItMayNotMove: an ai_bi_user bulk-moving another
// user's private workbooks and its own reads the refused ones' heads only; the content of
// the one it may move is read, and answered.
func TestBulkMoveReadsOnlyTheHeadsOfItemsItMayNotMove(t *testing.T) {
	f, log := logged(t, workspace.Limits{})
	private := f.folder(admin, "private", 0)
	dest := f.folder(ai, "dest", 0)
	var refs []workspace.ItemRef
	for i := range 99 {
		refs = append(refs, ref(workspace.TypeWorkbook, f.bigItem(admin, workspace.TypeWorkbook, fmt.Sprint("theirs", i), private, 4000)))
	}
	own := f.bigItem(ai, workspace.TypeReport, "own", 0, 4000)
	refs = append(refs, ref(workspace.TypeReport, own))
	log.reset()
	res := f.bulk(ai, dest, refs...)
	if !slices.Equal(movedIDs(res), []int64{own}) || len(res.Failed) != 99 {
		t.Fatalf("moved %v, %d failed; want only the own report moved", movedIDs(res), len(res.Failed))
	}
	if got := log.contentRead(); !slices.Equal(got, []int64{own}) {
		t.Fatalf("content read of %v, want only the moved report %d", got, own)
	}
	if m := res.Moved[0]; !strings.Contains(string(m.Meta), "mmmm") || !strings.Contains(string(m.CalculatedFields), "mmmm") {
		t.Fatalf("the moved report is answered without its content: %+v", m)
	}
}

// TestBulkMoveAnswerStaysWithinItsLimit: the moved workbooks and reports one bulk move
// answers with are bounded by MoveAnswerBytes; an item past it is not moved (413), and the
// first item always fits.
func TestBulkMoveAnswerStaysWithinItsLimit(t *testing.T) {
	f, _ := logged(t, workspace.Limits{MoveAnswerBytes: 9000})
	dest := f.folder(admin, "dest", 0)
	var refs []workspace.ItemRef
	for i := range 3 {
		refs = append(refs, ref(workspace.TypeWorkbook, f.bigItem(admin, workspace.TypeWorkbook, fmt.Sprint("wb", i), 0, 2000)))
	}
	res := f.bulk(admin, dest, refs...)
	if !slices.Equal(movedIDs(res), []int64{refs[0].ID, refs[1].ID}) || len(res.Failed) != 1 || res.Failed[0].Ref != refs[2] {
		t.Fatalf("moved %v, failed %+v; want two items (about 8 KB) moved and the third refused", movedIDs(res), res.Failed)
	}
	if e := res.Failed[0].Err; e.Kind != errs.TooLarge || !strings.Contains(e.Message, "bytes of moved items and it holds") || !strings.Contains(e.Message, "over the limit of") || strings.Contains(e.Message, "WORKSPACE_") {
		t.Fatalf("failed entry %+v, want 413 naming the limit", e)
	}
	if got := f.parentOf(workspace.TypeWorkbook, refs[2].ID); got != 0 {
		t.Fatalf("the refused item moved to %d", got)
	}
	huge := f.bigItem(admin, workspace.TypeWorkbook, "huge", 0, 6000) // 12 KB: over the limit alone
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeWorkbook, huge), dest); err != nil {
		t.Fatalf("a single move of an item larger than the limit: %v", err)
	}
}

// unsized is a store that does not know its items' sizes (items written before sizes
// were kept).
type unsized struct{ *readLog }

func (u unsized) Items(ctx context.Context, dep int64, ids []int64, parts workspace.Parts) (map[int64]*workspace.Item, error) {
	got, err := u.readLog.Items(ctx, dep, ids, parts)
	for _, it := range got {
		it.Bytes = -1
	}
	return got, err
}

// TestBulkMoveReadsItemsOfUnknownSizeToBoundItsAnswer: an item whose size the store does
// not know is read in full before its move, and the answer's limit holds all the same.
func TestBulkMoveReadsItemsOfUnknownSizeToBoundItsAnswer(t *testing.T) {
	f, log := logged(t, workspace.Limits{MoveAnswerBytes: 9000})
	f.svc = workspace.NewService(workspace.Ports{Store: unsized{log}}, workspace.Options{Limits: workspace.Limits{MoveAnswerBytes: 9000}})
	dest := f.folder(admin, "dest", 0)
	var refs []workspace.ItemRef
	for i := range 3 {
		refs = append(refs, ref(workspace.TypeWorkbook, f.bigItem(admin, workspace.TypeWorkbook, fmt.Sprint("wb", i), 0, 2000)))
	}
	res := f.bulk(admin, dest, refs...)
	if !slices.Equal(movedIDs(res), []int64{refs[0].ID, refs[1].ID}) || len(res.Failed) != 1 || res.Failed[0].Err.Kind != errs.TooLarge {
		t.Fatalf("moved %v, failed %+v; want two moved and the third refused for the answer's size", movedIDs(res), res.Failed)
	}
	for _, m := range res.Moved {
		if !strings.Contains(string(m.Meta), "mmmm") {
			t.Fatalf("a moved item answered without its content: %+v", m)
		}
	}
}

// TestPublishReadsTheContentOfViewableReportsOnly: a publish decides access to the
// reports its widgets name on their heads; a report the publisher cannot view is never
// read in full.
func TestPublishReadsTheContentOfViewableReportsOnly(t *testing.T) {
	f, log := logged(t, workspace.Limits{})
	private := f.folder(admin, "private", 0)
	secret := f.bigItem(admin, workspace.TypeReport, "secret", private, 4000)
	own := f.bigItem(ai, workspace.TypeReport, "own", 0, 100)
	wb, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "board", DashboardDraft: draftNaming(secret, own)})
	if err != nil {
		t.Fatal(err)
	}
	log.reset()
	w, err := f.svc.Publish(f.ctx, ai, f.dep, wb.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := w.PublishedDashboard.ReportSnapshots; len(s) != 1 || s[0].ReportID != own {
		t.Fatalf("snapshots %+v, want only the own report", s)
	}
	if got, want := log.contentRead(), []int64{min(wb.ID, own), max(wb.ID, own)}; !slices.Equal(got, want) {
		t.Fatalf("content read of %v, want the workbook %d and the own report %d only", got, wb.ID, own)
	}
}

// TestPublishStopsReadingReportsOnceTheDashboardIsFull: the published dashboard's size is
// checked while the reports' meta is read, so a draft naming many large reports is
// refused (413) after reading about the limit's worth of them, not all of them.
func TestPublishStopsReadingReportsOnceTheDashboardIsFull(t *testing.T) {
	f, log := logged(t, workspace.Limits{PublishedBytes: 6000, MetaBytes: 2100, CalculatedFieldsBytes: 2100})
	var reports []int64
	for i := range 20 {
		reports = append(reports, f.bigItem(ai, workspace.TypeReport, fmt.Sprint("r", i), 0, 2000))
	}
	wb, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "board", DashboardDraft: draftNaming(reports...)})
	if err != nil {
		t.Fatal(err)
	}
	log.reset()
	_, err = f.svc.Publish(f.ctx, ai, f.dep, wb.ID, nil)
	if e := wantErr(t, err, errs.TooLarge, ""); !strings.Contains(e.Message, "over the limit of") || strings.Contains(e.Message, "WORKSPACE_") {
		t.Fatalf("message %q", e.Message)
	}
	if n := len(log.contentRead()) - 1; n > 4 { // the workbook, then the reports
		t.Fatalf("the publish read %d of the 20 reports in full before refusing, want at most 4 (6000 bytes of 2000-byte metas)", n)
	}
}

// TestDraftNamingTooManyReportsIsRefused: a draft names at most DashboardReports distinct
// reports (400 naming the limit), when it is stored and, for a draft stored before the
// limit, when it is published.
func TestDraftNamingTooManyReportsIsRefused(t *testing.T) {
	f := newFixture(t)
	draft := draftNaming(11, 12, 13, 12, 11) // three distinct reports
	wb, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "board", DashboardDraft: draft})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{DashboardReports: 2}})
	_, err = f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "b2", DashboardDraft: draft})
	if e := wantErr(t, err, errs.Invalid, ""); !strings.Contains(e.Message, "over the limit of 2") || !strings.Contains(e.Message, "3 distinct") || strings.Contains(e.Message, "WORKSPACE_") {
		t.Fatalf("create: %q", e.Message)
	}
	_, err = f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb.ID, workspace.UpdateItemInput{DashboardDraft: draft})
	wantErr(t, err, errs.Invalid, "")
	_, err = f.svc.Publish(f.ctx, ai, f.dep, wb.ID, nil)
	if e := wantErr(t, err, errs.Invalid, ""); !strings.Contains(e.Message, "over the limit of 2") || strings.Contains(e.Message, "WORKSPACE_") {
		t.Fatalf("publish: %q", e.Message)
	}
	if _, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb.ID, workspace.UpdateItemInput{DashboardDraft: draftNaming(11, 12, 11)}); err != nil {
		t.Fatalf("two distinct reports: %v", err)
	}
}

// TestAccessChecksReadNoContent: the routes that check access to one item decide it on
// the item's head; only a route that answers with the item reads it in full, and only
// once access is granted.
func TestAccessChecksReadNoContent(t *testing.T) {
	f, log := logged(t, workspace.Limits{})
	private := f.folder(admin, "private", 0)
	theirs := f.bigItem(admin, workspace.TypeWorkbook, "theirs", private, 4000)
	own := f.bigItem(ai, workspace.TypeWorkbook, "own", 0, 4000)
	newName := "renamed"
	for _, c := range []struct {
		name    string
		call    func() error
		content []int64 // read in full
	}{
		{"get-refused", func() error {
			_, err := f.svc.GetItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, theirs)
			return wantForbidden(err)
		}, nil},
		{"get-allowed", func() error {
			_, err := f.svc.GetItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, own)
			return err
		}, []int64{own}},
		{"update-refused", func() error {
			_, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, theirs, workspace.UpdateItemInput{Name: &newName})
			return wantForbidden(err)
		}, nil},
		{"favorite", func() error { return f.svc.SetFavorite(f.ctx, ai, f.dep, ref(workspace.TypeWorkbook, own), true) }, nil},
		{"favorite-refused", func() error {
			return wantForbidden(f.svc.SetFavorite(f.ctx, ai, f.dep, ref(workspace.TypeWorkbook, theirs), true))
		}, nil},
		{"publish-refused", func() error {
			_, err := f.svc.Publish(f.ctx, ai, f.dep, theirs, nil)
			return wantForbidden(err)
		}, nil},
		{"delete-refused", func() error { return wantForbidden(f.svc.DeleteItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, theirs)) }, nil},
		{"delete", func() error { return f.svc.DeleteItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, own) }, nil},
	} {
		log.reset()
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := log.contentRead(); !slices.Equal(got, c.content) {
			t.Fatalf("%s read the content of %v, want %v", c.name, got, c.content)
		}
	}
}

// wantForbidden is nil for a 403, else an error saying what err was.
func wantForbidden(err error) error {
	if e, ok := errs.As(err); ok && e.Kind == errs.Forbidden {
		return nil
	}
	return fmt.Errorf("want 403, got %v", err)
}

// childrenLog counts the Children batches a listing reads and the children they hold.
type childrenLog struct {
	workspace.Store
	mu               sync.Mutex
	batches, scanned int
}

func (l *childrenLog) Children(ctx context.Context, dep int64, q workspace.ChildrenQuery) ([]*workspace.Item, error) {
	got, err := l.Store.Children(ctx, dep, q)
	l.mu.Lock()
	l.batches++
	l.scanned += len(got)
	l.mu.Unlock()
	return got, err
}

// TestListEndsAtTheScanLimitWithACursorThatGoesOn: a viewer's root listing over many
// folders it cannot view examines at most ListScan children per page, in a bounded number
// of batches, and answers the page so far with a cursor that names none of them; following
// the cursors lists exactly what the viewer can view, in order, each once.
func TestListEndsAtTheScanLimitWithACursorThatGoesOn(t *testing.T) {
	f := newFixture(t)
	log := &childrenLog{Store: f.store}
	f.svc = workspace.NewService(workspace.Ports{Store: log}, workspace.Options{Limits: workspace.Limits{ListScan: 100}})
	var want []int64
	for i := range 450 {
		pos := float64(i)
		fo, err := f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: fmt.Sprintf("private-%03d", i), Position: &pos})
		if err != nil {
			t.Fatal(err)
		}
		if i == 120 || i == 333 {
			f.grant(fo.ID, workspace.Grant{UserID: viewer.User.ID, Level: "view"})
			want = append(want, fo.ID)
		}
	}
	want = append(want, f.item(admin, workspace.TypeWorkbook, "at the root", 0)) // a root item: every viewer sees it
	var got []int64
	after, pages := "", 0
	for ; pages < 20; pages++ {
		log.batches, log.scanned = 0, 0
		page, err := f.svc.List(f.ctx, viewer, f.dep, 0, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		if log.scanned > 100+2 || log.batches > 3 {
			t.Fatalf("page %d examined %d children in %d batches, want at most the scan limit (100) in a few batches", pages, log.scanned, log.batches)
		}
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		if !page.PageInfo.HasNextPage {
			break
		}
		if page.PageInfo.EndCursor == nil {
			t.Fatalf("page %d: more to come without a cursor", pages)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(*page.PageInfo.EndCursor)
		if strings.Contains(string(raw), "private") {
			t.Fatalf("page %d's cursor names a folder the viewer cannot view: %s", pages, raw)
		}
		after = *page.PageInfo.EndCursor
	}
	if !slices.Equal(got, want) || pages < 4 {
		t.Fatalf("pages (%d) listed %v, want %v", pages+1, got, want)
	}
}
