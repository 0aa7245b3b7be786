package jetstream

import (
	"context"
	"errors"
	"io"
	"strconv"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Objects of the store: a job's upload, and the files an `output: files` job made.
func manifestObject(id string) string { return "manifest/" + id }
func resultObject(id string) string   { return "result/" + id }

// deploymentMetaKey names the deployment in an uploaded manifest's object metadata.
const deploymentMetaKey = "deployment"

// PutManifest stores an upload as it is read.
func (q *Queue) PutManifest(ctx context.Context, deploymentID int64, id string, r io.Reader) error {
	meta := natsjs.ObjectMeta{Name: manifestObject(id), Metadata: map[string]string{deploymentMetaKey: strconv.FormatInt(deploymentID, 10)}}
	if _, err := q.obj.Put(ctx, meta, r); err != nil {
		return unavailable(err)
	}
	return nil
}

// Manifest opens an upload.
func (q *Queue) Manifest(ctx context.Context, id string) (io.ReadCloser, error) {
	return q.open(ctx, manifestObject(id))
}

// open opens an object, retried; its chunks are read as the caller reads, and a read
// that stalls is done again (objectReader).
func (q *Queue) open(ctx context.Context, name string) (io.ReadCloser, error) {
	r, err := q.openReader(ctx, name, objectStall)
	if errors.Is(err, natsjs.ErrObjectNotFound) {
		return nil, dbtsync.ErrNotFound
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return r, nil
}

// HasManifest reports whether an upload is stored.
func (q *Queue) HasManifest(ctx context.Context, id string) (bool, error) {
	return q.hasObject(ctx, manifestObject(id))
}

func (q *Queue) hasObject(ctx context.Context, name string) (bool, error) {
	err := q.do(ctx, func(ctx context.Context) error {
		_, err := q.obj.GetInfo(ctx, name)
		return err
	})
	if errors.Is(err, natsjs.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, unavailable(err)
	}
	return true, nil
}

// DeleteManifest removes an upload. The object store's delete is not conditional (a
// second one succeeds too), so the one caller told deleted is the one that creates the
// KV entry deleted.<id> (kept as long as job records), before it deletes the object: a
// delete retried after a lost reply finds the entry its own (its op id) and the object
// gone, and still says deleted.
func (q *Queue) DeleteManifest(ctx context.Context, id string) (bool, error) {
	if ok, err := q.hasObject(ctx, manifestObject(id)); err != nil || !ok {
		return false, err
	}
	op := []byte(newOp())
	err := q.do(ctx, func(ctx context.Context) error {
		_, err := q.kv.Create(ctx, "deleted."+id, op)
		return err
	})
	if isWrongSequence(err) {
		e, gerr := q.getEntry(ctx, q.kv, "deleted."+id)
		if gerr != nil || string(e.Value()) != string(op) {
			return false, nil // another caller deletes it
		}
		err = nil
	}
	if err != nil {
		return false, unavailable(err)
	}
	err = q.do(ctx, func(ctx context.Context) error { return q.obj.Delete(ctx, manifestObject(id)) })
	if err != nil && !errors.Is(err, natsjs.ErrObjectNotFound) {
		// Not deleted: it stays, charged, until the store removes it by its age.
		return false, unavailable(err)
	}
	return true, nil
}

// PutResult stores a files job's output. A put over an existing object purges the
// earlier one's chunks, which only the API may do: a run that replaces an earlier run's
// result has it removed first (DeleteResult, through the API).
func (q *Queue) PutResult(ctx context.Context, id string, files []convert.File) error {
	data := dbtsync.ResultJSON(files)
	if err := q.do(ctx, func(ctx context.Context) error {
		_, err := q.obj.PutBytes(ctx, resultObject(id), data)
		return err
	}); err != nil {
		return unavailable(err)
	}
	return nil
}

// DeleteResult removes a files job's output, if any.
func (q *Queue) DeleteResult(ctx context.Context, id string) error {
	err := q.do(ctx, func(ctx context.Context) error { return q.obj.Delete(ctx, resultObject(id)) })
	if err != nil && !errors.Is(err, natsjs.ErrObjectNotFound) {
		return unavailable(err)
	}
	return nil
}

// Result streams a files job's output, chunk by chunk as the object store keeps it.
func (q *Queue) Result(ctx context.Context, id string) (io.ReadCloser, error) {
	return q.open(ctx, resultObject(id))
}
