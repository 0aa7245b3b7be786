package app

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// serveObjectRemoval answers the worker's requests to remove a job's objects
// (dbtsync.RemoveObjectSubject) with r, on s (the API's request-reply server), in the
// subject's queue group: only dbtsync-svc subscribes to it and only the worker sends it.
func serveObjectRemoval(s *natsx.Server, r *dbtsync.ObjectRemover) error {
	return natsx.Handle(s, dbtsync.RemoveObjectSubject, dbtsync.RemoveObjectQueue,
		func(ctx context.Context, req dbtsync.RemoveObjectRequest) (dbtsync.RemoveObjectReply, error) {
			if !req.Valid() {
				return dbtsync.RemoveObjectReply{}, errs.Invalidf(
					`request must be {"deploymentId": <positive integer>, "jobId": <string>, "kind": "manifest" or "result"}`)
			}
			rep, err := r.Remove(ctx, req)
			switch {
			case errors.Is(err, dbtsync.ErrNotFound):
				return rep, errs.NotFoundf("sync job %s not found", req.JobID)
			case errors.Is(err, dbtsync.ErrNotRemovable):
				return rep, errs.Conflictf("%s", err.Error())
			case err != nil:
				return rep, errors.Join(errs.ErrUnavailable, err) // logged by the server; answered 503
			}
			return rep, nil
		})
}

// removalTimeout bounds one removal request, the API's JetStream calls included.
const removalTimeout = 10 * time.Second

// remoteObjects is the worker's dbtsync.JobObjects: it asks the API.
type remoteObjects struct {
	e *natsx.Endpoint[dbtsync.RemoveObjectRequest, dbtsync.RemoveObjectReply]
}

func newRemoteObjects(c *natsx.Client) *remoteObjects {
	return &remoteObjects{e: natsx.NewEndpoint[dbtsync.RemoveObjectRequest, dbtsync.RemoveObjectReply](c, dbtsync.RemoveObjectSubject, removalTimeout)}
}

func (o *remoteObjects) RemoveManifest(ctx context.Context, job dbtsync.Job) (bool, error) {
	rep, err := o.e.Call(ctx, dbtsync.RemoveObjectRequest{DeploymentID: job.DeploymentID, JobID: job.SyncJobID, Kind: dbtsync.ObjectManifest})
	return rep.Deleted, err
}

func (o *remoteObjects) RemoveResult(ctx context.Context, job dbtsync.Job) error {
	_, err := o.e.Call(ctx, dbtsync.RemoveObjectRequest{DeploymentID: job.DeploymentID, JobID: job.SyncJobID, Kind: dbtsync.ObjectResult})
	return err
}
