package dbtsync

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Body limits: the start-sync limit is the caller's (a manifest reaches hundreds of MiB);
// the other bodies are a few fields.
const (
	DefaultMaxSyncBodyBytes = 256 << 20
	maxSmallBodyBytes       = 1 << 20
)

// NewHTTPHandler routes the dbt sync and /build routes to the endpoints; maxSyncBodyBytes
// bounds a start-sync body. The caller wraps it in identity.Require.
func NewHTTPHandler(e Endpoints, logger *slog.Logger, maxSyncBodyBytes int64) http.Handler {
	opts := []kithttp.ServerOption{
		kithttp.ServerBefore(kithttp.PopulateRequestContext),
		kithttp.ServerErrorEncoder(errorEncoder(logger)),
	}
	mux := http.NewServeMux()
	handle := func(route string, ep func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc) {
		mux.Handle(route, kithttp.NewServer(ep, dec, encodeResponse, opts...))
	}
	// Bodies are bounded before the server reads them, with the response writer, so a
	// request over the limit also closes its connection instead of draining the rest.
	handleBody := func(route string, limit int64, ep func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc) {
		srv := kithttp.NewServer(ep, dec, encodeResponse, opts...)
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			srv.ServeHTTP(w, r)
		})
	}
	const dep = "/api/v1/deployments/{deploymentId}"
	handleBody("POST "+dep+"/dbt-sync", maxSyncBodyBytes, e.StartSync, decodeStartSyncHTTP)
	handle("GET "+dep+"/dbt-sync", e.ListJobs, decodePageRequest(roleSync))
	handle("GET "+dep+"/dbt-sync/{syncJobId}", e.GetJob, decodeJobRequest)
	handle("POST "+dep+"/dbt-sync/{syncJobId}/cancel", e.CancelJob, decodeJobRequest)
	handle("POST "+dep+"/dbt-sync/{syncJobId}/retry", e.RetryJob, decodeJobRequest)
	handle("GET "+dep+"/dbt-git-integration", e.GetIntegration, decodeScope(roleIntegration))
	handleBody("PUT "+dep+"/dbt-git-integration", maxSmallBodyBytes, e.PutIntegration, decodeIntegrationHTTP)
	const build = "/build/api/v1/deployments/{deploymentId}/branches"
	handle("GET "+build, e.ListBranches, decodePageRequest(roleBranches))
	handle("GET "+build+"/{branchName}", e.GetBranch, decodeBranchRequest)
	handle("GET "+build+"/{branchName}/files", e.ListFiles, decodeFilesRequest)
	handle("GET "+build+"/{branchName}/files/{path...}", e.GetFile, decodeFileRequest)
	handle("GET "+build+"/{branchName}/versions", e.ListVersions, decodeBranchPageRequest)
	handle("POST "+build+"/{branchName}/open", e.OpenBranch, decodeBranchRequest)
	handleBody("PUT "+build+"/{branchName}/staging", maxSmallBodyBytes, e.SetStaging, decodeStagingHTTP)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func encodeResponse(_ context.Context, w http.ResponseWriter, resp any) error {
	status := http.StatusOK
	if _, ok := resp.(SyncAccepted); ok {
		status = http.StatusAccepted
	}
	httpx.WriteJSON(w, status, resp)
	return nil
}

