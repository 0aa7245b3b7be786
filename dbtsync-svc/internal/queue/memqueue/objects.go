package memqueue

import (
	"bytes"
	"context"
	"io"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// PutManifest reads r to its end and keeps what it yielded; an error reading r stores
// nothing.
func (q *Queue) PutManifest(_ context.Context, deploymentID int64, id string, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := q.lock(); err != nil {
		return err
	}
	defer q.mu.Unlock()
	q.manifests[id] = manifest{deploymentID: deploymentID, data: data}
	return nil
}

// Manifest opens an upload.
func (q *Queue) Manifest(_ context.Context, id string) (io.ReadCloser, error) {
	if err := q.lock(); err != nil {
		return nil, err
	}
	defer q.mu.Unlock()
	m, ok := q.manifests[id]
	if !ok {
		return nil, dbtsync.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(m.data)), nil
}

// HasManifest reports whether an upload is stored.
func (q *Queue) HasManifest(_ context.Context, id string) (bool, error) {
	if err := q.lock(); err != nil {
		return false, err
	}
	defer q.mu.Unlock()
	_, ok := q.manifests[id]
	return ok, nil
}

// DeleteManifest removes an upload.
func (q *Queue) DeleteManifest(_ context.Context, id string) (bool, error) {
	if err := q.lock(); err != nil {
		return false, err
	}
	defer q.mu.Unlock()
	_, ok := q.manifests[id]
	delete(q.manifests, id)
	return ok, nil
}

// PutResult keeps a files job's output.
func (q *Queue) PutResult(_ context.Context, id string, files []convert.File) error {
	b := dbtsync.ResultJSON(files)
	if err := q.lock(); err != nil {
		return err
	}
	defer q.mu.Unlock()
	q.results[id] = b
	return nil
}

// Result streams a files job's output.
func (q *Queue) Result(_ context.Context, id string) (io.ReadCloser, error) {
	if err := q.lock(); err != nil {
		return nil, err
	}
	defer q.mu.Unlock()
	b, ok := q.results[id]
	if !ok {
		return nil, dbtsync.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}
