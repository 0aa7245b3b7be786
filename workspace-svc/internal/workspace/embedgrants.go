package workspace

import (
	"context"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// GetEmbedAccess answers obj's embed grants and what it inherits.
func (s *service) GetEmbedAccess(ctx context.Context, p *identity.Principal, dep int64, obj EmbedObject) (EmbedAccessView, error) {
	return EmbedAccessView{}, errs.Unavailablef("embed access is being built")
}

// PutEmbedAccess replaces obj's own embed grants.
func (s *service) PutEmbedAccess(ctx context.Context, p *identity.Principal, dep int64, obj EmbedObject, g embedaccess.Grants) (EmbedAccessView, error) {
	return EmbedAccessView{}, errs.Unavailablef("embed access is being built")
}

// TenantWorkbooks answers a page of an embed tenant's effective access.
func (s *service) TenantWorkbooks(ctx context.Context, p *identity.Principal, dep int64, tenant string, in TenantWorkbooksInput) (httpx.Page[TenantWorkbook], error) {
	return httpx.Page[TenantWorkbook]{}, errs.Unavailablef("embed access is being built")
}
