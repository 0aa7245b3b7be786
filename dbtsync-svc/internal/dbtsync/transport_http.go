package dbtsync

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// API serves the dbt sync and /build routes.
type API struct {
	p            *Pipeline
	store        *Store
	sealer       *Sealer
	metrics      *Metrics
	logger       *slog.Logger
	maxBodyBytes int64
}

// NewHTTPHandler returns the routes; wrap it with identity.Require.
func NewHTTPHandler(p *Pipeline, store *Store, sealer *Sealer, metrics *Metrics, logger *slog.Logger, maxBodyBytes int64) http.Handler {
	a := &API{p: p, store: store, sealer: sealer, metrics: metrics, logger: logger, maxBodyBytes: maxBodyBytes}
	mux := http.NewServeMux()
	const dep = "/api/v1/deployments/{deploymentId}"
	mux.HandleFunc("POST "+dep+"/dbt-sync", a.startSync)
	mux.HandleFunc("GET "+dep+"/dbt-sync", a.listJobs)
	mux.HandleFunc("GET "+dep+"/dbt-sync/{syncJobId}", a.getJob)
	mux.HandleFunc("GET "+dep+"/dbt-git-integration", a.getIntegration)
	mux.HandleFunc("PUT "+dep+"/dbt-git-integration", a.putIntegration)
	const build = "/build/api/v1/deployments/{deploymentId}/branches"
	mux.HandleFunc("GET "+build, a.listBranches)
	mux.HandleFunc("GET "+build+"/{branchName}", a.getBranch)
	mux.HandleFunc("GET "+build+"/{branchName}/files", a.listFiles)
	mux.HandleFunc("GET "+build+"/{branchName}/files/{path...}", a.getFile)
	mux.HandleFunc("GET "+build+"/{branchName}/versions", a.listVersions)
	mux.HandleFunc("POST "+build+"/{branchName}/open", a.openBranch)
	mux.HandleFunc("PUT "+build+"/{branchName}/staging", a.setStaging)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrQueueUnavailable):
		a.logger.WarnContext(r.Context(), "job queue unavailable", "err", err)
		httpx.WriteError(w, http.StatusServiceUnavailable, "the dbt sync job queue (NATS) is unavailable; retry shortly")
	case errors.Is(err, ErrUnavailable):
		a.logger.WarnContext(r.Context(), "dependency unavailable", "err", err)
		httpx.WriteError(w, http.StatusServiceUnavailable, "a dependency of dbtsync-svc is unavailable; retry shortly")
	default:
		httpx.WriteErr(w, r, a.logger, err)
	}
}

// caller checks the role and the path's deployment; it returns the deployment.
func (a *API) caller(r *http.Request, role string) (*identity.Principal, int64, error) {
	dep, err := identity.DeploymentFromPath(r)
	if err != nil {
		return nil, 0, err
	}
	p := identity.FromContext(r.Context())
	if p.User == nil || !p.HasRole(role) {
		return nil, 0, httpx.Errorf(http.StatusForbidden, "requires the %s role or higher", role)
	}
	return p, dep, nil
}

// DbtSyncAccepted is the 202 body.
type DbtSyncAccepted struct {
	BranchName string `json:"branchName"`
	SyncJobID  string `json:"syncJobId"`
	WorkflowID string `json:"workflowId"`
}

// lazyUpload starts an object-store upload on the first write: most requests carry no
// manifest, and those should not touch the store.
type lazyUpload struct {
	ctx     context.Context
	obj     jetstream.ObjectStore
	name    string
	pw      *io.PipeWriter
	bw      *bufio.Writer
	done    chan error
	written int64
}

func (u *lazyUpload) Write(b []byte) (int, error) {
	if u.pw == nil {
		pr, pw := io.Pipe()
		u.pw, u.bw, u.done = pw, bufio.NewWriterSize(pw, 128<<10), make(chan error, 1)
		go func() {
			_, err := u.obj.Put(u.ctx, jetstream.ObjectMeta{Name: u.name}, pr)
			pr.CloseWithError(err)
			u.done <- err
		}()
	}
	n, err := u.bw.Write(b)
	u.written += int64(n)
	return n, err
}

// finish completes (ok) or aborts the upload and reports whether one was made.
func (u *lazyUpload) finish(ok bool) (bool, error) {
	if u.pw == nil {
		return false, nil
	}
	if ok {
		if err := u.bw.Flush(); err != nil {
			u.pw.CloseWithError(err)
			<-u.done
			return true, err
		}
		u.pw.Close()
		return true, <-u.done
	}
	u.pw.CloseWithError(errors.New("upload aborted"))
	<-u.done
	_ = u.obj.Delete(context.WithoutCancel(u.ctx), u.name)
	return true, nil
}

