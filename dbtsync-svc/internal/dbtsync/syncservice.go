package dbtsync

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
)

// syncService implements Service over the JetStream pipeline and the branch store.
type syncService struct {
	p           *Pipeline
	store       *Store
	sealer      *Sealer
	repos       RepoPolicy
	refs        *RefLookup
	uploadQuota int64
}

// DefaultDeploymentUploadBytes is the default of DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES.
const DefaultDeploymentUploadBytes = 1 << 30

// NewService builds the Service; git.Policy decides which repository URLs an
// integration may save (and git's limits bound the reference listing of SHA-like refs),
// and uploadQuota bounds the bytes of one deployment's manifests waiting in the object
// store (0: DefaultDeploymentUploadBytes).
func NewService(p *Pipeline, store *Store, sealer *Sealer, git GitLimits, uploadQuota int64) Service {
	if uploadQuota <= 0 {
		uploadQuota = DefaultDeploymentUploadBytes
	}
	return &syncService{p: p, store: store, sealer: sealer, repos: git.Policy, refs: NewRefLookup(sealer, git), uploadQuota: uploadQuota}
}

// deploymentMetaKey names the deployment in an uploaded manifest's object metadata.
const deploymentMetaKey = "deployment"

// uploadedBytes is what the deployment's manifests hold in the object store now.
func (s *syncService) uploadedBytes(ctx context.Context, dep int64) (int64, error) {
	// Bounded: with NATS unreachable the listing would wait for the client's patience; the
	// upload answers 503 at once instead.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	infos, err := s.p.obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	want := strconv.FormatInt(dep, 10)
	var total int64
	for _, in := range infos {
		if strings.HasPrefix(in.Name, "manifest/") && in.Metadata[deploymentMetaKey] == want {
			total += int64(in.Size)
		}
	}
	return total, nil
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
	// The deployment's quota: room is what its manifests in the store leave of quota
	// when the upload starts; an upload past it is refused (refused holds the 413).
	dep     int64
	quota   int64
	room    func() (int64, error)
	left    int64
	refused error
}

