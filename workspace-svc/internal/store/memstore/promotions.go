package memstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// promotions are the promotion history (in the order added) and links.
type promotions struct {
	history []workspace.Promotion
	links   map[string]*workspace.PromotionLink
}

func linkID(deploymentID, workbook, target int64) string {
	return fmt.Sprintf("%d:%d:%d", deploymentID, workbook, target)
}

func cloneLink(l *workspace.PromotionLink) *workspace.PromotionLink {
	if l == nil {
		return nil
	}
	return &workspace.PromotionLink{Workbook: l.Workbook, Reports: maps.Clone(l.Reports)}
}

// PromotionLink returns the link of workbook into target.
func (s *Store) PromotionLink(ctx context.Context, deploymentID, workbook, target int64) (*workspace.PromotionLink, error) {
	if err := s.begin(ctx, "PromotionLink"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return cloneLink(s.promo.links[linkID(deploymentID, workbook, target)]), nil
}

// LinkPromotionWorkbook sets the link's workbook to id if it is still was.
func (s *Store) LinkPromotionWorkbook(ctx context.Context, deploymentID, workbook, target, was, id int64) (*workspace.PromotionLink, error) {
	if err := s.begin(ctx, "LinkPromotionWorkbook"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.promo.links == nil {
		s.promo.links = map[string]*workspace.PromotionLink{}
	}
	k := linkID(deploymentID, workbook, target)
	l := s.promo.links[k]
	switch {
	case l == nil && was == 0:
		l = &workspace.PromotionLink{Workbook: id, Reports: map[int64]int64{}}
		s.promo.links[k] = l
	case l != nil && l.Workbook == was:
		l.Workbook = id
	}
	return cloneLink(l), nil
}

// LinkPromotionReport sets the link's target of report to id if it is still was.
func (s *Store) LinkPromotionReport(ctx context.Context, deploymentID, workbook, target, report, was, id int64) (*workspace.PromotionLink, error) {
	if err := s.begin(ctx, "LinkPromotionReport"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	l := s.promo.links[linkID(deploymentID, workbook, target)]
	if l == nil {
		return nil, nil
	}
	if l.Reports[report] == was {
		l.Reports[report] = id
	}
	return cloneLink(l), nil
}

// AddPromotion records a promotion.
func (s *Store) AddPromotion(ctx context.Context, pr *workspace.Promotion) error {
	if err := s.begin(ctx, "AddPromotion"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	c := *pr
	c.Reports = slices.Clone(pr.Reports)
	s.promo.history = append(s.promo.history, c)
	return nil
}

// Promotions returns a workbook's promotions, newest first.
func (s *Store) Promotions(ctx context.Context, deploymentID, workbook int64, after *workspace.PromotionKey, limit int) ([]*workspace.Promotion, error) {
	if err := s.begin(ctx, "Promotions"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*workspace.Promotion
	for i := range s.promo.history {
		pr := s.promo.history[i]
		if pr.DeploymentID != deploymentID || pr.WorkbookID != workbook {
			continue
		}
		if after != nil && !(pr.At.Before(after.At) || (pr.At.Equal(after.At) && pr.ID < after.ID)) {
			continue
		}
		c := pr
		c.Reports = slices.Clone(pr.Reports)
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *workspace.Promotion) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
