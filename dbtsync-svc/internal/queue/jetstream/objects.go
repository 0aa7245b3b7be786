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
func (q *Queue) PutManifest(ctx context.Context, dep int64, id string, r io.Reader) error {
	meta := natsjs.ObjectMeta{Name: manifestObject(id), Metadata: map[string]string{deploymentMetaKey: strconv.FormatInt(dep, 10)}}
	if _, err := q.obj.Put(ctx, meta, r); err != nil {
		return unavailable(err)
	}
	return nil
}

// Manifest opens an upload.
func (q *Queue) Manifest(ctx context.Context, id string) (io.ReadCloser, error) {
	obj, err := q.obj.Get(ctx, manifestObject(id))
	if errors.Is(err, natsjs.ErrObjectNotFound) {
		return nil, dbtsync.ErrNotFound
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return obj, nil
}

// HasManifest reports whether an upload is stored.
func (q *Queue) HasManifest(ctx context.Context, id string) (bool, error) {
	_, err := q.obj.GetInfo(ctx, manifestObject(id))
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
// KV entry deleted.<id> (kept as long as job records).
func (q *Queue) DeleteManifest(ctx context.Context, id string) (bool, error) {
	err := q.obj.Delete(ctx, manifestObject(id))
	if errors.Is(err, natsjs.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, unavailable(err)
	}
	if _, err := q.kv.Create(ctx, "deleted."+id, nil); err != nil {
		if isWrongSequence(err) {
			return false, nil
		}
		return false, unavailable(err)
	}
	return true, nil
}

// PutResult stores a files job's output.
func (q *Queue) PutResult(ctx context.Context, id string, files []convert.File) error {
	if _, err := q.obj.PutBytes(ctx, resultObject(id), dbtsync.ResultJSON(files)); err != nil {
		return unavailable(err)
	}
	return nil
}

// Result streams a files job's output, chunk by chunk as the object store keeps it.
func (q *Queue) Result(ctx context.Context, id string) (io.ReadCloser, error) {
	obj, err := q.obj.Get(ctx, resultObject(id))
	if errors.Is(err, natsjs.ErrObjectNotFound) {
		return nil, dbtsync.ErrNotFound
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return obj, nil
}
