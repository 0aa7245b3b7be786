package dbtsync

import (
	"context"
	"errors"
	"fmt"
)

// The worker may not remove anything from the object store itself (a removal there is a
// purge of the store's stream, and NATS cannot tell the purge of one object from that of
// the whole store): it asks the API, over NATS request-reply, to remove a job's object.
// RemoveObjectSubject is that request's subject, shared by the API replicas in
// RemoveObjectQueue.
const (
	RemoveObjectSubject = "dbtsync.objects.remove"
	RemoveObjectQueue   = "dbtsync-objects"
)

// The objects of a job the worker may ask to remove.
const (
	ObjectManifest = "manifest" // the upload a succeeded job converted
	ObjectResult   = "result"   // the files result an earlier run of a running job left
)

// RemoveObjectRequest is {"deploymentId": 1, "jobId": "…", "kind": "manifest"}.
type RemoveObjectRequest struct {
	DeploymentID int64  `json:"deploymentId"`
	JobID        string `json:"jobId"`
	Kind         string `json:"kind"`
}

// Valid reports whether the request names a deployment, a job and a kind of object.
func (r RemoveObjectRequest) Valid() bool {
	return r.DeploymentID > 0 && r.JobID != "" && (r.Kind == ObjectManifest || r.Kind == ObjectResult)
}

// RemoveObjectReply is {"deleted": true}: deleted is true for the one request that
// removed a manifest (so its charge is freed once), false when it was already gone.
type RemoveObjectReply struct {
	Deleted bool `json:"deleted"`
}

// ErrNotRemovable is the answer when the job's state does not let its object go (a
// manifest of a job that has not succeeded, a result of a job that is over or makes no
// files).
var ErrNotRemovable = errors.New("the job's object may not be removed now")

// JobObjects removes a job's objects on the worker's behalf.
type JobObjects interface {
	// RemoveManifest removes the upload succeeded job converted; deleted is false when
	// it was already gone.
	RemoveManifest(ctx context.Context, job Job) (deleted bool, err error)
	// RemoveResult removes the files result an earlier run of job (still running) left,
	// so that the run writes its own to a name no object holds.
	RemoveResult(ctx context.Context, job Job) error
}

// ObjectRemovalStore is what removing a job's objects needs of the object store.
type ObjectRemovalStore interface {
	DeleteManifest(ctx context.Context, id string) (deleted bool, err error)
	DeleteResult(ctx context.Context, id string) error
}

// ObjectRemover removes a job's objects as the worker asks, after checking that the job
// as stored lets them go: the object is named by the job record, never by the request;
// a manifest goes once its job has succeeded (a failed or canceled job's stays, so the
// job can be retried), a result only while its files job runs (a run replacing an
// earlier run's).
type ObjectRemover struct {
	Jobs    JobQueue
	Objects ObjectRemovalStore
}

// Remove answers one request: ErrNotFound when the job does not exist, ErrNotRemovable
// when its state does not let the object go, and a store's error otherwise.
func (r *ObjectRemover) Remove(ctx context.Context, req RemoveObjectRequest) (RemoveObjectReply, error) {
	job, err := r.Jobs.Job(ctx, req.DeploymentID, req.JobID)
	if err != nil {
		return RemoveObjectReply{}, err
	}
	switch req.Kind {
	case ObjectManifest:
		if !job.HasManifest || job.Status != StatusSucceeded {
			return RemoveObjectReply{}, fmt.Errorf("%w: the upload of job %s (status %s) stays until it succeeds", ErrNotRemovable, job.SyncJobID, job.Status)
		}
		deleted, err := r.Objects.DeleteManifest(ctx, job.ManifestJobID())
		return RemoveObjectReply{Deleted: deleted}, err
	case ObjectResult:
		if job.Output != OutputFiles || job.Terminal() {
			return RemoveObjectReply{}, fmt.Errorf("%w: job %s (output %s, status %s) is not a files job that runs", ErrNotRemovable, job.SyncJobID, job.Output, job.Status)
		}
		return RemoveObjectReply{}, r.Objects.DeleteResult(ctx, job.SyncJobID)
	}
	return RemoveObjectReply{}, fmt.Errorf("%w: unknown kind %q", ErrNotRemovable, req.Kind)
}
