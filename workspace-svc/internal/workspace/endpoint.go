package workspace

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// Requests of the endpoints: the verified caller, the deployment of the path, and the
// decoded body or parameters.
type (
	scope struct {
		P            *identity.Principal
		DeploymentID int64
	}
	createFolderRequest struct {
		scope
		In CreateFolderInput
	}
	folderRequest struct {
		scope
		ID int64
	}
	updateFolderRequest struct {
		scope
		ID int64
		In UpdateFolderInput
	}
	setPermissionsRequest struct {
		scope
		ID     int64
		Grants []Grant
	}
	listRequest struct {
		scope
		Folder int64
		First  int
		After  string
	}
	moveRequest struct {
		scope
		Ref  ItemRef
		Dest int64
	}
	bulkMoveRequest struct {
		scope
		Refs []ItemRef
		Dest int64
	}
	createItemRequest struct {
		scope
		Type ItemType
		In   CreateItemInput
	}
	itemRequest struct {
		scope
		Type ItemType
		ID   int64
	}
	publishRequest struct {
		itemRequest
		AllowEmbed *bool
	}
	updateItemRequest struct {
		itemRequest
		In UpdateItemInput
	}
	searchRequest struct {
		scope
		In SearchInput
	}
	favoriteRequest struct {
		scope
		Ref ItemRef
		On  bool
	}
	permissions struct {
		Grants []Grant `json:"grants"`
	}
	embedAccessRequest struct {
		scope
		Object EmbedObject
	}
	putEmbedAccessRequest struct {
		embedAccessRequest
		Grants embedaccess.Grants
	}
	tenantWorkbooksRequest struct {
		scope
		Tenant string
		In     TenantWorkbooksInput
	}
	// The embed viewer's requests: the session's deployment is the principal's.
	embedDashboardsRequest struct {
		P     *identity.Principal
		First int
		After string
	}
	embedDashboardRequest struct {
		P        *identity.Principal
		PublicID string
	}
)

// Endpoints are the go-kit endpoints of the service.
type Endpoints struct {
	CreateFolder, GetFolder, UpdateFolder, DeleteFolder endpoint.Endpoint
	GetPermissions, SetPermissions                      endpoint.Endpoint
	List, Move, BulkMove                                endpoint.Endpoint
	CreateItem, GetItem, Publish                        endpoint.Endpoint
	UpdateItem, DeleteItem, Unpublish                   endpoint.Endpoint
	Search, Favorite                                    endpoint.Endpoint
	GetEmbedAccess, PutEmbedAccess, TenantWorkbooks     endpoint.Endpoint
	EmbedDashboards, EmbedDashboard                     endpoint.Endpoint
	KeyEndpoints
	VersionEndpoints
	TrashEndpoints
	PromotionEndpoints // transport_promotion.go
	TransferEndpoints
}