func (a *API) startSync(w http.ResponseWriter, r *http.Request) {
	p, dep, err := a.caller(r, identity.RoleDeveloper)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := httpx.RequireJSON(r); err != nil {
		a.fail(w, r, err)
		return
	}
	now := time.Now().UTC()
	id := newSyncJobID(now)
	upload := &lazyUpload{ctx: r.Context(), obj: a.p.obj, name: manifestObject(id)}
	req, err := decodeStartSyncRequest(http.MaxBytesReader(w, r.Body, a.maxBodyBytes), upload)
	keepManifest := err == nil && req.Source == "manifest"
	uploaded, uerr := upload.finish(keepManifest)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if uerr != nil {
		a.fail(w, r, errors.Join(ErrQueueUnavailable, uerr))
		return
	}
	if keepManifest {
		a.metrics.Uploaded.Add(float64(upload.written))
	}
	production := p.Deployment.ProductionBranch
	rollback := func() {
		if keepManifest && uploaded {
			_ = a.p.obj.Delete(context.WithoutCancel(r.Context()), manifestObject(id))
		}
	}
	var branch string
	switch {
	case req.BranchName != nil:
		branch = *req.BranchName
	case req.Ref != nil:
		branch = derivedBranchName(*req.Ref)
	}
	if req.Source == "git" {
		integ, err := a.store.integration(r.Context(), dep)
		if errors.Is(err, ErrNotFound) {
			a.fail(w, r, badRequest("source \"git\" needs a dbt git integration: save one with PUT /api/v1/deployments/%d/dbt-git-integration, or send source \"manifest\" with the manifest", dep))
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if branch == "" {
			branch = derivedBranchName(integ.Branch)
		}
	} else if branch == "" {
		branch = "dbt/manifest"
	}
	if branch == production && !p.HasRole(identity.RoleAdmin) {
		rollback()
		a.fail(w, r, httpx.Errorf(http.StatusForbidden, "only admins may sync into the production branch %q", production))
		return
	}
	job := &jobRecord{SyncJobID: id, DeploymentID: dep, Status: StatusQueued, Source: req.Source, Output: req.Output,
		Ref: req.Ref, BranchName: branch, WorkflowID: "dbt-sync-" + id, Progress: Progress{Phase: "queued"},
		Warnings: []convert.Warning{}, CreatedAt: now, ProductionBranch: production, HasManifest: keepManifest}
	if req.Source != "git" {
		job.Ref = nil
	}
	if err := a.p.enqueue(r.Context(), job); err != nil {
		rollback()
		a.fail(w, r, err)
		return
	}
	a.metrics.Queued.WithLabelValues(req.Source).Inc()
	httpx.WriteJSON(w, http.StatusAccepted, DbtSyncAccepted{BranchName: branch, SyncJobID: id, WorkflowID: job.WorkflowID})
}

// SyncJob is the job as the API shows it.
type SyncJob struct {
	SyncJobID    string            `json:"syncJobId"`
	DeploymentID int64             `json:"deploymentId"`
	Status       string            `json:"status"`
	Source       string            `json:"source"`
	Output       string            `json:"output"`
	Ref          *string           `json:"ref"`
	BranchName   string            `json:"branchName"`
	WorkflowID   string            `json:"workflowId"`
	Progress     Progress          `json:"progress"`
	Attempts     int               `json:"attempts"`
	Error        *string           `json:"error"`
	Warnings     []convert.Warning `json:"warnings"`
	CreatedAt    time.Time         `json:"createdAt"`
	StartedAt    *time.Time        `json:"startedAt"`
	FinishedAt   *time.Time        `json:"finishedAt"`
	Files        []convert.File    `json:"files,omitempty"`
}

func jobView(j *jobRecord) SyncJob {
	v := SyncJob{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID, Status: j.Status, Source: j.Source, Output: j.Output,
		Ref: j.Ref, BranchName: j.BranchName, WorkflowID: j.WorkflowID, Progress: j.Progress, Attempts: j.Attempts, Warnings: j.Warnings,
		CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt}
	if j.Status != StatusFailed {
		v.Error = nil
	} else {
		v.Error = j.Error
	}
	if v.Warnings == nil {
		v.Warnings = []convert.Warning{}
	}
	return v
}

func (a *API) getJob(w http.ResponseWriter, r *http.Request) {
	_, dep, err := a.caller(r, identity.RoleDeveloper)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	id := r.PathValue("syncJobId")
	if !validJobID(id) {
		a.fail(w, r, httpx.Errorf(http.StatusNotFound, "sync job %q not found", id))
		return
	}
	j, _, err := a.p.getJob(r.Context(), dep, id)
	if errors.Is(err, ErrNotFound) {
		a.fail(w, r, httpx.Errorf(http.StatusNotFound, "sync job %q not found", id))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v := jobView(j)
	if j.Output == "files" && j.Status == StatusSucceeded {
		b, err := a.p.obj.GetBytes(r.Context(), resultObject(id))
		if err != nil {
			a.fail(w, r, errors.Join(ErrQueueUnavailable, err))
			return
		}
		if err := json.Unmarshal(b, &v.Files); err != nil {
			a.fail(w, r, err)
			return
		}
		if v.Files == nil {
			v.Files = []convert.File{}
		}
	}
	httpx.WriteJSON(w, http.StatusOK, v)
}

func validJobID(id string) bool {
	if len(id) != 30 || !strings.HasPrefix(id, "sj") {
		return false
	}
	for _, c := range id[2:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

type pageInfo struct {
	HasNextPage bool    `json:"hasNextPage"`
	EndCursor   *string `json:"endCursor"`
}

type page[T any] struct {
	Items    []T      `json:"items"`
	PageInfo pageInfo `json:"pageInfo"`
}

// pageParams reads first (1 to 200, default 50) and after (an opaque cursor).
func pageParams(r *http.Request) (int, string, error) {
	first := 50
	if raw := r.URL.Query().Get("first"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 200 {
			return 0, "", badRequest("query parameter \"first\" must be an integer from 1 to 200, not %q", raw)
		}
		first = n
	}
	after := ""
	if raw := r.URL.Query().Get("after"); raw != "" {
		b, err := base64.RawURLEncoding.DecodeString(raw)
		if err != nil || len(b) == 0 {
			return 0, "", badRequest("query parameter \"after\" is not a cursor returned by this list")
		}
		after = string(b)
	}
	return first, after, nil
}

// paginate pages keys (in list order) after the cursor key.
func paginate[T any](items []T, key func(T) string, first int, after string) (page[T], error) {
	start := 0
	if after != "" {
		start = -1
		for i, it := range items {
			if key(it) == after {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return page[T]{}, badRequest("query parameter \"after\" is not a cursor returned by this list")
		}
	}
	end := min(start+first, len(items))
	out := page[T]{Items: items[start:end]}
	if out.Items == nil {
		out.Items = []T{}
	}
	if end < len(items) {
		out.PageInfo.HasNextPage = true
	}
	if end > start {
		c := base64.RawURLEncoding.EncodeToString([]byte(key(items[end-1])))
		out.PageInfo.EndCursor = &c
	}
	return out, nil
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request) {
	_, dep, err := a.caller(r, identity.RoleDeveloper)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	first, after, err := pageParams(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ids, err := a.p.listJobs(r.Context(), dep)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	pg, err := paginate(ids, func(s string) string { return s }, first, after)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := page[SyncJob]{Items: make([]SyncJob, 0, len(pg.Items)), PageInfo: pg.PageInfo}
	for _, id := range pg.Items {
		j, _, err := a.p.getJob(r.Context(), dep, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		out.Items = append(out.Items, jobView(j))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// DbtGitIntegration is the saved integration as the API shows it (never the credentials).
type DbtGitIntegration struct {
	DeploymentID   int64     `json:"deploymentId"`
	RepoURL        string    `json:"repoUrl"`
	Branch         string    `json:"branch"`
	ProjectPath    string    `json:"projectPath"`
	ManifestPath   *string   `json:"manifestPath"`
	HasCredentials bool      `json:"hasCredentials"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

func integrationView(d *integrationDoc) DbtGitIntegration {
	v := DbtGitIntegration{DeploymentID: d.DeploymentID, RepoURL: d.RepoURL, Branch: d.Branch, ProjectPath: d.ProjectPath,
		HasCredentials: len(d.Credentials) > 0, UpdatedAt: d.UpdatedAt.UTC()}
	if d.ManifestPath != "" {
		mp := d.ManifestPath
		v.ManifestPath = &mp
	}
	return v
}

type integrationRequest struct {
	RepoURL      *string         `json:"repoUrl"`
	Branch       *string         `json:"branch"`
	ProjectPath  *string         `json:"projectPath"`
	ManifestPath *string         `json:"manifestPath"`
	Credentials  *gitCredentials `json:"credentials"`
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
	case !validRef(*req.Branch) || shaRE.MatchString(*req.Branch):
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

func (a *API) putIntegration(w http.ResponseWriter, r *http.Request) {
	_, dep, err := a.caller(r, identity.RoleAdmin)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := httpx.RequireJSON(r); err != nil {
		a.fail(w, r, err)
		return
	}
	req, err := decodeIntegrationRequest(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d := integrationDoc{DeploymentID: dep, RepoURL: *req.RepoURL, Branch: *req.Branch, ProjectPath: *req.ProjectPath, UpdatedAt: time.Now().UTC()}
	if req.ManifestPath != nil {
		d.ManifestPath = *req.ManifestPath
	}
	if req.Credentials != nil {
		plain, _ := json.Marshal(req.Credentials)
		d.Credentials = a.sealer.Seal(plain, dep)
	}
	if err := a.store.saveIntegration(r.Context(), d); err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, integrationView(&d))
}

func (a *API) getIntegration(w http.ResponseWriter, r *http.Request) {
	_, dep, err := a.caller(r, identity.RoleAdmin)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.store.integration(r.Context(), dep)
	if errors.Is(err, ErrNotFound) {
		a.fail(w, r, httpx.Errorf(http.StatusNotFound, "deployment %d has no dbt git integration", dep))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, integrationView(d))
}

func (a *API) branchCaller(w http.ResponseWriter, r *http.Request) (int64, string, string, bool) {
	p, dep, err := a.caller(r, identity.RoleDeveloper)
	if err != nil {
		a.fail(w, r, err)
		return 0, "", "", false
	}
	return dep, r.PathValue("branchName"), p.Deployment.ProductionBranch, true
}

func (a *API) branchNotFound(w http.ResponseWriter, r *http.Request, name string, err error) {
	if errors.Is(err, ErrNotFound) {
		a.fail(w, r, httpx.Errorf(http.StatusNotFound, "branch %q not found", name))
		return
	}
	a.fail(w, r, err)
}

func (a *API) listBranches(w http.ResponseWriter, r *http.Request) {
	p, dep, err := a.caller(r, identity.RoleDeveloper)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	first, after, err := pageParams(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	all, err := a.store.Branches(r.Context(), dep, p.Deployment.ProductionBranch)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	pg, err := paginate(all, func(b Branch) string { return b.Name }, first, after)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, pg)
}

func (a *API) getBranch(w http.ResponseWriter, r *http.Request) {
	dep, name, prod, ok := a.branchCaller(w, r)
	if !ok {
		return
	}
	b, err := a.store.Branch(r.Context(), dep, name, prod)
	if err != nil {
		a.branchNotFound(w, r, name, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, b)
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

type fileEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func (a *API) listFiles(w http.ResponseWriter, r *http.Request) {
	dep, name, _, ok := a.branchCaller(w, r)
	if !ok {
		return
	}
	version, err := versionParam(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, files, err := a.store.Files(r.Context(), dep, name, version, "", false)
	if err != nil {
		a.branchNotFound(w, r, name, err)
		return
	}
	out := struct {
		BranchName string      `json:"branchName"`
		Version    int64       `json:"version"`
		Files      []fileEntry `json:"files"`
	}{name, v, make([]fileEntry, 0, len(files))}
	for _, f := range files {
		out.Files = append(out.Files, fileEntry{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (a *API) getFile(w http.ResponseWriter, r *http.Request) {
	dep, name, _, ok := a.branchCaller(w, r)
	if !ok {
		return
	}
	path := r.PathValue("path")
	for _, seg := range strings.Split(path, "/") {
		if seg == ".." || seg == "." || seg == "" {
			a.fail(w, r, badRequest("file path %q must be relative, without empty, '.' or '..' segments", path))
			return
		}
	}
	version, err := versionParam(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, files, err := a.store.Files(r.Context(), dep, name, version, path, true)
	if err == nil && len(files) == 0 {
		a.fail(w, r, httpx.Errorf(http.StatusNotFound, "file %q not found in branch %q", path, name))
		return
	}
	if err != nil {
		a.branchNotFound(w, r, name, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"branchName": name, "version": v, "path": path, "content": files[0].Content})
}

func (a *API) listVersions(w http.ResponseWriter, r *http.Request) {
	dep, name, _, ok := a.branchCaller(w, r)
	if !ok {
		return
	}
	first, after, err := pageParams(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	vs, err := a.store.Versions(r.Context(), dep, name)
	if err != nil {
		a.branchNotFound(w, r, name, err)
		return
	}
	pg, err := paginate(vs, func(v BranchVersion) string { return strconv.FormatInt(v.Version, 10) }, first, after)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, pg)
}

func (a *API) openBranch(w http.ResponseWriter, r *http.Request) {
	dep, name, prod, ok := a.branchCaller(w, r)
	if !ok {
		return
	}
	b, err := a.store.Open(r.Context(), dep, name, prod)
	if err != nil {
		a.branchNotFound(w, r, name, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, b)
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

func (a *API) setStaging(w http.ResponseWriter, r *http.Request) {
	dep, name, prod, ok := a.branchCaller(w, r)
	if !ok {
		return
	}
	if err := httpx.RequireJSON(r); err != nil {
		a.fail(w, r, err)
		return
	}
	enabled, err := decodeStagingRequest(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if name == prod {
		a.fail(w, r, badRequest("branch %q is the production branch, which is always served", name))
		return
	}
	b, err := a.store.SetStaging(r.Context(), dep, name, prod, enabled)
	if err != nil {
		a.branchNotFound(w, r, name, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, b)
}
