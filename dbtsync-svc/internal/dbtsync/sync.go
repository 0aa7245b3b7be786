package dbtsync

import (
	"context"
	"errors"
	"net/http"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
)

// validate applies the start-sync rules that need the whole request, in the order the
// client is told about them.
func (in StartSyncInput) validate() error {
	switch {
	case in.Source == SourceManifest && !in.HasManifest:
		return errs.Invalidf("field \"manifest\" is required when \"source\" is \"manifest\"")
	case in.Ref != nil && *in.Ref == "":
		return errs.Invalidf("field \"ref\" must not be empty")
	case in.Ref != nil && !ValidRef(*in.Ref):
		return errs.Invalidf("field \"ref\" is not a valid git branch or tag name")
	case in.BranchName != nil && !validBranchName(*in.BranchName):
		return errs.Invalidf("field \"branchName\" must be 1 to 200 characters of letters, digits, '-', '_', '.', '/', with no '..' and no leading or trailing '/'")
	case in.Source == SourceManifest && in.SchemaVersion == 0:
		return errs.Invalidf("field \"manifest\" has no metadata.dbt_schema_version: a dbt manifest (schema v7 to v12, or v20) is required")
	}
	return nil
}

func (s *service) StartSync(ctx context.Context, p *identity.Principal, deploymentID int64, body SyncRequestBody) (SyncStarted, error) {
	var res SyncStarted
	if err := authorize(p, roleSync); err != nil {
		return res, err
	}
	queue := QueueKey{Account: p.Account.ID, Deployment: deploymentID}
	if err := s.queueHasRoom(ctx, queue); err != nil {
		return res, err
	}
	id := NewSyncJobID(s.now().UTC())
	in, charge, err := s.receive(ctx, queue, id, body, &res)
	if err != nil {
		return res, err
	}
	kept := charge.Stored > 0
	// The upload (if any) is kept from here on: any refusal removes it.
	rollback := func(err error) (SyncStarted, error) {
		if kept {
			bg := context.WithoutCancel(ctx)
			if deleted, _ := s.Manifests.DeleteManifest(bg, id); deleted {
				_ = s.storage.Free(bg, queue.Account, deploymentID, charge)
			}
		}
		return res, err
	}
	branch, err := s.targetBranch(ctx, deploymentID, in)
	if err != nil {
		return rollback(err)
	}
	production := p.Deployment.ProductionBranch
	if branch == production && !p.HasRole(identity.RoleAdmin) {
		return rollback(errs.Forbiddenf("only admins may sync into the production branch %q", production))
	}
	sel, excl, err := s.syncSelector(ctx, deploymentID, in)
	if err != nil {
		return rollback(err)
	}
	job := s.newJob(ctx, p, deploymentID, id, Job{Source: in.Source, Output: in.Output, Ref: in.Ref, BranchName: branch, HasManifest: kept, ManifestCharge: charge,
		Select: sel, Exclude: excl})
	if in.Source != SourceGit {
		job.Ref = nil
	}
	if err := s.enqueue(ctx, job); err != nil {
		return rollback(err)
	}
	res.Accepted = SyncAccepted{BranchName: branch, SyncJobID: id, WorkflowID: job.WorkflowID}
	res.Source = in.Source
	return res, nil
}

// receive reads the request with body, streaming its manifest into the store as the
// upload of job id, and validates it; an upload that stays (a valid manifest sync's)
// returns its charge in the storage ledgers (zero for none). res.ManifestBytes counts
// it.
func (s *service) receive(ctx context.Context, queue QueueKey, id string, body SyncRequestBody, res *SyncStarted) (StartSyncInput, Charge, error) {
	upload := s.newUpload(ctx, queue.Account, queue.Deployment, id)
	in, err := body(upload)
	if err == nil {
		err = in.validate()
	}
	keep := err == nil && in.Source == SourceManifest
	uerr := upload.finish(keep)
	switch {
	case upload.refused != nil:
		return in, Charge{}, upload.refused
	case err != nil:
		return in, Charge{}, err
	case uerr != nil:
		return in, Charge{}, QueueUnavailable(uerr)
	}
	if keep {
		res.ManifestBytes = upload.written
	}
	return in, upload.stored, nil
}

// queueHasRoom refuses early (429) a sync whose deployment's queue is already full,
// before its manifest is uploaded; Enqueue decides atomically in the end. Bounded by the
// queue adapter: while the stream elects a leader it retries (within
// DBT_SYNC_JETSTREAM_RETRY_TIMEOUT), with NATS out of reach it answers 503 within
// seconds.
func (s *service) queueHasRoom(ctx context.Context, queue QueueKey) error {
	n, err := s.Jobs.QueuedJobs(ctx, queue)
	if err != nil {
		return QueueUnavailable(err)
	}
	if n >= s.maxQueued {
		return s.jobLimit(queue.Deployment)
	}
	return nil
}

// enqueue queues job, the deployment's queue limit answered 429.
func (s *service) enqueue(ctx context.Context, job Job) error {
	err := s.Jobs.Enqueue(ctx, job)
	if errors.Is(err, ErrJobLimit) {
		return s.jobLimit(job.DeploymentID)
	}
	return err
}

