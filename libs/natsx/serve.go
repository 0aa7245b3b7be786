package natsx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/libs/errs"
)

// The request-reply kit: the one way a process answers (Server, Handle) and asks
// (Client, Endpoint) over NATS. Both sides trace (a client span, its context in the
// request's headers, the server's span its child), bound their time (the caller's
// deadline travels with the request; the handler's timeout is the shorter of its own and
// the caller's) and their concurrency (requests in flight per process on the caller's
// side; handlers in flight per server, past which it answers busy at once), count by
// subject and outcome (RequestMetrics), and carry errs' error model across the wire.

// Server defaults.
const (
	DefaultHandlerTimeout = 5 * time.Second
	DefaultMaxHandling    = 256
)

// ServerOptions configure a Server; the zero value takes the defaults.
type ServerOptions struct {
	// Timeout bounds each handler (default DefaultHandlerTimeout), or what its caller
	// had left when that is shorter; past it the request is answered ErrHandlerTimeout.
	Timeout time.Duration
	// MaxInFlight bounds the handlers running at once, over all the server's subjects
	// (default DefaultMaxHandling); a request past it is answered ErrBusy at once. A
	// handler over its timeout holds its place until it returns.
	MaxInFlight int
	// Metrics records the replies (nil: none).
	Metrics *RequestMetrics
	// Logger logs the handlers' failures that no client caused (nil: none).
	Logger *slog.Logger
	// Tracer makes the server spans (nil: the global provider).
	Tracer trace.TracerProvider
}

// Server answers requests on one connection, with one cap of handlers in flight.
type Server struct {
	nc     *nats.Conn
	o      ServerOptions
	slots  chan struct{}
	tracer trace.Tracer
	mu     sync.Mutex
	subs   []*nats.Subscription
}

const tracerName = "github.com/analyticsco/platform/libs/natsx"

// NewServer returns a server answering on nc; Handle subscribes its subjects.
func NewServer(nc *nats.Conn, o ServerOptions) *Server {
	if o.Timeout <= 0 {
		o.Timeout = DefaultHandlerTimeout
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxHandling
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Tracer == nil {
		o.Tracer = otel.GetTracerProvider()
	}
	return &Server{nc: nc, o: o, slots: make(chan struct{}, o.MaxInFlight), tracer: o.Tracer.Tracer(tracerName)}
}

// Close unsubscribes every subject the server answers.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for _, sub := range s.subs {
		err = errors.Join(err, sub.Unsubscribe())
	}
	s.subs = nil
	return err
}

// Handle answers requests on subject, shared in queue group queue with the other
// replicas, with h: the request decoded from JSON (a body that is not is answered 400
// invalid_request), the reply encoded to JSON. An error of h is answered as errs.Answer
// words it (a *errs.Error's kind, code and message; a failure no client caused is
// logged and answered 500 "internal error"); a panic of h is such a failure.
func Handle[Req, Rep any](s *Server, subject, queue string, h func(ctx context.Context, req Req) (Rep, error)) error {
	s.o.Metrics.handler(subject)
	run := func(ctx context.Context, data []byte) ([]byte, error) {
		var req Req
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, errs.Invalidf("the body is not a JSON %s request", subject)
		}
		rep, err := h(ctx, req)
		if err != nil {
			return nil, err
		}
		return json.Marshal(rep)
	}
	sub, err := s.nc.QueueSubscribe(subject, queue, func(m *nats.Msg) { s.dispatch(subject, m, run) })
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return nil
}

// exchange is one request being answered.
type exchange struct {
	subject string
	m       *nats.Msg
	span    trace.Span
	start   time.Time
}

// dispatch runs in the subscription's goroutine: it takes a place under the cap and
// hands the request to a goroutine of its own, or answers busy.
func (s *Server) dispatch(subject string, m *nats.Msg, run func(context.Context, []byte) ([]byte, error)) {
	if m.Reply == "" {
		return // a publish, not a request: nobody to answer
	}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(m.Header))
	ctx, span := s.tracer.Start(ctx, subject, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", subject)))
	x := exchange{subject: subject, m: m, span: span, start: time.Now()}
	select {
	case s.slots <- struct{}{}:
	default:
		s.answer(x, OutcomeBusy, errorReply(wireError{Status: http.StatusServiceUnavailable, Code: errs.CodeUnavailable, Reason: reasonBusy,
			Message: fmt.Sprintf("%s: busy (%d requests in flight); retry shortly", subject, cap(s.slots))}))
		return
	}
	s.o.Metrics.gauge(handling, 1)
	go s.serve(ctx, x, run)
}

// serve runs the handler within its timeout and answers; the handler's place under the
// cap is freed when it returns, even past its timeout.
func (s *Server) serve(ctx context.Context, x exchange, run func(context.Context, []byte) ([]byte, error)) {
	timeout := s.o.Timeout
	if d := callerTimeout(x.m); d > 0 && d < timeout {
		timeout = d
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-s.slots; s.o.Metrics.gauge(handling, -1) }()
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}
			}
		}()
		body, err := run(ctx, x.m.Data)
		done <- result{body, err}
	}()
	select {
	case r := <-done:
		switch {
		case r.err == nil:
			s.answer(x, OutcomeOK, &nats.Msg{Data: r.body})
		case ctx.Err() != nil && errors.Is(r.err, ctx.Err()):
			s.answerTimeout(x, timeout)
		default:
			s.answerError(ctx, x, r.err)
		}
	case <-ctx.Done():
		s.answerTimeout(x, timeout)
	}
}

func (s *Server) answerTimeout(x exchange, timeout time.Duration) {
	s.answer(x, OutcomeTimeout, errorReply(wireError{Status: http.StatusServiceUnavailable, Code: errs.CodeUnavailable, Reason: reasonTimeout,
		Message: fmt.Sprintf("%s: no answer within %s; retry shortly", x.subject, timeout)}))
}

// answerError answers err as errs words it for a client.
func (s *Server) answerError(ctx context.Context, x exchange, err error) {
	status, code, msg, ok := errs.Answer(err)
	if !ok {
		s.o.Logger.ErrorContext(ctx, "request handler failed", "subject", x.subject, "err", err)
		msg = "internal error"
	} else if _, domain := errs.As(err); status == http.StatusServiceUnavailable && (!domain || errors.Is(err, errs.ErrUnavailable)) {
		// As errs.Write: a dependency's failure is logged with its cause.
		s.o.Logger.WarnContext(ctx, "request handler: dependency unavailable", "subject", x.subject, "err", err)
	}
	outcome := OutcomeError
	if status < 500 {
		outcome = OutcomeClientError
	}
	s.answer(x, outcome, errorReply(wireError{Status: status, Code: code, Message: msg}))
}

// answer sends reply, records the outcome and ends the span.
func (s *Server) answer(x exchange, outcome string, reply *nats.Msg) {
	if outcome != OutcomeOK && outcome != OutcomeClientError {
		x.span.SetStatus(codes.Error, outcome)
	}
	x.span.SetAttributes(attribute.String("outcome", outcome))
	if err := x.m.RespondMsg(reply); err != nil {
		x.span.RecordError(err)
	}
	x.span.End()
	s.o.Metrics.replied(x.subject, outcome, time.Since(x.start))
}
