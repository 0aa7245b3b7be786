package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Objects of the store: a job's upload, and the files an `output: files` job made.
func manifestObject(id string) string { return "manifest/" + id }
func resultObject(id string) string   { return "result/" + id }

// deploymentMetaKey names the deployment in an uploaded manifest's object metadata.
const deploymentMetaKey = "deployment"

// UploadedBytes sums the sizes of the deployment's uploads.
func (q *Queue) UploadedBytes(ctx context.Context, dep int64) (int64, error) {
	infos, err := q.obj.List(ctx)
	if errors.Is(err, natsjs.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(err)
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

// DeleteManifest removes an upload.
func (q *Queue) DeleteManifest(ctx context.Context, id string) error {
	err := q.obj.Delete(ctx, manifestObject(id))
	if err != nil && !errors.Is(err, natsjs.ErrObjectNotFound) {
		return unavailable(err)
	}
	return nil
}

// PutResult stores a files job's output.
func (q *Queue) PutResult(ctx context.Context, id string, files []convert.File) error {
	b, _ := json.Marshal(files)
	if _, err := q.obj.PutBytes(ctx, resultObject(id), b); err != nil {
		return unavailable(err)
	}
	return nil
}

// Result reads a files job's output.
func (q *Queue) Result(ctx context.Context, id string) ([]convert.File, error) {
	b, err := q.obj.GetBytes(ctx, resultObject(id))
	if errors.Is(err, natsjs.ErrObjectNotFound) {
		return nil, dbtsync.ErrNotFound
	}
	if err != nil {
		return nil, unavailable(err)
	}
	var files []convert.File
	if err := json.Unmarshal(b, &files); err != nil {
		return nil, err
	}
	return files, nil
}
