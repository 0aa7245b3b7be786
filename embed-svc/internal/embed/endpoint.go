package embed

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Endpoints adapt the Service to go-kit; each request carries the verified principal.
type Endpoints struct {
	GenerateSession  endpoint.Endpoint
	ExchangeSession  endpoint.Endpoint
	RevokeSession    endpoint.Endpoint
	SessionInfo      endpoint.Endpoint
	AICredentials    endpoint.Endpoint
	DataToken        endpoint.Endpoint
	JWKS             endpoint.Endpoint
	ListDefinitions  endpoint.Endpoint
	CreateDefinition endpoint.Endpoint
	DeleteDefinition endpoint.Endpoint
	GetSettings      endpoint.Endpoint
	PutSettings      endpoint.Endpoint
	ListSessions     endpoint.Endpoint
	RevokeSessions   endpoint.Endpoint
	ListUsers        endpoint.Endpoint
	GetUser          endpoint.Endpoint
	DeleteUser       endpoint.Endpoint
	ListMembers      endpoint.Endpoint
	AddMembers       endpoint.Endpoint
	RemoveMember     endpoint.Endpoint
}

type listMembersRequest struct {
	P            *identity.Principal
	Scope, Group string
	Query        UserQuery
}

type addMembersRequest struct {
	P            *identity.Principal
	Scope, Group string
	Body         GroupMembersInput
}

type removeMemberRequest struct {
	P                        *identity.Principal
	Scope, Group, ExternalID string
}

type listUsersRequest struct {
	P      *identity.Principal
	Tenant string
	Query  UserQuery
}

type userRequest struct {
	P                  *identity.Principal
	Tenant, ExternalID string
}

type listSessionsRequest struct {
	P     *identity.Principal
	Query SessionQuery
}

type revokeSessionsRequest struct {
	P    *identity.Principal
	Body RevokeSessionsRequest
}

type putSettingsRequest struct {
	P    *identity.Principal
	Body AccountSettings
}

type generateSessionRequest struct {
	P    *identity.Principal
	Body GenerateSessionRequest
}

type generateSessionResponse struct {
	SessionID string `json:"sessionId"`
}

type sessionIDRequest struct {
	P         *identity.Principal
	SessionID string `json:"sessionId"`
}

type principalRequest struct{ P *identity.Principal }

type dataTokenRequest struct {
	P            *identity.Principal
	DeploymentID int64
}

type listDefinitionsRequest struct {
	P     *identity.Principal
	Query ListQuery
}

type createDefinitionRequest struct {
	P    *identity.Principal
	Kind string
	Body DefinitionInput
}

type deleteDefinitionRequest struct {
	P               *identity.Principal
	Scope, Kind, ID string
}

// MakeEndpoints builds the endpoints of s.
func MakeEndpoints(s Service) Endpoints {
	return Endpoints{
		GenerateSession: func(ctx context.Context, r any) (any, error) {
			req := r.(generateSessionRequest)
			if req.Body.DryRun {
				return s.DryRunSession(ctx, req.P, req.Body)
			}
			id, err := s.GenerateSession(ctx, req.P, req.Body)
			return generateSessionResponse{SessionID: id}, err
		},
		ExchangeSession: func(ctx context.Context, r any) (any, error) {
			return s.ExchangeSession(ctx, r.(sessionIDRequest).SessionID)
		},
		RevokeSession: func(ctx context.Context, r any) (any, error) {
			req := r.(sessionIDRequest)
			return httpx.NoContent{}, s.RevokeSession(ctx, req.P, req.SessionID)
		},
		SessionInfo: func(ctx context.Context, r any) (any, error) {
			return s.SessionInfo(ctx, r.(principalRequest).P)
		},
		AICredentials: func(ctx context.Context, r any) (any, error) {
			return s.AICredentials(ctx, r.(principalRequest).P)
		},
		DataToken: func(ctx context.Context, r any) (any, error) {
			req := r.(dataTokenRequest)
			return s.DataToken(ctx, req.P, req.DeploymentID)
		},
		JWKS: func(ctx context.Context, _ any) (any, error) {
			return s.JWKS(ctx)
		},
		ListDefinitions: func(ctx context.Context, r any) (any, error) {
			req := r.(listDefinitionsRequest)
			page, err := s.ListDefinitions(ctx, req.P, req.Query)
			return definitionPageView(page, req.Query.Kind), err
		},
		CreateDefinition: func(ctx context.Context, r any) (any, error) {
			req := r.(createDefinitionRequest)
			d, err := s.CreateDefinition(ctx, req.P, req.Kind, req.Body)
			return definitionView(d, req.Kind), err
		},
		DeleteDefinition: func(ctx context.Context, r any) (any, error) {
			req := r.(deleteDefinitionRequest)
			return httpx.NoContent{}, s.DeleteDefinition(ctx, req.P, req.Scope, req.Kind, req.ID)
		},
		GetSettings: func(ctx context.Context, r any) (any, error) {
			return s.GetAccountSettings(ctx, r.(principalRequest).P)
		},
		PutSettings: func(ctx context.Context, r any) (any, error) {
			req := r.(putSettingsRequest)
			return s.PutAccountSettings(ctx, req.P, req.Body)
		},
		ListSessions: func(ctx context.Context, r any) (any, error) {
			req := r.(listSessionsRequest)
			return s.ListSessions(ctx, req.P, req.Query)
		},
		RevokeSessions: func(ctx context.Context, r any) (any, error) {
			req := r.(revokeSessionsRequest)
			return s.RevokeSessions(ctx, req.P, req.Body)
		},
		ListUsers: func(ctx context.Context, r any) (any, error) {
			req := r.(listUsersRequest)
			return s.ListTenantUsers(ctx, req.P, req.Tenant, req.Query)
		},
		GetUser: func(ctx context.Context, r any) (any, error) {
			req := r.(userRequest)
			return s.GetTenantUser(ctx, req.P, req.Tenant, req.ExternalID)
		},
		DeleteUser: func(ctx context.Context, r any) (any, error) {
			req := r.(userRequest)
			return s.DeleteTenantUser(ctx, req.P, req.Tenant, req.ExternalID)
		},
		ListMembers: func(ctx context.Context, r any) (any, error) {
			req := r.(listMembersRequest)
			return s.ListGroupMembers(ctx, req.P, req.Scope, req.Group, req.Query)
		},
		AddMembers: func(ctx context.Context, r any) (any, error) {
			req := r.(addMembersRequest)
			return s.AddGroupMembers(ctx, req.P, req.Scope, req.Group, req.Body)
		},
		RemoveMember: func(ctx context.Context, r any) (any, error) {
			req := r.(removeMemberRequest)
			return httpx.NoContent{}, s.RemoveGroupMember(ctx, req.P, req.Scope, req.Group, req.ExternalID)
		},
	}
}

// groupView is the item shape of a group; attributes use Definition itself.
type groupView struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	CreatedAt   string  `json:"createdAt"`
	UpdatedAt   string  `json:"updatedAt"`
}

func definitionView(d Definition, kind string) any {
	if kind == KindGroup {
		return groupView{ID: d.ID, Name: d.Name, Description: d.Description,
			CreatedAt: d.CreatedAt.UTC().Format(timeFormat), UpdatedAt: d.UpdatedAt.UTC().Format(timeFormat)}
	}
	return d
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func definitionPageView(p httpx.Page[Definition], kind string) any {
	items := make([]any, 0, len(p.Items))
	for _, d := range p.Items {
		items = append(items, definitionView(d, kind))
	}
	return httpx.Page[any]{Items: items, PageInfo: p.PageInfo}
}
