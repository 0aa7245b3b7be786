package workspace

import (
	"context"
	"errors"
	"slices"

	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// The embed viewer's read path: the published dashboards an embed session may open,
// decided on every request from the grants and memberships as they are now (nothing is
// cached, so a grant removed, a membership removed or a folder moved out of reach is
// seen by the next request on every replica). An external viewer is decided by the embed
// grants along the walk from the workbook up to the root (embedaccess.Decide), with the
// groups embed-svc says they are a member of now; an internal user by their own role and
// folder grants, as everywhere else in the workspace. Either way the dashboard must be
// published with allowEmbed, and a session narrowed to some dashboards (resources) opens
// only those among what it may open.

// embedDashboardNotFound is the one answer for every dashboard the session may not open
// (no such public id, another deployment's, not published with allowEmbed, no grant,
// excluded by the session's resources): the same status, code and message whatever the
// reason, so the answer tells the viewer nothing but that they cannot open it.
func embedDashboardNotFound(publicID string) *errs.Error {
	return errs.New(errs.NotFound, "dashboard %s not found", publicID)
}

// viewerUnavailable is the answer when embed-svc cannot say which groups the viewer is a
// member of: a 503, never a 404 (nor a dashboard opened without the groups).
func viewerUnavailable(err error) error {
	return errors.Join(errs.Unavailablef("the embed viewer's groups cannot be looked up now; retry shortly"), err)
}

// embedSession is what the read path keeps of an embed session.
type embedSession struct {
	p            *identity.Principal
	deploymentID int64
	internal     bool // an internal user: their own access decides, not embed grants
	// narrowed: the session opens only the dashboards of resources (its well-formed,
	// distinct public ids; none when every id was malformed).
	narrowed  bool
	resources []string
}

// embedSessionOf checks that p is an embed session's and reads what the read path needs
// of it; any other credential is refused, as the workspace refuses a credential it does
// not serve.
func embedSessionOf(p *identity.Principal) (*embedSession, error) {
	if p == nil || p.Credential != identity.CredentialEmbed || p.Embed == nil || p.Embed.DeploymentID <= 0 || p.Account.ID <= 0 {
		return nil, errs.Forbiddenf("the embed dashboards need an embed session token")
	}
	e := p.Embed
	if e.Internal && p.User == nil || !e.Internal && e.Subject == "" {
		return nil, errs.Forbiddenf("the embed dashboards need an embed session token")
	}
	sess := &embedSession{p: p, deploymentID: e.DeploymentID, internal: e.Internal}
	if e.Resources != nil {
		sess.narrowed, sess.resources = true, publicIDs(e.Resources.Dashboards)
	}
	return sess, nil
}

// publicIDs is ids without the malformed ones and without repeats.
func publicIDs(ids []string) []string {
	out := []string{}
	for _, id := range ids {
		if contract.ValidDashboardPublicID(id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// admits reports whether the session's narrowing lets it open publicID.
func (sess *embedSession) admits(publicID string) bool {
	return !sess.narrowed || slices.Contains(sess.resources, publicID)
}

// lookupViewer starts asking embed-svc for the session's viewer's current groups; the
// function it returns waits for the answer. An internal user, and every viewer when the
// service has no lookup, has no groups. The lookup runs beside the request's store
// reads and ends with ctx.
func (s *service) lookupViewer(ctx context.Context, sess *embedSession) func() (embedaccess.Viewer, error) {
	v := embedaccess.Viewer{Tenant: sess.p.Embed.Tenant}
	if sess.internal || s.viewers == nil {
		return func() (embedaccess.Viewer, error) { return v, nil }
	}
	req := contract.ViewerRequest{AccountID: sess.p.Account.ID, EmbedTenantName: sess.p.Embed.Tenant, ExternalID: sess.p.Embed.Subject}
	done := make(chan struct{})
	var reply contract.ViewerReply
	var err error
	go func() {
		defer close(done)
		reply, err = s.viewers.Groups(ctx, req)
	}()
	return func() (embedaccess.Viewer, error) {
		<-done
		if err != nil {
			return v, viewerUnavailable(err)
		}
		v.AccountGroups, v.TenantGroups = reply.AccountGroups, reply.TenantGroups
		return v, nil
	}
}

// embedJudge decides which workbooks of one deployment a viewer may open. It reads what
// a decision needs for a batch of workbooks at once: their folders and the folders'
// ancestors (two reads, however deep), and the root's grants (once), so what a page
// costs does not follow the number of grants or the depth of the tree.
type embedJudge struct {
	r        *request
	internal bool
	viewer   embedaccess.Viewer
	root     embedaccess.Grants
	rootRead bool
}

func (s *service) newJudge(p *identity.Principal, deploymentID int64, internal bool, v embedaccess.Viewer) *embedJudge {
	return &embedJudge{r: &request{s: s, p: p, deploymentID: deploymentID, tree: newTree()}, internal: internal, viewer: v}
}

// load reads what deciding docs needs and the judge has not read yet.
func (j *embedJudge) load(ctx context.Context, docs []*Item) error {
	if len(docs) == 0 {
		return nil
	}
	var parents []int64
	for _, d := range docs {
		if d.Parent != 0 && j.r.tree.folders[d.Parent] == nil && !slices.Contains(parents, d.Parent) {
			parents = append(parents, d.Parent)
		}
	}
	if len(parents) > 0 {
		if err := j.r.need(ctx, parents...); err != nil {
			return err
		}
	}
	if !j.internal && !j.rootRead {
		g, err := j.r.s.store.RootEmbedAccess(ctx, j.r.deploymentID)
		if err != nil {
			return err
		}
		j.root, j.rootRead = g, true
	}
	return nil
}

// userDecision is an internal user's own access to a dashboard.
var userDecision = embedaccess.Decision{Access: embedaccess.Read, Source: embedaccess.SourceUser, Subject: embedaccess.Subject{Type: embedaccess.SourceUser}}

// decide is the viewer's access to workbook d, whose folders load has read. A workbook
// whose folder chain is not there whole (its folder gone) is opened by nobody.
func (j *embedJudge) decide(d *Item) embedaccess.Decision {
	t := j.r.tree
	if d.Parent != 0 && !t.complete(d.Parent) {
		return embedaccess.Decision{}
	}
	if j.internal {
		if t.itemLevel(j.r.p, d.CreatedBy, d.Parent) >= LevelView {
			return userDecision
		}
		return embedaccess.Decision{}
	}
	folders := t.chain(d.Parent) // nearest first, each one level above the one before (complete)
	chain := make([]embedaccess.Level, 0, len(folders)+2)
	chain = append(chain, embedaccess.Level{Grants: d.EmbedAccess})
	for _, n := range folders {
		chain = append(chain, embedaccess.Level{Grants: n.EmbedAccess, FolderID: n.ID})
	}
	chain = append(chain, embedaccess.Level{Grants: j.root, Root: true})
	return embedaccess.Decide(j.viewer, chain)
}

// openable reports whether a published dashboard is one an embed session can open at
// all: published (not archived) with allowEmbed.
func openable(d *Dashboard) bool {
	return d != nil && d.Status == StatusPublished && d.AllowEmbed
}

// EmbedDashboard returns one published dashboard the embed session may open, without
// what a viewer must not see. Its cost is fixed: the workbook by its public id, its folder
// and the folder's ancestors, the root's grants and the viewer's groups (beside them).
func (s *service) EmbedDashboard(ctx context.Context, p *identity.Principal, publicID string) (Dashboard, error) {
	sess, err := embedSessionOf(p)
	if err != nil {
		return Dashboard{}, err
	}
	if !contract.ValidDashboardPublicID(publicID) || !sess.admits(publicID) {
		return Dashboard{}, embedDashboardNotFound(publicID)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	viewer := s.lookupViewer(ctx, sess)
	d, err := s.store.WorkbookByPublicID(ctx, sess.deploymentID, publicID, PartPublished)
	if err != nil {
		return Dashboard{}, err
	}
	// The viewer's groups are waited for whatever the workbook: while they cannot be
	// looked up every id is 503, so a 503 says nothing of which ids exist.
	v, err := viewer()
	if err != nil {
		return Dashboard{}, err
	}
	if d == nil || d.Type != TypeWorkbook || d.PublicID != publicID || !openable(d.Published) {
		return Dashboard{}, embedDashboardNotFound(publicID)
	}
	j := s.newJudge(p, sess.deploymentID, sess.internal, v)
	if err := j.load(ctx, []*Item{d}); err != nil {
		return Dashboard{}, err
	}
	if !j.decide(d).Allowed() {
		return Dashboard{}, embedDashboardNotFound(publicID)
	}
	return viewerDashboard(d.Published), nil
}

// viewerDashboard is a published dashboard as an embed viewer gets it: its reports'
// queries and code, their snapshots' meta and who created and last changed it are null.
func viewerDashboard(pub *Dashboard) Dashboard {
	out := *pub
	out.CreatedBy, out.UpdatedBy = nil, nil
	out.ReportSnapshots = make([]ReportSnapshot, len(pub.ReportSnapshots))
	for i, rs := range pub.ReportSnapshots {
		rs.SQLQuery, rs.PythonCode, rs.Meta = nil, nil, nil
		out.ReportSnapshots[i] = rs
	}
	return out
}

// embedCursor is the workbook id a page of the viewer's listing ended at: its last
// dashboard, or the last workbook it examined when it ended at the scan limit.
type embedCursor struct {
	ID int64 `json:"i"`
}

// embedSummary is the listing's entry of workbook d.
func embedSummary(d *Item, dec embedaccess.Decision) EmbedDashboardSummary {
	return EmbedDashboardSummary{PublicID: d.PublicID, WorkbookID: d.ID, Title: d.PublishedTitle, AccessSource: dec.Source}
}

// EmbedDashboards lists the published dashboards the embed session may open, by workbook
// id. A page examines at most ListScan workbooks (the deployment's embeddable ones, by
// id): when the viewer may open few of many, it ends early with hasNextPage and a cursor
// that goes on after the last one examined. One viewer lookup per page; each batch of
// workbooks reads its folders and their ancestors at once, and the root's grants once.
func (s *service) EmbedDashboards(ctx context.Context, p *identity.Principal, first int, after string) (httpx.Page[EmbedDashboardSummary], error) {
	from, err := httpx.AfterCursor[embedCursor](after)
	if err != nil {
		return httpx.Page[EmbedDashboardSummary]{}, err
	}
	if from != nil && from.ID <= 0 {
		return httpx.Page[EmbedDashboardSummary]{}, httpx.ErrBadCursor
	}
	sess, err := embedSessionOf(p)
	if err != nil {
		return httpx.Page[EmbedDashboardSummary]{}, err
	}
	first = min(max(first, 1), httpx.MaxPage)
	var afterID int64
	if from != nil {
		afterID = from.ID
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	viewer := s.lookupViewer(ctx, sess)
	wait := func() (*embedJudge, error) {
		v, err := viewer()
		if err != nil {
			return nil, err
		}
		return s.newJudge(p, sess.deploymentID, sess.internal, v), nil
	}
	if sess.narrowed {
		return s.narrowedDashboards(ctx, sess, wait, afterID, first)
	}
	var j *embedJudge
	var out []EmbedDashboardSummary
	var lastID int64 // the last workbook examined
	scanned, denied := 0, false
	for {
		// While every workbook is one the viewer opens, a batch is what the page still
		// needs and one more; once one was not, at least minListBatch.
		need := first + 1 - len(out)
		limit := need
		if denied {
			limit = max(need, minListBatch)
		}
		limit = max(1, min(limit, s.limits.ListScan-scanned))
		batch, err := s.store.EmbeddableWorkbooks(ctx, sess.deploymentID, afterID, limit)
		if err != nil {
			return httpx.Page[EmbedDashboardSummary]{}, err
		}
		if j == nil {
			if j, err = wait(); err != nil {
				return httpx.Page[EmbedDashboardSummary]{}, err
			}
		}
		if err := j.load(ctx, batch); err != nil {
			return httpx.Page[EmbedDashboardSummary]{}, err
		}
		for _, d := range batch {
			dec := embedaccess.Decision{}
			if d.Embeddable && d.PublicID != "" {
				dec = j.decide(d)
			}
			if dec.Allowed() && len(out) == first {
				return httpx.PageEndingAt(out, true, &embedCursor{ID: out[len(out)-1].WorkbookID}), nil
			}
			scanned, lastID = scanned+1, d.ID
			if dec.Allowed() {
				out = append(out, embedSummary(d, dec))
			} else {
				denied = true
			}
		}
		if len(batch) < limit {
			return pageOfEmbed(out, false), nil
		}
		if scanned >= s.limits.ListScan {
			return httpx.PageEndingAt(out, true, &embedCursor{ID: lastID}), nil
		}
		afterID = batch[len(batch)-1].ID
	}
}

// pageOfEmbed is a page ending at its last dashboard.
func pageOfEmbed(out []EmbedDashboardSummary, more bool) httpx.Page[EmbedDashboardSummary] {
	if len(out) == 0 {
		return httpx.PageEndingAt[EmbedDashboardSummary, embedCursor](out, more, nil)
	}
	return httpx.PageEndingAt(out, more, &embedCursor{ID: out[len(out)-1].WorkbookID})
}

// narrowedHeads reads the heads of the embeddable workbooks among a narrowed session's
// dashboards, by id: one read by public id each (at most the resources' bound).
func (s *service) narrowedHeads(ctx context.Context, deploymentID int64, ids []string) ([]*Item, error) {
	var out []*Item
	for _, id := range ids {
		d, err := s.store.WorkbookByPublicID(ctx, deploymentID, id, 0)
		if err != nil {
			return nil, err
		}
		if d != nil && d.Type == TypeWorkbook && d.PublicID == id && d.Embeddable {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b *Item) int { return compareIDs(a.ID, b.ID) })
	return out, nil
}

func compareIDs(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// narrowedDashboards is the listing of a narrowed session: its dashboards, those it may
// open, by workbook id after afterID.
func (s *service) narrowedDashboards(ctx context.Context, sess *embedSession, wait func() (*embedJudge, error), afterID int64, first int) (httpx.Page[EmbedDashboardSummary], error) {
	heads, err := s.narrowedHeads(ctx, sess.deploymentID, sess.resources)
	if err != nil {
		return httpx.Page[EmbedDashboardSummary]{}, err
	}
	j, err := wait()
	if err != nil {
		return httpx.Page[EmbedDashboardSummary]{}, err
	}
	heads = slices.DeleteFunc(heads, func(d *Item) bool { return d.ID <= afterID })
	if err := j.load(ctx, heads); err != nil {
		return httpx.Page[EmbedDashboardSummary]{}, err
	}
	var out []EmbedDashboardSummary
	for _, d := range heads {
		dec := j.decide(d)
		if !dec.Allowed() {
			continue
		}
		if len(out) == first {
			return pageOfEmbed(out, true), nil
		}
		out = append(out, embedSummary(d, dec))
	}
	return pageOfEmbed(out, false), nil
}
