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
// touch the store. Bytes go to the store in buffers of uploadBuffer, and each buffer is
// first held in the deployment's and the account's storage ledgers (Storage.Hold,
// atomic): an upload past a quota stops there with 413, however many uploads run at
// once.
type lazyUpload struct {
	ctx          context.Context
	storage      *Storage
	store        ManifestStore
	acc          int64
	deploymentID int64
	id           string
	pw           *io.PipeWriter
	bw           *bufio.Writer
	done         chan error
	written      int64     // bytes the request wrote (the manifest's size once it is complete)
	sent         int64     // bytes sent to the store
	held         Charge    // what the upload holds in the ledgers
	heldAt       time.Time // when the hold was last renewed
	stored       Charge    // once kept: the stored manifest's charge
	refused      error     // the first refusal (the 413), or the ledgers out of reach (503)
}

// uploadBuffer is the bytes an upload sends to the store at a time (one hold each at
// most); holdStep is the least its hold grows by, and it also grows by an eighth of what
// it holds, so a large upload renews its hold a few dozen times.
const (
	uploadBuffer = 128 << 10
	holdStep     = 1 << 20
)

func (s *service) newUpload(ctx context.Context, acc, deploymentID int64, id string) *lazyUpload {
	return &lazyUpload{ctx: ctx, storage: s.storage, store: s.Manifests, acc: acc, deploymentID: deploymentID, id: id}
}

func (u *lazyUpload) Write(b []byte) (int, error) {
	if u.refused != nil {
		return 0, u.refused
	}
	if u.pw == nil {
		pr, pw := io.Pipe()
		u.pw, u.bw, u.done = pw, bufio.NewWriterSize(heldWriter{u}, uploadBuffer), make(chan error, 1)
		go func() {
			err := u.store.PutManifest(u.ctx, u.deploymentID, u.id, pr)
			pr.CloseWithError(err)
			u.done <- err
		}()
	}
	n, err := u.bw.Write(b)
	u.written += int64(n)
	if u.refused != nil {
		return n, u.refused
	}
	return n, err
}

// heldWriter sends a buffer to the store once the ledgers hold room for it.
type heldWriter struct{ u *lazyUpload }

func (w heldWriter) Write(p []byte) (int, error) {
	u := w.u
	need := u.sent + int64(len(p))
	if need > u.held.Held || time.Since(u.heldAt) > holdLease/3 {
		if err := u.hold(need); err != nil {
			u.refused = asUploadRefusal(err)
			return 0, u.refused
		}
	}
	n, err := u.pw.Write(p)
	u.sent += int64(n)
	return n, err
}

// hold makes the upload's hold cover need bytes: a step ahead when the quotas leave
// room for it, else exactly need.
//
// The ledgers out of reach answer 503 within seconds, not at the client's patience: the
// adapter retries only while NATS elects a leader (DBT_SYNC_JETSTREAM_RETRY_TIMEOUT).
func (u *lazyUpload) hold(need int64) error {
	held, err := u.storage.Hold(u.ctx, u.acc, u.deploymentID, u.held, need+max(holdStep, need/8))
	if isQuotaRefusal(err) {
		held, err = u.storage.Hold(u.ctx, u.acc, u.deploymentID, u.held, need)
	}
	if err != nil {
		return err
	}
	u.held, u.heldAt = held, time.Now()
	return nil
}

// asUploadRefusal is a failed hold as the client is answered: a quota's 413, anything
// else the job queue (NATS, which keeps the ledgers) out of reach.
func asUploadRefusal(err error) error {
	var q *QuotaError
	if errors.As(err, &q) {
		return errs.TooLargef("the upload to %s", q).WithCode(errs.CodeStorageQuota)
	}
	return QueueUnavailable(err)
}

func isQuotaRefusal(err error) bool {
	var q *QuotaError
	return errors.As(err, &q)
}

// finish completes (keep) or aborts the upload, if one was started; a kept upload's
// hold becomes the stored manifest's charge (u.stored), an aborted one's is freed. A
// refusal at the last buffer is u.refused.
func (u *lazyUpload) finish(keep bool) error {
	if u.pw == nil {
		return nil
	}
	bg := context.WithoutCancel(u.ctx)
	if keep && u.refused == nil {
		err := u.bw.Flush()
		if err != nil {
			u.pw.CloseWithError(err)
			<-u.done
		} else {
			u.pw.Close()
			err = <-u.done
		}
		if err == nil {
			stored := u.storage.StoredCharge(u.sent, u.storage.Now())
			if err = u.storage.Move(bg, u.acc, u.deploymentID, u.held, stored); err == nil {
				u.stored = stored
				return nil
			}
		}
		if u.refused != nil {
			err = nil // answered as the refusal
		}
		_, _ = u.store.DeleteManifest(bg, u.id) // not kept, whatever part was stored
		_ = u.storage.Free(bg, u.acc, u.deploymentID, u.held)
		return err
	}
	u.pw.CloseWithError(errors.New("upload aborted"))
	<-u.done
	_, _ = u.store.DeleteManifest(bg, u.id)
	_ = u.storage.Free(bg, u.acc, u.deploymentID, u.held)
	return nil
}
