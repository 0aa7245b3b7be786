package dbtsync

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The actions dbtsync-svc records in the audit trail, refused or not (a caller below an
// operation's role included, as in every service).
const (
	ActionSyncStart         = "dbtsync.sync.start"
	ActionSyncRetry         = "dbtsync.sync.retry"
	ActionSyncCancel        = "dbtsync.sync.cancel"
	ActionSyncFinish        = "dbtsync.sync.finish" // the worker, when a job ends
	ActionSyncPush          = "dbtsync.sync.push"   // a push webhook: a sync started, or why none did
	ActionIntegrationUpdate = "dbtsync.integration.update"
	ActionBranchOpen        = "dbtsync.branch.open"
	ActionBranchStaging     = "dbtsync.branch.staging_update"
)

// Audit target types of dbtsync-svc.
const (
	TargetSyncJob     = "sync_job"
	TargetIntegration = "dbt_git_integration"
	TargetBranch      = "branch"
)

// auditingMiddleware records every state-changing call of s in the audit trail (nil
// rec: no decorator).
func auditingMiddleware(rec audit.Recorder) func(Service) Service {
	if rec == nil {
		return nil
	}
	return func(next Service) Service { return &auditing{Service: next, rec: rec} }
}

type auditing struct {
	Service
	rec audit.Recorder
}

func (a *auditing) StartSync(ctx context.Context, p *identity.Principal, deploymentID int64, body SyncRequestBody) (SyncStarted, error) {
	var in StartSyncInput
	read := func(w io.Writer) (StartSyncInput, error) {
		v, err := body(w)
		in = v
		return v, err
	}
	res, err := a.Service.StartSync(ctx, p, deploymentID, read)
	d := map[string]any{}
	if in.Source != "" {
		d["source"], d["output"] = in.Source, in.Output
	}
	if in.Ref != nil {
		d["ref"] = *in.Ref
	}
	if res.Accepted.BranchName != "" {
		d["branchName"] = res.Accepted.BranchName
	} else if in.BranchName != nil {
		d["branchName"] = *in.BranchName
	}
	if res.ManifestBytes > 0 {
		d["manifestBytes"] = res.ManifestBytes
	}
	auditSelector(d, in.Select, in.Exclude)
	audit.Record(ctx, a.rec, p, ActionSyncStart, audit.Target{Type: TargetSyncJob, ID: res.Accepted.SyncJobID}, err, http.StatusAccepted, d)
	return res, err
}

func (a *auditing) RetryJob(ctx context.Context, p *identity.Principal, deploymentID int64, id string) (SyncAccepted, error) {
	res, err := a.Service.RetryJob(ctx, p, deploymentID, id)
	d := map[string]any{"retryOf": id}
	if res.BranchName != "" {
		d["branchName"] = res.BranchName
	}
	audit.Record(ctx, a.rec, p, ActionSyncRetry, audit.Target{Type: TargetSyncJob, ID: res.SyncJobID}, err, http.StatusAccepted, d)
	return res, err
}

func (a *auditing) CancelJob(ctx context.Context, p *identity.Principal, deploymentID int64, id string) (SyncJob, error) {
	job, err := a.Service.CancelJob(ctx, p, deploymentID, id)
	var d map[string]any
	if err == nil {
		// canceled: it never ran; running: it stops at its next model.
		d = map[string]any{"status": job.Status, "branchName": job.BranchName}
	}
	audit.Record(ctx, a.rec, p, ActionSyncCancel, audit.Target{Type: TargetSyncJob, ID: id}, err, http.StatusOK, d)
	return job, err
}

func (a *auditing) PutIntegration(ctx context.Context, p *identity.Principal, deploymentID int64, in IntegrationInput) (DbtGitIntegration, error) {
	out, err := a.Service.PutIntegration(ctx, p, deploymentID, in)
	// The repository, never the credentials: only whether there are some, and the URL
	// without any a user pasted into it (also when it was refused for carrying them).
	d := map[string]any{"repoUrl": RedactRepoURL(in.RepoURL), "branch": in.Branch, "hasCredentials": in.Credentials != nil}
	if in.WebhookSecret.Set {
		d["webhookSecretSet"] = in.WebhookSecret.Value != nil // never the secret
	}
	if in.ProjectPath != nil {
		d["projectPath"] = *in.ProjectPath
	}
	auditSelector(d, in.Select, in.Exclude)
	audit.Record(ctx, a.rec, p, ActionIntegrationUpdate, audit.Target{Type: TargetIntegration, ID: strconv.FormatInt(deploymentID, 10)}, err, http.StatusOK, d)
	return out, err
}

func (a *auditing) PushWebhook(ctx context.Context, p *identity.Principal, deploymentID int64, req PushRequest) (PushResult, error) {
	res, err := a.Service.PushWebhook(ctx, p, deploymentID, req)
	d := map[string]any{"provider": req.Provider, "started": res.Started}
	if req.DeliveryID != "" {
		d["deliveryId"] = req.DeliveryID
	}
	if res.Reason != "" {
		d["reason"] = res.Reason
	}
	if res.Commit != "" {
		d["commit"] = res.Commit
	}
	var id string
	if res.SyncJobID != nil {
		id = *res.SyncJobID
	}
	status := http.StatusOK
	if res.Started {
		status = http.StatusAccepted
	}
	audit.Record(ctx, a.rec, p, ActionSyncPush, audit.Target{Type: TargetSyncJob, ID: id}, err, status, d)
	return res, err
}

func (a *auditing) OpenBranch(ctx context.Context, p *identity.Principal, deploymentID int64, name string) (Branch, error) {
	b, err := a.Service.OpenBranch(ctx, p, deploymentID, name)
	var d map[string]any
	if b.LeaseExpiresAt != nil {
		d = map[string]any{"leaseExpiresAt": b.LeaseExpiresAt.UTC().Format(httpx.TimeLayout)}
	}
	audit.Record(ctx, a.rec, p, ActionBranchOpen, audit.Target{Type: TargetBranch, ID: name}, err, http.StatusOK, d)
	return b, err
}

func (a *auditing) SetStaging(ctx context.Context, p *identity.Principal, deploymentID int64, name string, enabled bool) (Branch, error) {
	b, err := a.Service.SetStaging(ctx, p, deploymentID, name, enabled)
	audit.Record(ctx, a.rec, p, ActionBranchStaging, audit.Target{Type: TargetBranch, ID: name}, err, http.StatusOK, map[string]any{"enabled": enabled})
	return b, err
}

// FinishEvent is the audit event of the end of a job a worker ran, read from the job as
// the worker recorded it: its status, what it wrote, and who started it (the actor is
// the platform: nobody acted at that moment). Its id and time derive from the job and
// its finish time, so the event recorded again (a redelivery after the worker stopped
// before its event was safe) is the same event, and the trail stores it once.
func FinishEvent(job Job) audit.Event {
	var at time.Time
	if job.FinishedAt != nil {
		at = job.FinishedAt.UTC().Truncate(time.Millisecond)
	}
	ev := audit.Event{ID: audit.DerivedID(at, ActionSyncFinish+"/"+job.SyncJobID), Time: at,
		AccountID: job.AccountID, DeploymentID: job.DeploymentID, Action: ActionSyncFinish,
		Actor: audit.Actor{Type: audit.ActorSystem, ID: "dbtsync-worker"}, Target: audit.Target{Type: TargetSyncJob, ID: job.SyncJobID},
		RequestID: job.RequestID, Outcome: audit.Outcome{Result: audit.Success}}
	d := map[string]any{"status": job.Status, "branchName": job.BranchName, "source": job.Source, "attempts": job.Attempts}
	if job.StartedBy != 0 {
		d["startedBy"] = job.StartedBy
	}
	switch job.Status {
	case StatusSucceeded:
		if job.Output == OutputBranch {
			d["version"], d["changed"] = job.Version, job.Changed == nil || *job.Changed
		}
	case StatusFailed:
		ev.Outcome.Result = audit.Failure
		msg := ""
		if job.Error != nil {
			msg = *job.Error
		}
		d["error"], d["errorCode"] = msg, job.ErrorCode
	case StatusCanceled:
		ev.Outcome.Result = audit.Failure
		if job.CanceledBy != 0 {
			d["canceledBy"] = job.CanceledBy
		}
	}
	ev.Details = d
	return ev
}
