package platformctl

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/gateway/internal/apikeys"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/audit/publish"
	"github.com/analyticsco/platform/libs/server"
)

// The actions platformctl records: the API-key service's own.
const (
	ActionKeyCreate = apikeys.ActionCreate
	ActionKeyRevoke = apikeys.ActionRevoke
	ActionKeyRotate = apikeys.ActionRotate
)

// Auditor records platformctl's changes (API keys created and revoked) in the audit
// trail. A command line has no outbox and no later: it connects to the AUDIT stream
// before it changes anything (unreachable: the change is refused), and waits for the
// stream to acknowledge the event before it reports success.
type Auditor struct {
	nc       *nats.Conn
	pub      *publish.Publisher
	operator string
	err      error // the first event not acknowledged
}

var _ audit.Recorder = (*Auditor)(nil)

// deliverTimeout is how long a command waits for the stream to take its event.
const deliverTimeout = 10 * time.Second

// NewAuditor connects to NATS at url through the bootstrap's one-shot connect (its
// metrics on a registry the command discards). Events are also logged, one JSON line
// each, to stderr (stdout is the command's JSON answer).
func NewAuditor(url string) (*Auditor, error) {
	nc, err := server.ConnectNATSOnce(url, "platformctl", 5*time.Second, prometheus.NewRegistry())
	if err != nil {
		return nil, fmt.Errorf("the audit stream (NATS_URL) is unreachable, so nothing was changed: every API key change is recorded in the audit trail: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "platformctl")
	pub, err := publish.NewPublisher(publish.Options{Service: "platformctl", NATS: nc, Logger: logger, PublishTimeout: 5 * time.Second})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Auditor{nc: nc, pub: pub, operator: operatorName()}, nil
}

// operatorName is who ran the command: PLATFORMCTL_OPERATOR, else the OS user.
func operatorName() string {
	if v := os.Getenv("PLATFORMCTL_OPERATOR"); v != "" {
		return v
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

// Record delivers events, done by the operator, to the stream and waits for it; Err
// then says whether one was not acknowledged (it is only in its log line, on stderr).
func (a *Auditor) Record(ctx context.Context, events ...audit.Event) {
	for i := range events {
		events[i].Actor = audit.Actor{Type: audit.ActorOperator, ID: a.operator}
	}
	a.pub.Record(ctx, events...)
	ctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	if n := a.pub.Flush(ctx); n > 0 && a.err == nil {
		a.err = fmt.Errorf("the change was made, but its audit event was not acknowledged by the AUDIT stream within %s; the event is in the log line above", deliverTimeout)
	}
}

// Err is the failure to deliver an event Record was given, if any.
func (a *Auditor) Err() error { return a.err }

// Close disconnects.
func (a *Auditor) Close() { a.nc.Close() }