// StatusOf maps a domain error kind to its HTTP status.
func StatusOf(k Kind) int {
	switch k {
	case KindInvalid:
		return http.StatusBadRequest
	case KindForbidden:
		return http.StatusForbidden
	case KindNotFound:
		return http.StatusNotFound
	case KindConflict:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// errorEncoder maps domain errors and client errors to their status; an unreachable
// dependency is a 503 naming it, anything else a logged 500 that reveals nothing.
func errorEncoder(logger *slog.Logger) kithttp.ErrorEncoder {
	return func(ctx context.Context, err error, w http.ResponseWriter) {
		var de *Error
		var he *httpx.Error
		switch {
		case errors.Is(err, ErrQueueUnavailable):
			logger.WarnContext(ctx, "job queue unavailable", "err", err)
			httpx.WriteError(w, http.StatusServiceUnavailable, "the dbt sync job queue (NATS) is unavailable; retry shortly")
		case errors.Is(err, ErrUnavailable):
			logger.WarnContext(ctx, "dependency unavailable", "err", err)
			httpx.WriteError(w, http.StatusServiceUnavailable, "a dependency of dbtsync-svc is unavailable; retry shortly")
		case errors.As(err, &de):
			httpx.WriteError(w, StatusOf(de.Kind), de.Message)
		case errors.As(err, &he):
			httpx.WriteCodedError(w, he.Status, he.Code, he.Message)
		default:
			method, _ := ctx.Value(kithttp.ContextKeyRequestMethod).(string)
			path, _ := ctx.Value(kithttp.ContextKeyRequestPath).(string)
			httpx.InternalContext(ctx, w, logger, err, "method", method, "path", path)
		}
	}
}

// scopeOf reads the path's deployment and refuses a caller below role before anything
// else of the request is read (the service checks the role too).
func scopeOf(r *http.Request, role string) (scope, error) {
	dep, err := identity.DeploymentFromPath(r)
	if err != nil {
		return scope{}, err
	}
	p := identity.FromContext(r.Context())
	if err := authorize(p, role); err != nil {
		return scope{}, err
	}
	return scope{P: p, Dep: dep}, nil
}

func decodeScope(role string) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		return scopeOf(r, role)
	}
}

// decodeStartSyncHTTP leaves the body to the service (see SyncRequestBody), which reads
// it with decodeStartSyncRequest once it has a place for the manifest.
func decodeStartSyncHTTP(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleSync)
	if err != nil {
		return nil, err
	}
	if err := httpx.RequireJSON(r); err != nil {
		return nil, err
	}
	return syncRequest{scope: sc, Body: func(manifest io.Writer) (StartSyncInput, error) {
		req, err := decodeStartSyncRequest(r.Body, manifest)
		return StartSyncInput{Source: req.Source, Ref: req.Ref, BranchName: req.BranchName, Output: req.Output}, err
	}}, nil
}

func decodeJobRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleSync)
	if err != nil {
		return nil, err
	}
	return jobRequest{scope: sc, SyncJobID: r.PathValue("syncJobId")}, nil
}

func decodePageRequest(role string) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r, role)
		if err != nil {
			return nil, err
		}
		pg, err := pageParams(r)
		if err != nil {
			return nil, err
		}
		return pageRequest{scope: sc, Page: pg}, nil
	}
}

// pageParams reads first and after (the one pagination contract, httpx.ParsePage); the
// cursor is base64url of the list's own key.
func pageParams(r *http.Request) (PageRequest, error) {
	p, err := httpx.ParsePage(r)
	if err != nil {
		return PageRequest{First: httpx.DefaultPage}, err
	}
	pg := PageRequest{First: p.First}
	if p.After != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.After)
		if err != nil || len(b) == 0 {
			return pg, httpx.BadCursor()
		}
		pg.After = string(b)
	}
	return pg, nil
}

func decodeIntegrationHTTP(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleIntegration)
	if err != nil {
		return nil, err
	}
	if err := httpx.RequireJSON(r); err != nil {
		return nil, err
	}
	req, err := decodeIntegrationRequest(r.Body)
	if err != nil {
		return nil, err
	}
	return putIntegrationRequest{scope: sc, In: IntegrationInput{RepoURL: *req.RepoURL, Branch: *req.Branch, ProjectPath: *req.ProjectPath,
		ManifestPath: req.ManifestPath, Credentials: req.Credentials}}, nil
}

func decodeBranchRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleBranches)
	if err != nil {
		return nil, err
	}
	return branchRequest{scope: sc, Name: r.PathValue("branchName")}, nil
}

func decodeBranchPageRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleBranches)
	if err != nil {
		return nil, err
	}
	pg, err := pageParams(r)
	if err != nil {
		return nil, err
	}
	return branchPageRequest{scope: sc, Name: r.PathValue("branchName"), Page: pg}, nil
}

func decodeFilesRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleBranches)
	if err != nil {
		return nil, err
	}
	version, err := versionParam(r)
	if err != nil {
		return nil, err
	}
	return filesRequest{scope: sc, Name: r.PathValue("branchName"), Version: version}, nil
}

func decodeFileRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleBranches)
	if err != nil {
		return nil, err
	}
	path := r.PathValue("path")
	for _, seg := range strings.Split(path, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return nil, badRequest("file path %q must be relative, without empty, '.' or '..' segments", path)
		}
	}
	version, err := versionParam(r)
	if err != nil {
		return nil, err
	}
	return fileRequest{scope: sc, Name: r.PathValue("branchName"), Path: path, Version: version}, nil
}

func decodeStagingHTTP(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r, roleBranches)
	if err != nil {
		return nil, err
	}
	if err := httpx.RequireJSON(r); err != nil {
		return nil, err
	}
	enabled, err := decodeStagingRequest(r.Body)
	if err != nil {
		return nil, err
	}
	return stagingRequest{scope: sc, Name: r.PathValue("branchName"), Enabled: enabled}, nil
}

type integrationRequest struct {
	RepoURL      *string         `json:"repoUrl"`
	Branch       *string         `json:"branch"`
	ProjectPath  *string         `json:"projectPath"`
	ManifestPath *string         `json:"manifestPath"`
	Credentials  *GitCredentials `json:"credentials"`
}

// decodeIntegrationRequest decodes and validates PUT .../dbt-git-integration.
func decodeIntegrationRequest(body io.Reader) (integrationRequest, error) {
	var req integrationRequest
	if err := httpx.DecodeJSONBody(body, &req); err != nil {
		return req, err
	}
	switch {
	case req.RepoURL == nil || *req.RepoURL == "":
		return req, badRequest("field \"repoUrl\" is required")
	case !strings.HasPrefix(*req.RepoURL, "https://") && !strings.HasPrefix(*req.RepoURL, "file://"):
		return req, badRequest("field \"repoUrl\" must be an https:// or file:// URL")
	case strings.Contains(strings.SplitN(strings.TrimPrefix(strings.TrimPrefix(*req.RepoURL, "https://"), "file://"), "/", 2)[0], "@"):
		return req, badRequest("field \"repoUrl\" must not carry credentials: send them in \"credentials\"")
	case req.Branch == nil || *req.Branch == "":
		return req, badRequest("field \"branch\" is required")
	case !validRef(*req.Branch):
		return req, badRequest("field \"branch\" must be a branch name")
	case req.ProjectPath == nil:
		return req, badRequest("field \"projectPath\" is required")
	case strings.Contains(*req.ProjectPath, ".."):
		return req, badRequest("field \"projectPath\" must stay inside the repository (no \"..\")")
	case req.ManifestPath != nil && strings.Contains(*req.ManifestPath, ".."):
		return req, badRequest("field \"manifestPath\" must stay inside the repository (no \"..\")")
	case req.Credentials != nil && req.Credentials.Token == "":
		return req, badRequest("field \"credentials.token\" is required")
	}
	return req, nil
}

// decodeStagingRequest decodes PUT .../staging.
func decodeStagingRequest(body io.Reader) (bool, error) {
	var req struct {
		Enabled *bool `json:"enabled"`
	}
	if err := httpx.DecodeJSONBody(body, &req); err != nil {
		return false, err
	}
	if req.Enabled == nil {
		return false, badRequest("field \"enabled\" is required")
	}
	return *req.Enabled, nil
}

func versionParam(r *http.Request) (int64, error) {
	raw := r.URL.Query().Get("version")
	if raw == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < 1 {
		return 0, badRequest("query parameter \"version\" must be a positive integer, not %q", raw)
	}
	return v, nil
}
