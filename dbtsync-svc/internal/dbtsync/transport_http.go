package dbtsync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/identity"
)

// Body limits: the start-sync limit is the caller's (a manifest reaches hundreds of MiB);
// every other body is a few fields, or none.
const (
	DefaultMaxSyncBodyBytes = 256 << 20
	maxSmallBodyBytes       = 1 << 20
)

// ClassUpload is start sync's route class in the fair-share bound
// (DBT_SYNC_MAX_INFLIGHT_PER_ACCOUNT): the create of a sync job, with the manifest it
// uploads or the repository it names.
const ClassUpload = "upload"

// NewHTTPHandler routes the dbt sync and /build routes to the endpoints; maxSyncBodyBytes
// bounds a start-sync body, and manifest the manifest it uploads as the worker's read
// bounds it (zero fields: the defaults). The caller wraps it in identity.Require.
// Decoders only parse the request: the service decides who may do what. fair bounds one
// account's start-sync uploads in flight before their body is read (nil: unbounded).
// idem (nil: none) deduplicates every POST by its Idempotency-Key; it hashes a manifest
// upload as the decoder streams it, never holding the body.
func NewHTTPHandler(e Endpoints, logger *slog.Logger, maxSyncBodyBytes int64, manifest convert.ManifestLimits, fair *fairshare.Limiter, idem *idempotency.Middleware, maxPushBodyBytes int64) http.Handler {
	if maxPushBodyBytes <= 0 {
		maxPushBodyBytes = DefaultMaxPushBodyBytes
	}
	router := httpx.NewRouter()
	o := httpx.HandleOptions{Logger: logger, MaxBody: maxSmallBodyBytes, Encode: encodeResponse, Server: []kithttp.ServerOption{
		kithttp.ServerBefore(kithttp.PopulateRequestContext),
	}}
	if idem != nil {
		o.Wrap = idem.Wrap
	}
	const dep = "/api/v1/deployments/{deploymentId}"
	httpx.Handle(router, "POST", dep+"/dbt-sync", e.StartSync, decodeStartSyncHTTP(manifest), o.WithMaxBody(maxSyncBodyBytes).WithAdmit(fair.Guard(ClassUpload)))
	httpx.Handle(router, "GET", dep+"/dbt-sync", e.ListJobs, decodePageRequest, o)
	httpx.Handle(router, "GET", dep+"/dbt-sync/{syncJobId}", e.GetJob, decodeJobRequest, o)
	httpx.Handle(router, "POST", dep+"/dbt-sync/{syncJobId}/cancel", e.CancelJob, decodeJobRequest, o)
	httpx.Handle(router, "POST", dep+"/dbt-sync/{syncJobId}/retry", e.RetryJob, decodeJobRequest, o)
	httpx.Handle(router, "GET", dep+"/dbt-git-integration", e.GetIntegration, decodeScope, o)
	httpx.Handle(router, "PUT", dep+"/dbt-git-integration", e.PutIntegration, decodeIntegrationHTTP, o)
	push := o
	push.Wrap = nil // a provider sends no Idempotency-Key: deliveries are deduplicated by their id
	httpx.Handle(router, "POST", dep+"/dbt-git-integration/webhook", e.PushWebhook, decodePushRequest, push.WithMaxBody(maxPushBodyBytes))
	const build = "/build/api/v1/deployments/{deploymentId}/branches"
	httpx.Handle(router, "GET", build, e.ListBranches, decodePageRequest, o)
	httpx.Handle(router, "GET", build+"/{branchName}", e.GetBranch, decodeBranchRequest, o)
	httpx.Handle(router, "GET", build+"/{branchName}/files", e.ListFiles, decodeFilesRequest, o)
	httpx.Handle(router, "GET", build+"/{branchName}/files/{path...}", e.GetFile, decodeFileRequest, o)
	httpx.Handle(router, "GET", build+"/{branchName}/versions", e.ListVersions, decodeBranchPageRequest, o)
	httpx.Handle(router, "POST", build+"/{branchName}/open", e.OpenBranch, decodeBranchRequest, o)
	httpx.Handle(router, "PUT", build+"/{branchName}/staging", e.SetStaging, decodeStagingHTTP, o)
	return router
}

func encodeResponse(_ context.Context, w http.ResponseWriter, resp any) error {
	status := http.StatusOK
	switch r := resp.(type) {
	case SyncAccepted:
		status = http.StatusAccepted
	case PushResult:
		if r.Started {
			status = http.StatusAccepted
		}
	case SyncJob:
		if r.Files != nil {
			writeJobWithFiles(w, r)
			return nil
		}
	}
	httpx.WriteJSON(w, status, resp)
	return nil
}

