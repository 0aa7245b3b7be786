package audit

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
)

// The stream of stored events: every event the trail stores (and each summary of
// events merged past an account's budget) is republished on it, so consumers other
// than the ingester (the webhook dispatcher) read the trail without a second consumer
// of the AUDIT work queue. Limits retention: a stuck reader never blocks the ingester;
// past its limits the oldest events go.
const (
	StoredStreamName    = "AUDIT_STORED"
	StoredSubjectPrefix = "audit.stored."
	// MergedHeader marks a summary event (ActionMerged) republished after a merge.
	MergedHeader = "Audit-Merged"
)

// StoredLimits bound the stream of stored events (WEBHOOK_STREAM_MAX_AGE,
// WEBHOOK_STREAM_MAX_BYTES).
type StoredLimits struct {
	MaxAge   time.Duration
	MaxBytes int64
	Replicas int
}

// EnsureStoredStream creates the stream of stored events, or brings an existing one to
// l.
func EnsureStoredStream(ctx context.Context, js jetstream.JetStream, l StoredLimits) (jetstream.Stream, error) {
	if l.MaxAge <= 0 {
		l.MaxAge = 24 * time.Hour
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 1 << 30
	}
	if l.Replicas <= 0 {
		l.Replicas = 1
	}
	// Created, or updated only when its limits differ (publish.Ensure): embed-svc's
	// replicas start together, and one's update must not race another's consumer create.
	s, err := publish.Ensure(ctx, js, jetstream.StreamConfig{Name: StoredStreamName, Subjects: []string{StoredSubjectPrefix + ">"},
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, MaxAge: l.MaxAge, MaxBytes: l.MaxBytes, Replicas: l.Replicas,
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		return nil, errors.Join(errors.New("stored audit stream"), err)
	}
	return s, nil
}

// republishTimeout bounds the wait for the stream's acknowledgements of one batch.
const republishTimeout = 5 * time.Second

// republish publishes events on the stream of stored events, each under its id (the
// stream drops a repeat within its duplicate window), and waits for every
// acknowledgement. merged marks summary events.
func republish(ctx context.Context, js jetstream.JetStream, events []audit.Event, merged []audit.Event) error {
	ctx, cancel := context.WithTimeout(ctx, republishTimeout)
	defer cancel()
	var acks []jetstream.PubAckFuture
	send := func(ev audit.Event, summary bool) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		m := nats.NewMsg(StoredSubjectPrefix + strconv.FormatInt(ev.AccountID, 10))
		m.Data = b
		m.Header.Set(jetstream.MsgIDHeader, ev.ID)
		if summary {
			m.Header.Set(MergedHeader, "true")
		}
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		acks = append(acks, f)
		return nil
	}
	for _, ev := range events {
		if err := send(ev, false); err != nil {
			return err
		}
	}
	for _, ev := range merged {
		if err := send(ev, true); err != nil {
			return err
		}
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
