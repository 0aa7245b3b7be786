package dbtsync

import (
	"bufio"
	"context"
	"errors"
	"io"
	"time"

	"github.com/analyticsco/platform/libs/errs"
)

// lazyUpload streams a start-sync request's manifest into the manifest store. It starts
// the upload on the first write: most requests carry no manifest, and those should not
// touch the store.
type lazyUpload struct {
	ctx     context.Context
	store   ManifestStore
	dep     int64
	id      string
	pw      *io.PipeWriter
	bw      *bufio.Writer
	done    chan error
	written int64
	// The deployment's quota: what its manifests in the store leave of quota when the
	// upload starts; an upload past it is refused (refused holds the 413).
	quota   int64
	left    int64
	refused error
}

func (s *service) newUpload(ctx context.Context, dep int64, id string) *lazyUpload {
	return &lazyUpload{ctx: ctx, store: s.Manifests, dep: dep, id: id, quota: s.uploadQuota}
}

// uploadedBytes is what the deployment's manifests hold in the store now. Bounded: with
// NATS unreachable the listing would wait for the client's patience; the upload answers
// 503 at once instead.
func (u *lazyUpload) uploadedBytes() (int64, error) {
	ctx, cancel := context.WithTimeout(u.ctx, 2*time.Second)
	defer cancel()
	return u.store.UploadedBytes(ctx, u.dep)
}

func (u *lazyUpload) Write(b []byte) (int, error) {
	if u.refused != nil {
		return 0, u.refused
	}
	if u.pw == nil {
		used, err := u.uploadedBytes()
		if err != nil {
			u.refused = QueueUnavailable(err)
			return 0, u.refused
		}
		u.left = u.quota - used
		pr, pw := io.Pipe()
		u.pw, u.bw, u.done = pw, bufio.NewWriterSize(pw, 128<<10), make(chan error, 1)
		go func() {
			err := u.store.PutManifest(u.ctx, u.dep, u.id, pr)
			pr.CloseWithError(err)
			u.done <- err
		}()
	}
	if u.written+int64(len(b)) > u.left {
		u.refused = errs.New(errs.TooLarge,
			"the manifests of deployment %d waiting to be converted would pass %d bytes (DBT_SYNC_MAX_DEPLOYMENT_UPLOAD_BYTES); retry when its queued syncs have run", u.dep, u.quota)
		return 0, u.refused
	}
	n, err := u.bw.Write(b)
	u.written += int64(n)
	return n, err
}

// finish completes (keep) or aborts the upload, if one was started.
func (u *lazyUpload) finish(keep bool) error {
	if u.pw == nil {
		return nil
	}
	if keep {
		if err := u.bw.Flush(); err != nil {
			u.pw.CloseWithError(err)
			<-u.done
			return err
		}
		u.pw.Close()
		return <-u.done
	}
	u.pw.CloseWithError(errors.New("upload aborted"))
	<-u.done
	_ = u.store.DeleteManifest(context.WithoutCancel(u.ctx), u.id)
	return nil
}