func (s *service) jobLimit(deploymentID int64) error {
	return errs.Statusf(http.StatusTooManyRequests,
		"deployment %d has %d sync jobs queued or running, the most it may have; retry when one has finished", deploymentID, s.maxQueued).WithCode(errs.CodeJobLimit)
}

// targetBranch is the branch the sync writes: branchName, else dbt/<ref>, else
// dbt/<integration branch> for git and dbt/manifest for a manifest. A git sync needs a
// saved integration, and a ref that looks like a commit SHA must be a branch or tag of
// its repository.
func (s *service) targetBranch(ctx context.Context, deploymentID int64, in StartSyncInput) (string, error) {
	var branch string
	switch {
	case in.BranchName != nil:
		branch = *in.BranchName
	case in.Ref != nil:
		branch = derivedBranchName(*in.Ref)
	}
	if in.Source != SourceGit {
		if branch == "" {
			branch = manifestBranch
		}
		return branch, nil
	}
	integ, err := s.Integrations.Integration(ctx, deploymentID)
	if errors.Is(err, ErrNotFound) {
		return "", errs.Invalidf("source \"git\" needs a dbt git integration: save one with PUT /api/v1/deployments/%d/dbt-git-integration, or send source \"manifest\" with the manifest", deploymentID)
	}
	if err != nil {
		return "", err
	}
	if branch == "" {
		branch = derivedBranchName(integ.Branch)
	}
	// When the repository cannot be asked, the job finds out and fails naming the ref.
	if in.Ref != nil && LooksLikeSHA(*in.Ref) {
		if ok, err := s.Git.HasRef(ctx, integ, *in.Ref); err == nil && !ok {
			return "", errs.Invalidf("field \"ref\": %q is neither a branch nor a tag of the repository at %s (a commit SHA is not accepted)", *in.Ref, RepoHost(integ.RepoURL))
		}
	}
	return branch, nil
}

// newJob is a queued job of p's with the fields of in that say what it does.
func (s *service) newJob(ctx context.Context, p *identity.Principal, deploymentID int64, id string, in Job) Job {
	in.SyncJobID, in.DeploymentID, in.Status, in.WorkflowID = id, deploymentID, StatusQueued, "dbt-sync-"+id
	in.Progress, in.Warnings, in.CreatedAt = Progress{Phase: "queued"}, []convert.Warning{}, s.now().UTC()
	in.ProductionBranch, in.AccountID, in.RequestID = p.Deployment.ProductionBranch, p.Account.ID, logging.RequestID(ctx)
	if p.User != nil {
		in.StartedBy = p.User.ID
	}
	if in.Trigger == "" {
		in.Trigger = TriggerAPI
	}
	return in
}

func (s *service) RetryJob(ctx context.Context, p *identity.Principal, deploymentID int64, id string) (SyncAccepted, error) {
	if err := authorize(p, roleSync); err != nil {
		return SyncAccepted{}, err
	}
	old, err := s.job(ctx, deploymentID, id)
	if err != nil {
		return SyncAccepted{}, err
	}
	if !old.Terminal() {
		return SyncAccepted{}, errs.Conflictf("sync job %s is still %s: wait for it to finish, or cancel it, before retrying", id, old.Status)
	}
	if err := s.queueHasRoom(ctx, QueueKey{Account: p.Account.ID, Deployment: deploymentID}); err != nil {
		return SyncAccepted{}, err
	}
	production := p.Deployment.ProductionBranch
	if old.BranchName == production && !p.HasRole(identity.RoleAdmin) {
		return SyncAccepted{}, errs.Forbiddenf("only admins may sync into the production branch %q", production)
	}
	if old.Source == SourceGit {
		if _, err := s.Integrations.Integration(ctx, deploymentID); errors.Is(err, ErrNotFound) {
			return SyncAccepted{}, errs.Invalidf("source \"git\" needs a dbt git integration: save one with PUT /api/v1/deployments/%d/dbt-git-integration", deploymentID)
		} else if err != nil {
			return SyncAccepted{}, err
		}
	}
	manifestOf := ""
	if old.HasManifest {
		manifestOf = old.ManifestJobID()
		if ok, err := s.Manifests.HasManifest(ctx, manifestOf); err != nil {
			return SyncAccepted{}, err
		} else if !ok {
			return SyncAccepted{}, errs.Conflictf("the manifest of sync job %s is no longer stored (a manifest is kept for %s after a failed or canceled job, and removed after a successful one): start a new sync with it", id, s.storage.ObjectMaxAge)
		}
	}
	nid := NewSyncJobID(s.now().UTC())
	job := s.newJob(ctx, p, deploymentID, nid, Job{Source: old.Source, Output: old.Output, Ref: old.Ref, BranchName: old.BranchName,
		HasManifest: old.HasManifest, ManifestOf: manifestOf, ManifestCharge: old.ManifestCharge, RetryOf: id,
		Select: old.Select, Exclude: old.Exclude})
	if err := s.enqueue(ctx, job); err != nil {
		return SyncAccepted{}, err
	}
	return SyncAccepted{BranchName: job.BranchName, SyncJobID: nid, WorkflowID: job.WorkflowID}, nil
}
