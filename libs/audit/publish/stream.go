package publish

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The stream the events travel on. Every service publishes its events on
// SubjectPrefix + its name; the trail's owner is the stream's one consumer (a work
// queue: an event leaves the stream once the owner has stored it).
const (
	StreamName    = "AUDIT"
	SubjectPrefix = "audit.events."
	ConsumerName  = "audit-ingest"
)

// Subject is the subject service publishes on.
func Subject(service string) string { return SubjectPrefix + service }

// StreamLimits bound what the stream holds while its owner cannot store events.
type StreamLimits struct {
	MaxBytes int64         // past it publishing fails, and publishers keep events in their outbox
	MaxAge   time.Duration // an event still unconsumed this long is dropped
	Replicas int           // 1 outside a NATS cluster
}

// DefaultStreamLimits apply where StreamLimits leaves a field zero.
var DefaultStreamLimits = StreamLimits{MaxBytes: 1 << 30, MaxAge: 14 * 24 * time.Hour, Replicas: 1}

// StreamConfig is the stream's configuration under l.
func StreamConfig(l StreamLimits) jetstream.StreamConfig {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultStreamLimits.MaxBytes
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultStreamLimits.MaxAge
	}
	if l.Replicas <= 0 {
		l.Replicas = DefaultStreamLimits.Replicas
	}
	return jetstream.StreamConfig{
		Name:        StreamName,
		Description: "audit events of every service, consumed by the audit trail's owner",
		Subjects:    []string{SubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    l.Replicas,
		MaxBytes:    l.MaxBytes,
		MaxAge:      l.MaxAge,
		// Full: refuse new events (the publisher keeps them in its outbox) rather than
		// drop stored ones.
		Discard: jetstream.DiscardNew,
		// Publishers set the event id as the message id: a retried or relayed event is
		// stored once within this window (and stored once by the owner after it).
		Duplicates: 2 * time.Minute,
	}
}

// EnsureStream creates the stream or brings its configuration to l (the owner's job).
func EnsureStream(ctx context.Context, js jetstream.JetStream, l StreamLimits) (jetstream.Stream, error) {
	s, err := Ensure(ctx, js, StreamConfig(l))
	if err != nil {
		return nil, errors.Join(errors.New("audit stream"), err)
	}
	return s, nil
}

// Ensure creates the stream want names, or brings an existing one to want. An update is
// sent only when the limits differ: replicas starting together would otherwise rewrite
// the stream while another creates its consumer.
func Ensure(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // another replica was first
			s, err = js.Stream(ctx, want.Name)
		}
	case err == nil && !sameLimits(s.CachedInfo().Config, want):
		s, err = js.UpdateStream(ctx, want)
	}
	return s, err
}

// sameLimits compares what StreamConfig (and the other streams Ensure makes) set.
func sameLimits(a, b jetstream.StreamConfig) bool {
	return a.MaxBytes == b.MaxBytes && a.MaxAge == b.MaxAge && a.Replicas == b.Replicas && a.Discard == b.Discard &&
		a.Duplicates == b.Duplicates && a.Retention == b.Retention && a.Storage == b.Storage &&
		len(a.Subjects) == 1 && len(b.Subjects) == 1 && a.Subjects[0] == b.Subjects[0]
}

// Config is what every process that records audit events reads (embedded in its config).
type Config struct {
	AuditMaxHeld int `env:"AUDIT_MAX_HELD" default:"10000" help:"audit events this process holds in memory while neither the AUDIT stream (NATS) nor its outbox (MongoDB) takes them; past it the oldest are dropped and logged (each event's own log line remains)"`
}
