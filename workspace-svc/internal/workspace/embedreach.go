package workspace

import (
	"context"
	"time"

	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// The dashboard reach answers embed-svc's dry-run mint: which published dashboards a
// viewer it describes would open, and through which grant, by the rules of the viewer's
// listing (EmbedDashboards) with the groups the request names. An answer lists at most
// contract.MaxReachDashboards and costs at most reachScanFactor listing pages of workbooks
// examined and reachTimeBudget: past either it is Truncated, as when the viewer would
// open more than it lists.
//
// The request's account is not checked against the deployment's here: workspace-svc
// knows a deployment only by its id. The asker, embed-svc, has looked the deployment up
// in the identity store (the gateway's lookup) and found it the account's before it asks,
// and only embed-svc's NATS user may publish the reach's subject.
const (
	reachScanFactor = 10
	reachTimeBudget = time.Second
)

// NewReach returns the reach's handler over p (contract.ServeReach serves it).
func NewReach(p Ports, o Options) func(ctx context.Context, req contract.ReachRequest) (contract.ReachReply, error) {
	s := NewService(p, o).(*service)
	return s.reach
}

func (s *service) reach(ctx context.Context, req contract.ReachRequest) (contract.ReachReply, error) {
	if !req.Valid() {
		return contract.ReachReply{}, errs.Invalidf("request must name accountId and deploymentId, at most 1000 groups per catalog and at most 50 resources")
	}
	internal := req.InternalUserID > 0
	if internal && !identity.ValidRole(req.InternalRole) {
		return contract.ReachReply{}, errs.Invalidf("an internal user's internalRole must be one of viewer, ai_bi_user, developer, admin, not %q", req.InternalRole)
	}
	p := &identity.Principal{Credential: identity.CredentialEmbed, Account: identity.Account{ID: req.AccountID}}
	if internal {
		p.User = &identity.User{ID: req.InternalUserID, Role: req.InternalRole}
	}
	j := s.newJudge(p, req.DeploymentID, internal,
		embedaccess.Viewer{Tenant: req.EmbedTenantName, AccountGroups: req.AccountGroups, TenantGroups: req.TenantGroups})
	out := contract.ReachReply{Dashboards: []contract.ReachDashboard{}}
	// add lists d when the viewer opens it, and reports whether the answer is full.
	add := func(d *Item) bool {
		dec := j.decide(d)
		if !dec.Allowed() {
			return false
		}
		if len(out.Dashboards) == contract.MaxReachDashboards {
			out.Truncated = true
			return true
		}
		out.Dashboards = append(out.Dashboards, reachDashboard(d, dec))
		return false
	}
	if req.Resources != nil {
		heads, err := s.narrowedHeads(ctx, req.DeploymentID, publicIDs(*req.Resources))
		if err != nil {
			return contract.ReachReply{}, err
		}
		if err := j.load(ctx, heads); err != nil {
			return contract.ReachReply{}, err
		}
		for _, d := range heads {
			if add(d) {
				break
			}
		}
		return out, nil
	}
	deadline := time.Now().Add(reachTimeBudget)
	batchSize, budget := s.limits.ListScan, reachScanFactor*s.limits.ListScan
	var afterID int64
	for scanned := 0; ; {
		if scanned >= budget || time.Now().After(deadline) {
			out.Truncated = true
			return out, nil
		}
		batch, err := s.store.EmbeddableWorkbooks(ctx, req.DeploymentID, afterID, min(batchSize, budget-scanned))
		if err != nil {
			return contract.ReachReply{}, err
		}
		if err := j.load(ctx, batch); err != nil {
			return contract.ReachReply{}, err
		}
		for _, d := range batch {
			if d.Embeddable && d.PublicID != "" && add(d) {
				return out, nil
			}
		}
		if len(batch) < min(batchSize, budget-scanned) {
			return out, nil
		}
		scanned += len(batch)
		afterID = batch[len(batch)-1].ID
	}
}

// reachDashboard is the reach's entry of workbook d, opened by dec.
func reachDashboard(d *Item, dec embedaccess.Decision) contract.ReachDashboard {
	out := contract.ReachDashboard{PublicID: d.PublicID, WorkbookID: d.ID, Title: d.PublishedTitle, AccessSource: dec.Source,
		Subject: dec.Subject, ViaRoot: dec.ViaRoot}
	if dec.ViaFolderID != 0 {
		id := dec.ViaFolderID
		out.ViaFolderID = &id
	}
	return out
}
