package dbtsync

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Requests of the endpoints: the verified caller, the deployment of the path, and the
// decoded body or parameters.
type (
	scope struct {
		P            *identity.Principal
		DeploymentID int64
	}
	syncRequest struct {
		scope
		Body SyncRequestBody
	}
	jobRequest struct {
		scope
		SyncJobID string
	}
	pageRequest struct {
		scope
		Page httpx.PageQuery
	}
	putIntegrationRequest struct {
		scope
		In IntegrationInput
	}
	branchRequest struct {
		scope
		Name string
	}
	branchPageRequest struct {
		scope
		Name string
		Page httpx.PageQuery
	}
	filesRequest struct {
		scope
		Name    string
		Version int64
	}
	fileRequest struct {
		scope
		Name, Path string
		Version    int64
	}
	stagingRequest struct {
		scope
		Name    string
		Enabled bool
	}
)

// Endpoints are the go-kit endpoints of the Service. Business errors are returned as
// errors; the transport's one error encoder maps them to status codes.
type Endpoints struct {
	StartSync, GetJob, ListJobs                 endpoint.Endpoint
	CancelJob, RetryJob                         endpoint.Endpoint
	PutIntegration, GetIntegration              endpoint.Endpoint
	ListBranches, GetBranch, ListFiles, GetFile endpoint.Endpoint
	ListVersions, OpenBranch, SetStaging        endpoint.Endpoint
	PushWebhook                                 endpoint.Endpoint
}

// MakeEndpoints adapts s.
func MakeEndpoints(s Service) Endpoints {
	return Endpoints{
		StartSync: func(ctx context.Context, req any) (any, error) {
			r := req.(syncRequest)
			res, err := s.StartSync(ctx, r.P, r.DeploymentID, r.Body)
			return res.Accepted, err
		},
		GetJob: func(ctx context.Context, req any) (any, error) {
			r := req.(jobRequest)
			return s.GetJob(ctx, r.P, r.DeploymentID, r.SyncJobID)
		},
		CancelJob: func(ctx context.Context, req any) (any, error) {
			r := req.(jobRequest)
			return s.CancelJob(ctx, r.P, r.DeploymentID, r.SyncJobID)
		},
		RetryJob: func(ctx context.Context, req any) (any, error) {
			r := req.(jobRequest)
			return s.RetryJob(ctx, r.P, r.DeploymentID, r.SyncJobID)
		},
		ListJobs: func(ctx context.Context, req any) (any, error) {
			r := req.(pageRequest)
			return s.ListJobs(ctx, r.P, r.DeploymentID, r.Page)
		},
		PutIntegration: func(ctx context.Context, req any) (any, error) {
			r := req.(putIntegrationRequest)
			return s.PutIntegration(ctx, r.P, r.DeploymentID, r.In)
		},
		PushWebhook: func(ctx context.Context, req any) (any, error) {
			r := req.(pushRequest)
			return s.PushWebhook(ctx, r.P, r.DeploymentID, r.Req)
		},
		GetIntegration: func(ctx context.Context, req any) (any, error) {
			r := req.(scope)
			return s.GetIntegration(ctx, r.P, r.DeploymentID)
		},
		ListBranches: func(ctx context.Context, req any) (any, error) {
			r := req.(pageRequest)
			return s.ListBranches(ctx, r.P, r.DeploymentID, r.Page)
		},
		GetBranch: func(ctx context.Context, req any) (any, error) {
			r := req.(branchRequest)
			return s.GetBranch(ctx, r.P, r.DeploymentID, r.Name)
		},
		ListFiles: func(ctx context.Context, req any) (any, error) {
			r := req.(filesRequest)
			return s.ListFiles(ctx, r.P, r.DeploymentID, r.Name, r.Version)
		},
		GetFile: func(ctx context.Context, req any) (any, error) {
			r := req.(fileRequest)
			return s.GetFile(ctx, r.P, r.DeploymentID, r.Name, r.Path, r.Version)
		},
		ListVersions: func(ctx context.Context, req any) (any, error) {
			r := req.(branchPageRequest)
			return s.ListVersions(ctx, r.P, r.DeploymentID, r.Name, r.Page)
		},
		OpenBranch: func(ctx context.Context, req any) (any, error) {
			r := req.(branchRequest)
			return s.OpenBranch(ctx, r.P, r.DeploymentID, r.Name)
		},
		SetStaging: func(ctx context.Context, req any) (any, error) {
			r := req.(stagingRequest)
			return s.SetStaging(ctx, r.P, r.DeploymentID, r.Name, r.Enabled)
		},
	}
}