func (u *lazyUpload) Write(b []byte) (int, error) {
	if u.refused != nil {
		return 0, u.refused
	}
	if u.pw == nil {
		used, err := u.room()
		if err != nil {
			u.refused = errors.Join(ErrQueueUnavailable, err)
			return 0, u.refused
		}
		u.left = u.quota - used
		pr, pw := io.Pipe()
		u.pw, u.bw, u.done = pw, bufio.NewWriterSize(pw, 128<<10), make(chan error, 1)
		meta := jetstream.ObjectMeta{Name: u.name, Metadata: map[string]string{deploymentMetaKey: strconv.FormatInt(u.dep, 10)}}
		go func() {
			_, err := u.obj.Put(u.ctx, meta, pr)
			pr.CloseWithError(err)
			u.done <- err
		}()
	}
	if u.written+int64(len(b)) > u.left {
		u.refused = httpx.Errorf(http.StatusRequestEntityTooLarge,
			"the manifests of deployment %d waiting to be converted would pass %d bytes (DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES); retry when its queued syncs have run", u.dep, u.quota)
		return 0, u.refused
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

func (s *syncService) StartSync(ctx context.Context, p *identity.Principal, dep int64, body SyncRequestBody) (SyncAccepted, error) {
	var res SyncAccepted
	if err := authorize(p, roleSync); err != nil {
		return res, err
	}
	now := time.Now().UTC()
	id := newSyncJobID(now)
	upload := &lazyUpload{ctx: ctx, obj: s.p.obj, name: manifestObject(id), dep: dep, quota: s.uploadQuota,
		room: func() (int64, error) { return s.uploadedBytes(ctx, dep) }}
	req, err := body(upload)
	keepManifest := err == nil && req.Source == "manifest"
	uploaded, uerr := upload.finish(keepManifest)
	if upload.refused != nil {
		return res, upload.refused
	}
	if err != nil {
		return res, err
	}
	if uerr != nil {
		return res, errors.Join(ErrQueueUnavailable, uerr)
	}
	if keepManifest {
		res.ManifestBytes = upload.written
	}
	production := p.Deployment.ProductionBranch
	rollback := func() {
		if keepManifest && uploaded {
			_ = s.p.obj.Delete(context.WithoutCancel(ctx), manifestObject(id))
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
		integ, err := s.store.integration(ctx, dep)
		if errors.Is(err, ErrNotFound) {
			return res, invalid("source \"git\" needs a dbt git integration: save one with PUT /api/v1/deployments/%d/dbt-git-integration, or send source \"manifest\" with the manifest", dep)
		}
		if err != nil {
			return res, err
		}
		if branch == "" {
			branch = derivedBranchName(integ.Branch)
		}
		// A ref made only of hex digits may be a branch or tag (a date tag, a build
		// number) or a commit SHA, which the spec refuses: ask the repository. When it
		// cannot be asked, the job finds out and fails naming the ref.
		if req.Ref != nil && shaRE.MatchString(*req.Ref) {
			ok, err := s.refs.Exists(ctx, integ, *req.Ref)
			if err == nil && !ok {
				return res, invalid("field \"ref\": %q is neither a branch nor a tag of the repository at %s (a commit SHA is not accepted)", *req.Ref, repoHost(integ.RepoURL))
			}
		}
	} else if branch == "" {
		branch = "dbt/manifest"
	}
	if branch == production && !p.HasRole(identity.RoleAdmin) {
		rollback()
		return res, forbidden("only admins may sync into the production branch %q", production)
	}
	job := &jobRecord{SyncJobID: id, DeploymentID: dep, Status: StatusQueued, Source: req.Source, Output: req.Output,
		Ref: req.Ref, BranchName: branch, WorkflowID: "dbt-sync-" + id, Progress: Progress{Phase: "queued"},
		Warnings: []convert.Warning{}, CreatedAt: httpx.At(now), ProductionBranch: production, HasManifest: keepManifest,
		AccountID: p.Account.ID, StartedBy: p.User.ID, RequestID: logging.RequestID(ctx)}
	if req.Source != "git" {
		job.Ref = nil
	}
	if err := s.p.enqueue(ctx, job); err != nil {
		rollback()
		return res, err
	}
	res.BranchName, res.SyncJobID, res.WorkflowID, res.Source = branch, id, job.WorkflowID, req.Source
	return res, nil
}

func jobView(j *jobRecord) SyncJob {
	v := SyncJob{SyncJobID: j.SyncJobID, DeploymentID: j.DeploymentID, Status: j.Status, Source: j.Source, Output: j.Output,
		Ref: j.Ref, BranchName: j.BranchName, WorkflowID: j.WorkflowID, Progress: j.Progress, Attempts: j.Attempts, Warnings: j.Warnings,
		CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Changed: j.Changed,
		CancelRequested: j.CancelRequested && !j.terminal()}
	if j.RetryOf != "" {
		r := j.RetryOf
		v.RetryOf = &r
	}
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

func (s *syncService) GetJob(ctx context.Context, p *identity.Principal, dep int64, id string) (SyncJob, error) {
	if err := authorize(p, roleSync); err != nil {
		return SyncJob{}, err
	}
	if !validJobID(id) {
		return SyncJob{}, notFound("sync job %q not found", id)
	}
	j, _, err := s.p.getJob(ctx, dep, id)
	if errors.Is(err, ErrNotFound) {
		return SyncJob{}, notFound("sync job %q not found", id)
	}
	if err != nil {
		return SyncJob{}, err
	}
	v := jobView(j)
	if j.Output == "files" && j.Status == StatusSucceeded {
		b, err := s.p.obj.GetBytes(ctx, resultObject(id))
		if err != nil {
			return SyncJob{}, errors.Join(ErrQueueUnavailable, err)
		}
		if err := json.Unmarshal(b, &v.Files); err != nil {
			return SyncJob{}, err
		}
		if v.Files == nil {
			v.Files = []convert.File{}
		}
	}
	return v, nil
}

func (s *syncService) CancelJob(ctx context.Context, p *identity.Principal, dep int64, id string) (SyncJob, error) {
	if err := authorize(p, roleSync); err != nil {
		return SyncJob{}, err
	}
	if !validJobID(id) {
		return SyncJob{}, notFound("sync job %q not found", id)
	}
	dequeued := false
	j, err := s.p.updateJob(ctx, dep, id, func(j *jobRecord) error {
		dequeued = false
		if j.terminal() {
			return conflict("sync job %s is already %s", id, j.Status)
		}
		j.CanceledBy = p.User.ID
		if j.Status == StatusQueued { // never started, or waiting between attempts: no worker holds it
			now := time.Now().UTC()
			j.Status, j.FinishedAt, j.Progress.Phase, j.Error = StatusCanceled, httpx.AtPtr(&now), "done", nil
			dequeued = true
			return nil
		}
		j.CancelRequested = true // the worker stops at its next model
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return SyncJob{}, notFound("sync job %q not found", id)
	}
	if err != nil {
		return SyncJob{}, err
	}
	if dequeued {
		// Let the branch's next job go; the queue message is acknowledged by the worker
		// that receives it and finds the job over.
		_, _ = s.p.updateQueue(context.WithoutCancel(ctx), queueKey(dep, j.BranchName), func(ids []string) []string { return removeID(ids, id) })
	}
	return jobView(j), nil
}

func (s *syncService) RetryJob(ctx context.Context, p *identity.Principal, dep int64, id string) (SyncAccepted, error) {
	var res SyncAccepted
	if err := authorize(p, roleSync); err != nil {
		return res, err
	}
	if !validJobID(id) {
		return res, notFound("sync job %q not found", id)
	}
	old, _, err := s.p.getJob(ctx, dep, id)
	if errors.Is(err, ErrNotFound) {
		return res, notFound("sync job %q not found", id)
	}
	if err != nil {
		return res, err
	}
	if !old.terminal() {
		return res, conflict("sync job %s is still %s: wait for it to finish, or cancel it, before retrying", id, old.Status)
	}
	production := p.Deployment.ProductionBranch
	if old.BranchName == production && !p.HasRole(identity.RoleAdmin) {
		return res, forbidden("only admins may sync into the production branch %q", production)
	}
	if old.Source == "git" {
		if _, err := s.store.integration(ctx, dep); errors.Is(err, ErrNotFound) {
			return res, invalid("source \"git\" needs a dbt git integration: save one with PUT /api/v1/deployments/%d/dbt-git-integration", dep)
		} else if err != nil {
			return res, err
		}
	}
	manifestOf := ""
	if old.HasManifest {
		manifestOf = old.SyncJobID
		if old.ManifestOf != "" {
			manifestOf = old.ManifestOf
		}
		if _, err := s.p.obj.GetInfo(ctx, manifestObject(manifestOf)); errors.Is(err, jetstream.ErrObjectNotFound) {
			return res, conflict("the manifest of sync job %s is no longer stored (a manifest is kept after a failed or canceled job until DBT_SYNC_OBJECT_MAX_AGE, and removed after a successful one): start a new sync with it", id)
		} else if err != nil {
			return res, errors.Join(ErrQueueUnavailable, err)
		}
	}
	now := time.Now().UTC()
	nid := newSyncJobID(now)
	job := &jobRecord{SyncJobID: nid, DeploymentID: dep, Status: StatusQueued, Source: old.Source, Output: old.Output,
		Ref: old.Ref, BranchName: old.BranchName, WorkflowID: "dbt-sync-" + nid, Progress: Progress{Phase: "queued"},
		Warnings: []convert.Warning{}, CreatedAt: httpx.At(now), ProductionBranch: production, HasManifest: old.HasManifest,
		ManifestOf: manifestOf, RetryOf: id, AccountID: p.Account.ID, StartedBy: p.User.ID, RequestID: logging.RequestID(ctx)}
	if err := s.p.enqueue(ctx, job); err != nil {
		return res, err
	}
	return SyncAccepted{BranchName: job.BranchName, SyncJobID: nid, WorkflowID: job.WorkflowID, Source: job.Source}, nil
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

// paginate pages items (in list order) after the item whose key is the cursor.
func paginate[T any](items []T, key func(T) string, pg PageRequest) (Page[T], error) {
	start := 0
	if pg.After != "" {
		start = -1
		for i, it := range items {
			if key(it) == pg.After {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return Page[T]{}, invalid("after is not a cursor returned by this list")
		}
	}
	end := min(start+pg.First, len(items))
	out := Page[T]{Items: items[start:end]}
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

func (s *syncService) ListJobs(ctx context.Context, p *identity.Principal, dep int64, pg PageRequest) (Page[SyncJob], error) {
	if err := authorize(p, roleSync); err != nil {
		return Page[SyncJob]{}, err
	}
	ids, err := s.p.listJobs(ctx, dep)
	if err != nil {
		return Page[SyncJob]{}, err
	}
	idPage, err := paginate(ids, func(s string) string { return s }, pg)
	if err != nil {
		return Page[SyncJob]{}, err
	}
	out := Page[SyncJob]{Items: make([]SyncJob, 0, len(idPage.Items)), PageInfo: idPage.PageInfo}
	for _, id := range idPage.Items {
		j, _, err := s.p.getJob(ctx, dep, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Page[SyncJob]{}, err
		}
		out.Items = append(out.Items, jobView(j))
	}
	return out, nil
}

func integrationView(d *integrationDoc) DbtGitIntegration {
	v := DbtGitIntegration{DeploymentID: d.DeploymentID, RepoURL: d.RepoURL, Branch: d.Branch, ProjectPath: d.ProjectPath,
		HasCredentials: len(d.Credentials) > 0, UpdatedAt: httpx.At(d.UpdatedAt.UTC())}
	if d.ManifestPath != "" {
		mp := d.ManifestPath
		v.ManifestPath = &mp
	}
	return v
}

func (s *syncService) PutIntegration(ctx context.Context, p *identity.Principal, dep int64, in IntegrationInput) (DbtGitIntegration, error) {
	if err := authorize(p, roleIntegration); err != nil {
		return DbtGitIntegration{}, err
	}
	if err := s.repos.CheckURL(ctx, in.RepoURL); err != nil {
		return DbtGitIntegration{}, badRequest("field \"repoUrl\": %s", strings.TrimPrefix(err.Error(), errRefusedHost.Error()+": "))
	}
	d := integrationDoc{DeploymentID: dep, RepoURL: in.RepoURL, Branch: in.Branch, ProjectPath: in.ProjectPath, UpdatedAt: time.Now().UTC()}
	if in.ManifestPath != nil {
		d.ManifestPath = *in.ManifestPath
	}
	if in.Credentials != nil {
		plain, _ := json.Marshal(in.Credentials)
		d.Credentials = s.sealer.Seal(plain, dep)
	}
	// As for a sync's ref: a hex-only name is accepted when the repository has it.
	if shaRE.MatchString(d.Branch) {
		if ok, err := s.refs.Exists(ctx, &d, d.Branch); err == nil && !ok {
			return DbtGitIntegration{}, badRequest("field \"branch\": %q is neither a branch nor a tag of the repository at %s (a commit SHA is not accepted)", d.Branch, repoHost(d.RepoURL))
		}
	}
	if err := s.store.saveIntegration(ctx, d); err != nil {
		return DbtGitIntegration{}, err
	}
	return integrationView(&d), nil
}

func (s *syncService) GetIntegration(ctx context.Context, p *identity.Principal, dep int64) (DbtGitIntegration, error) {
	if err := authorize(p, roleIntegration); err != nil {
		return DbtGitIntegration{}, err
	}
	d, err := s.store.integration(ctx, dep)
	if errors.Is(err, ErrNotFound) {
		return DbtGitIntegration{}, notFound("deployment %d has no dbt git integration", dep)
	}
	if err != nil {
		return DbtGitIntegration{}, err
	}
	return integrationView(d), nil
}

// branchError names the branch when the store did not find it.
func branchError(name string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return notFound("branch %q not found", name)
	}
	return err
}

func (s *syncService) ListBranches(ctx context.Context, p *identity.Principal, dep int64, pg PageRequest) (Page[Branch], error) {
	if err := authorize(p, roleBranches); err != nil {
		return Page[Branch]{}, err
	}
	all, err := s.store.Branches(ctx, dep, p.Deployment.ProductionBranch)
	if err != nil {
		return Page[Branch]{}, err
	}
	return paginate(all, func(b Branch) string { return b.Name }, pg)
}

func (s *syncService) GetBranch(ctx context.Context, p *identity.Principal, dep int64, name string) (Branch, error) {
	if err := authorize(p, roleBranches); err != nil {
		return Branch{}, err
	}
	b, err := s.store.Branch(ctx, dep, name, p.Deployment.ProductionBranch)
	return b, branchError(name, err)
}

func (s *syncService) ListFiles(ctx context.Context, p *identity.Principal, dep int64, name string, version int64) (FileList, error) {
	if err := authorize(p, roleBranches); err != nil {
		return FileList{}, err
	}
	v, files, err := s.store.Files(ctx, dep, name, version, "", false)
	if err != nil {
		return FileList{}, branchError(name, err)
	}
	out := FileList{BranchName: name, Version: v, Files: make([]FileEntry, 0, len(files))}
	for _, f := range files {
		out.Files = append(out.Files, FileEntry{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	return out, nil
}

func (s *syncService) GetFile(ctx context.Context, p *identity.Principal, dep int64, name, path string, version int64) (FileContent, error) {
	if err := authorize(p, roleBranches); err != nil {
		return FileContent{}, err
	}
	v, files, err := s.store.Files(ctx, dep, name, version, path, true)
	if err == nil && len(files) == 0 {
		return FileContent{}, notFound("file %q not found in branch %q", path, name)
	}
	if err != nil {
		return FileContent{}, branchError(name, err)
	}
	return FileContent{BranchName: name, Version: v, Path: path, Content: files[0].Content}, nil
}

func (s *syncService) ListVersions(ctx context.Context, p *identity.Principal, dep int64, name string, pg PageRequest) (Page[BranchVersion], error) {
	if err := authorize(p, roleBranches); err != nil {
		return Page[BranchVersion]{}, err
	}
	vs, err := s.store.Versions(ctx, dep, name)
	if err != nil {
		return Page[BranchVersion]{}, branchError(name, err)
	}
	return paginate(vs, func(v BranchVersion) string { return strconv.FormatInt(v.Version, 10) }, pg)
}

func (s *syncService) OpenBranch(ctx context.Context, p *identity.Principal, dep int64, name string) (Branch, error) {
	if err := authorize(p, roleBranches); err != nil {
		return Branch{}, err
	}
	b, err := s.store.Open(ctx, dep, name, p.Deployment.ProductionBranch)
	return b, branchError(name, err)
}

func (s *syncService) SetStaging(ctx context.Context, p *identity.Principal, dep int64, name string, enabled bool) (Branch, error) {
	if err := authorize(p, roleBranches); err != nil {
		return Branch{}, err
	}
	prod := p.Deployment.ProductionBranch
	if name == prod {
		return Branch{}, invalid("branch %q is the production branch, which is always served", name)
	}
	b, err := s.store.SetStaging(ctx, dep, name, prod, enabled)
	return b, branchError(name, err)
}