// MakeEndpoints adapts s.
func MakeEndpoints(s Service) Endpoints {
	return Endpoints{
		KeyEndpoints:      makeKeyEndpoints(s),
		VersionEndpoints:  makeVersionEndpoints(s),
		TrashEndpoints:    makeTrashEndpoints(s),
		TransferEndpoints: makeTransferEndpoints(s),
		CreateFolder: func(ctx context.Context, req any) (any, error) {
			r := req.(createFolderRequest)
			return s.CreateFolder(ctx, r.P, r.DeploymentID, r.In)
		},
		GetFolder: func(ctx context.Context, req any) (any, error) {
			r := req.(folderRequest)
			return s.GetFolder(ctx, r.P, r.DeploymentID, r.ID)
		},
		UpdateFolder: func(ctx context.Context, req any) (any, error) {
			r := req.(updateFolderRequest)
			return s.UpdateFolder(ctx, r.P, r.DeploymentID, r.ID, r.In)
		},
		DeleteFolder: func(ctx context.Context, req any) (any, error) {
			r := req.(folderRequest)
			return httpx.NoContent{}, s.DeleteFolder(ctx, r.P, r.DeploymentID, r.ID)
		},
		GetPermissions: func(ctx context.Context, req any) (any, error) {
			r := req.(folderRequest)
			g, err := s.GetPermissions(ctx, r.P, r.DeploymentID, r.ID)
			return permissions{Grants: g}, err
		},
		SetPermissions: func(ctx context.Context, req any) (any, error) {
			r := req.(setPermissionsRequest)
			g, err := s.SetPermissions(ctx, r.P, r.DeploymentID, r.ID, r.Grants)
			return permissions{Grants: g}, err
		},
		List: func(ctx context.Context, req any) (any, error) {
			r := req.(listRequest)
			return s.List(ctx, r.P, r.DeploymentID, r.Folder, r.First, r.After)
		},
		Move: func(ctx context.Context, req any) (any, error) {
			r := req.(moveRequest)
			res, err := s.Move(ctx, r.P, r.DeploymentID, r.Ref, r.Dest)
			return res.Item, err
		},
		BulkMove: func(ctx context.Context, req any) (any, error) {
			r := req.(bulkMoveRequest)
			return s.BulkMove(ctx, r.P, r.DeploymentID, r.Refs, r.Dest)
		},
		CreateItem: func(ctx context.Context, req any) (any, error) {
			r := req.(createItemRequest)
			return s.CreateItem(ctx, r.P, r.DeploymentID, r.Type, r.In)
		},
		GetItem: func(ctx context.Context, req any) (any, error) {
			r := req.(itemRequest)
			return s.GetItem(ctx, r.P, r.DeploymentID, r.Type, r.ID)
		},
		Publish: func(ctx context.Context, req any) (any, error) {
			r := req.(publishRequest)
			return s.Publish(ctx, r.P, r.DeploymentID, r.ID, r.AllowEmbed)
		},
		Unpublish: func(ctx context.Context, req any) (any, error) {
			r := req.(itemRequest)
			return s.Unpublish(ctx, r.P, r.DeploymentID, r.ID)
		},
		UpdateItem: func(ctx context.Context, req any) (any, error) {
			r := req.(updateItemRequest)
			return s.UpdateItem(ctx, r.P, r.DeploymentID, r.Type, r.ID, r.In)
		},
		DeleteItem: func(ctx context.Context, req any) (any, error) {
			r := req.(itemRequest)
			return httpx.NoContent{}, s.DeleteItem(ctx, r.P, r.DeploymentID, r.Type, r.ID)
		},
		Search: func(ctx context.Context, req any) (any, error) {
			r := req.(searchRequest)
			return s.Search(ctx, r.P, r.DeploymentID, r.In)
		},
		Favorite: func(ctx context.Context, req any) (any, error) {
			r := req.(favoriteRequest)
			return httpx.NoContent{}, s.SetFavorite(ctx, r.P, r.DeploymentID, r.Ref, r.On)
		},
		GetEmbedAccess: func(ctx context.Context, req any) (any, error) {
			r := req.(embedAccessRequest)
			return s.GetEmbedAccess(ctx, r.P, r.DeploymentID, r.Object)
		},
		PutEmbedAccess: func(ctx context.Context, req any) (any, error) {
			r := req.(putEmbedAccessRequest)
			return s.PutEmbedAccess(ctx, r.P, r.DeploymentID, r.Object, r.Grants)
		},
		TenantWorkbooks: func(ctx context.Context, req any) (any, error) {
			r := req.(tenantWorkbooksRequest)
			return s.TenantWorkbooks(ctx, r.P, r.DeploymentID, r.Tenant, r.In)
		},
		EmbedDashboards: func(ctx context.Context, req any) (any, error) {
			r := req.(embedDashboardsRequest)
			return s.EmbedDashboards(ctx, r.P, r.First, r.After)
		},
		EmbedDashboard: func(ctx context.Context, req any) (any, error) {
			r := req.(embedDashboardRequest)
			return s.EmbedDashboard(ctx, r.P, r.PublicID)
		},
		PromotionEndpoints: makePromotionEndpoints(s),
	}
}
