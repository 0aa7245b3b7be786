package embed

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/httpx"
)

// listBatch is how many entries a filtered listing reads per round trip.
const listBatch = 200

// scanned is a page of a listing read in batches: the entries kept, the last entry
// examined, and whether more may follow (another kept entry was seen, or the scan
// stopped at its cap).
type scanned[T any] struct {
	items []T
	last  *T
	more  bool
}

// scanPage reads batches (read: the entries after the one given, nil for the start,
// in the listing's order) and keeps what keep accepts, until it holds first entries and
// has seen one more, the entries run out, or maxScan were read and examined: so a filter that
// matches few of many entries never makes one request read without bound (the page may
// then hold fewer than first; the client goes on from the cursor, the last entry
// examined).
func scanPage[T any](first, batch, maxScan int, read func(after *T, limit int) ([]T, error), keep func([]T) ([]bool, error)) (scanned[T], error) {
	var out scanned[T]
	examined := 0
	for {
		limit := min(batch, maxScan-examined)
		got, err := read(out.last, limit)
		if err != nil {
			return scanned[T]{}, err
		}
		kept, err := keep(got)
		if err != nil {
			return scanned[T]{}, err
		}
		for i := range got {
			if kept[i] {
				if len(out.items) == first {
					out.more = true
					return out, nil
				}
				out.items = append(out.items, got[i])
			}
			examined++
			out.last = &got[i]
		}
		if len(got) < limit {
			return out, nil
		}
		if examined >= maxScan {
			out.more = true
			return out, nil
		}
	}
}

// cursorEntry is the entry a page's endCursor names: its last item, or the last entry
// examined when the scan stopped short of a full page; nil for an empty last page.
func (p scanned[T]) cursorEntry(first int) *T {
	switch {
	case len(p.items) > 0 && (!p.more || len(p.items) == first):
		return &p.items[len(p.items)-1]
	case p.more:
		return p.last
	}
	return nil
}

// keeps reports whether record r matches q's filters that the record knows (the state
// only as far as its times tell; Redis tells the rest).
func (q SessionQuery) keeps(r SessionRecord, now time.Time) bool {
	switch {
	case q.ID != "" && r.ID != q.ID, q.DeploymentID > 0 && r.DeploymentID != q.DeploymentID, q.Tenant != "" && r.Tenant != q.Tenant:
		return false
	case q.Deployments != nil && !slices.Contains(q.Deployments, r.DeploymentID):
		return false
	case q.ExternalID != "" && (r.User.Kind != "external" || r.User.ExternalID == nil || *r.User.ExternalID != q.ExternalID):
		return false
	case q.InternalID != "" && (r.User.Kind != "internal" || r.User.Username == nil || *r.User.Username != q.InternalID):
		return false
	case (q.State == StateActive || q.State == StateRevoked) && !r.ExpiresAt.After(now):
		return false
	case q.State == StatePending && !r.PendingUntil.After(now):
		return false
	}
	return true
}

// filtered reports whether q keeps fewer records than the account has.
func (q SessionQuery) filtered() bool {
	return q.DeploymentID > 0 || q.Deployments != nil || q.Tenant != "" || q.ExternalID != "" || q.InternalID != "" || q.State != ""
}

// listSessions reads a page of the account's sessions matching q, newest first, each
// with its state from Redis; a filtered page examines at most the ListScan limit.
func (s *service) listSessions(ctx context.Context, accountID int64, q SessionQuery) (httpx.Page[SessionView], error) {
	now := s.now().UTC()
	batch := listBatch
	if !q.filtered() {
		batch = q.First + 1
	}
	views := map[string]SessionView{}
	read := func(after *SessionRecord, limit int) ([]SessionRecord, error) {
		from := q.After
		if after != nil {
			from = SessionCursor{CreatedAt: after.CreatedAt, ID: after.ID}
		}
		return s.d.Records.ListSessionRecords(ctx, accountID, q.ID, from, now, limit)
	}
	keep := func(recs []SessionRecord) ([]bool, error) {
		kept := make([]bool, len(recs))
		var sids []string
		for i, r := range recs {
			if kept[i] = q.keeps(r, now); kept[i] {
				sids = append(sids, r.SID)
			}
		}
		states, err := s.d.Sessions.LiveStates(ctx, sids)
		if err != nil {
			return nil, err
		}
		for i, r := range recs {
			if !kept[i] {
				continue
			}
			v := sessionView(r, states[0], now)
			states = states[1:]
			kept[i] = q.State == "" || v.State == q.State
			views[r.ID] = v
		}
		return kept, nil
	}
	sp, err := scanPage(q.First, batch, s.limits.ListScan, read, keep)
	if err != nil {
		return httpx.Page[SessionView]{}, storeErr(err)
	}
	items := make([]SessionView, 0, len(sp.items))
	for _, r := range sp.items {
		items = append(items, views[r.ID])
	}
	var end *SessionCursor
	if e := sp.cursorEntry(q.First); e != nil {
		end = &SessionCursor{CreatedAt: e.CreatedAt, ID: e.ID}
	}
	return httpx.PageEndingAt(items, sp.more, end), nil
}

// listTenantUsers reads a page of the tenant's users by id whose external id starts
// with prefix and, unless deployments is nil, whose every session was in one of them; it
// examines at most the ListScan limit.
func (s *service) listTenantUsers(ctx context.Context, accountID int64, tenant, prefix string, deployments []int64, first int, after int64) (httpx.Page[UserSummary], error) {
	batch := listBatch
	if prefix == "" && deployments == nil {
		batch = first + 1
	}
	read := func(last *ExternalUser, limit int) ([]ExternalUser, error) {
		from := after
		if last != nil {
			from = last.ID
		}
		return s.d.Users.ListTenantUsers(ctx, accountID, tenant, from, limit)
	}
	r := reach{deployments: deployments}
	keep := func(users []ExternalUser) ([]bool, error) {
		kept := make([]bool, len(users))
		for i, u := range users {
			kept[i] = strings.HasPrefix(u.ExternalID, prefix) && r.coversUser(u.Deployments)
		}
		return kept, nil
	}
	sp, err := scanPage(first, batch, s.limits.ListScan, read, keep)
	if err != nil {
		return httpx.Page[UserSummary]{}, storeErr(err)
	}
	items := make([]UserSummary, 0, len(sp.items))
	for _, u := range sp.items {
		items = append(items, userSummary(u))
	}
	var end *int64
	if e := sp.cursorEntry(first); e != nil {
		end = &e.ID
	}
	return httpx.PageEndingAt(items, sp.more, end), nil
}