// writeJobWithFiles answers a files job with its result streamed from the store into
// the "files" member: the process holds a buffer of it at a time, however large. A
// store that fails midway cuts the answer off (the client sees a broken response, not a
// truncated JSON it could take for whole).
func writeJobWithFiles(w http.ResponseWriter, j SyncJob) {
	defer j.Files.Close()
	var head bytes.Buffer
	enc := json.NewEncoder(&head)
	enc.SetEscapeHTML(false) // as httpx.WriteJSON
	if err := enc.Encode(j); err != nil {
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	obj := bytes.TrimSuffix(head.Bytes(), []byte("\n"))
	_, _ = w.Write(obj[:len(obj)-1]) // the object without its closing brace
	_, _ = io.WriteString(w, `,"files":`)
	if _, err := io.Copy(w, j.Files); err != nil {
		panic(http.ErrAbortHandler)
	}
	_, _ = io.WriteString(w, "}\n")
}

// scopeOf is the verified caller and the deployment of the path (404 unless it is the
// caller's).
func scopeOf(r *http.Request) (scope, error) {
	deploymentID, err := identity.DeploymentFromPath(r)
	if err != nil {
		return scope{}, err
	}
	return scope{P: identity.FromContext(r.Context()), DeploymentID: deploymentID}, nil
}

func decodeScope(_ context.Context, r *http.Request) (any, error) { return scopeOf(r) }

// decodeStartSyncHTTP leaves the body to the service (see SyncRequestBody), which reads
// it with decodeStartSyncRequest once the caller is authorized and it has a place for the
// manifest: a refused caller is answered 403 whatever it sent.
func decodeStartSyncHTTP(limits convert.ManifestLimits) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r)
		if err != nil {
			return nil, err
		}
		return syncRequest{scope: sc, Body: func(manifest io.Writer) (StartSyncInput, error) {
			if err := httpx.RequireJSON(r); err != nil {
				return StartSyncInput{}, err
			}
			return decodeStartSyncRequest(r.Body, manifest, limits)
		}}, nil
	}
}

func decodeJobRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	return jobRequest{scope: sc, SyncJobID: r.PathValue("syncJobId")}, nil
}

func decodePageRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	return pageRequest{scope: sc, Page: pg}, nil
}

func decodeIntegrationHTTP(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	if err := httpx.RequireJSON(r); err != nil {
		return nil, err
	}
	in, err := decodeIntegrationRequest(r.Body)
	if err != nil {
		return nil, err
	}
	return putIntegrationRequest{scope: sc, In: in}, nil
}

func decodeBranchRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	return branchRequest{scope: sc, Name: r.PathValue("branchName")}, nil
}

func decodeBranchPageRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	return branchPageRequest{scope: sc, Name: r.PathValue("branchName"), Page: pg}, nil
}

func decodeFilesRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
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
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	version, err := versionParam(r)
	if err != nil {
		return nil, err
	}
	return fileRequest{scope: sc, Name: r.PathValue("branchName"), Path: r.PathValue("path"), Version: version}, nil
}

func decodeStagingHTTP(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
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

// decodeIntegrationRequest decodes PUT .../dbt-git-integration (PutIntegration
// validates it).
func decodeIntegrationRequest(body io.Reader) (IntegrationInput, error) {
	var req struct {
		RepoURL      *string         `json:"repoUrl"`
		Branch       *string         `json:"branch"`
		ProjectPath  *string         `json:"projectPath"`
		ManifestPath *string         `json:"manifestPath"`
		Credentials  *GitCredentials `json:"credentials"`
		Select       SelectorField   `json:"select"`
		Exclude      SelectorField   `json:"exclude"`
		Secret       SelectorField   `json:"webhookSecret"`
	}
	if err := httpx.DecodeJSONBody(body, &req); err != nil {
		return IntegrationInput{}, err
	}
	in := IntegrationInput{ProjectPath: req.ProjectPath, ManifestPath: req.ManifestPath, Credentials: req.Credentials, Select: req.Select, Exclude: req.Exclude, WebhookSecret: req.Secret}
	if req.RepoURL != nil {
		in.RepoURL = *req.RepoURL
	}
	if req.Branch != nil {
		in.Branch = *req.Branch
	}
	return in, nil
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
		return false, errs.Invalidf("field \"enabled\" is required")
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
		return 0, errs.Invalidf("query parameter \"version\" must be a positive integer, not %q", raw)
	}
	return v, nil
}

// pushRequest is a push webhook for the deployment of the path.
type pushRequest struct {
	scope
	Req PushRequest
}

// decodePushRequest reads a push webhook: the provider's headers and the raw body
// (413 past the route's limit). A request the gateway vouched for no deployment of is
// the one 401 of every push that cannot be verified.
func decodePushRequest(_ context.Context, r *http.Request) (any, error) {
	p := identity.FromContext(r.Context())
	deploymentID, err := strconv.ParseInt(r.PathValue("deploymentId"), 10, 64)
	if err != nil || p == nil || p.Deployment == nil || p.Deployment.ID != deploymentID {
		return nil, errPushUnauthenticated
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, httpx.JSONError(err)
	}
	req := PushRequest{Body: body}
	switch {
	case r.Header.Get("X-GitHub-Event") != "":
		req.Provider, req.Event = ProviderGitHub, r.Header.Get("X-GitHub-Event")
		req.DeliveryID, req.Signature = r.Header.Get("X-GitHub-Delivery"), r.Header.Get("X-Hub-Signature-256")
	case r.Header.Get("X-Gitlab-Event") != "":
		req.Provider, req.Event = ProviderGitLab, r.Header.Get("X-Gitlab-Event")
		req.DeliveryID, req.Token = r.Header.Get("X-Gitlab-Event-UUID"), r.Header.Get("X-Gitlab-Token")
	}
	if len(req.DeliveryID) > maxDeliveryIDBytes {
		req.DeliveryID = "" // not an id a provider sends: deduplicated by the commit alone
	}
	return pushRequest{scope: scope{P: p, DeploymentID: deploymentID}, Req: req}, nil
}

// maxDeliveryIDBytes bounds a delivery id kept for deduplication (GitHub's and
// GitLab's are UUIDs).
const maxDeliveryIDBytes = 64
