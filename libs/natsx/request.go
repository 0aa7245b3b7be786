package natsx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/libs/errs"
)

// Client defaults.
const (
	DefaultRequestTimeout = 2 * time.Second
	DefaultMaxRequests    = 256
)

// ClientOptions configure a Client; the zero value takes the defaults.
type ClientOptions struct {
	// MaxInFlight bounds the requests awaiting their answer at once, over all the
	// client's endpoints (default DefaultMaxRequests); a request past it waits for a
	// place within its deadline.
	MaxInFlight int
	// Metrics records the requests (nil: none).
	Metrics *RequestMetrics
	// Tracer makes the client spans (nil: the global provider).
	Tracer trace.TracerProvider
}

// Client sends requests on one connection, with one cap of requests in flight: a process
// makes one per connection and builds its endpoints on it.
type Client struct {
	nc     *nats.Conn
	o      ClientOptions
	slots  chan struct{}
	tracer trace.Tracer
}

// NewClient returns a client sending on nc.
func NewClient(nc *nats.Conn, o ClientOptions) *Client {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxRequests
	}
	if o.Tracer == nil {
		o.Tracer = otel.GetTracerProvider()
	}
	return &Client{nc: nc, o: o, slots: make(chan struct{}, o.MaxInFlight), tracer: o.Tracer.Tracer(tracerName)}
}

// Endpoint is one subject's requests, of type Req answered by Rep.
type Endpoint[Req, Rep any] struct {
	c       *Client
	subject string
	timeout time.Duration
}

// NewEndpoint returns the endpoint of subject (a constant of its contract: it labels the
// metrics), each request waiting at most timeout (default DefaultRequestTimeout) for
// its answer, retries included, or less when its context ends sooner.
func NewEndpoint[Req, Rep any](c *Client, subject string, timeout time.Duration) *Endpoint[Req, Rep] {
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	c.o.Metrics.endpoint(subject)
	return &Endpoint[Req, Rep]{c: c, subject: subject, timeout: timeout}
}

// Call sends req and returns the answer. While nobody subscribes (the responders are
// reconnecting after losing their server, or restarting) or the responder answers busy,
// the request is sent again until the deadline: neither reached a handler. A request
// that reached one is never sent again (it may have been acted on).
//
// A failure to get an answer (no responder, no answer or an unreadable one before the
// deadline, this client's cap full until then) wraps errs.ErrUnavailable; an error answer
// is typed (remoteError): an *errs.Error with the server's kind, code and message.
func (e *Endpoint[Req, Rep]) Call(ctx context.Context, req Req) (Rep, error) {
	var rep Rep
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	ctx, span := e.c.tracer.Start(ctx, e.subject, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", e.subject)))
	defer span.End()
	body, err := json.Marshal(req)
	if err != nil {
		return rep, fmt.Errorf("%s: encode the request: %w", e.subject, err)
	}
	resp, outcome, err := e.send(ctx, body)
	if err == nil {
		if jerr := json.Unmarshal(resp.Data, &rep); jerr != nil {
			outcome, err = OutcomeNoAnswer, errors.Join(errs.ErrUnavailable, fmt.Errorf("%s: an unreadable answer", e.subject))
		}
	}
	span.SetAttributes(attribute.String("outcome", outcome))
	if outcome != OutcomeOK && outcome != OutcomeClientError {
		span.SetStatus(codes.Error, outcome)
	}
	e.c.o.Metrics.requested(e.subject, outcome, time.Since(start))
	return rep, err
}

// send takes a place under the client's cap and sends body until an answer comes,
// retrying no responders and busy answers within ctx.
func (e *Endpoint[Req, Rep]) send(ctx context.Context, body []byte) (*nats.Msg, string, error) {
	m := e.c.o.Metrics
	select {
	case e.c.slots <- struct{}{}:
	default:
		m.gauge(waiting, 1)
		select {
		case e.c.slots <- struct{}{}:
			m.gauge(waiting, -1)
		case <-ctx.Done():
			m.gauge(waiting, -1)
			return nil, OutcomeSaturated, errors.Join(errs.ErrUnavailable,
				fmt.Errorf("%s: %d requests of this process in flight until the deadline: %w", e.subject, cap(e.c.slots), ctx.Err()))
		}
	}
	m.gauge(inFlight, 1)
	defer func() { <-e.c.slots; m.gauge(inFlight, -1) }()
	wait := 25 * time.Millisecond
	// The answer that made the last retry (no responders or busy): when the deadline
	// ends the request sent again before its answer comes, that is still what the caller
	// learns, with the deadline (a no-responders status can be late on a loaded machine).
	var lastOutcome string
	var lastErr error
	for {
		msg := nats.NewMsg(e.subject)
		msg.Data = body
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(msg.Header))
		if d, ok := ctx.Deadline(); ok {
			msg.Header.Set(timeoutHeader, time.Until(d).String())
		}
		resp, err := e.c.nc.RequestMsgWithContext(ctx, msg)
		var outcome string
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			outcome, err = OutcomeNoResponders, errors.Join(errs.ErrUnavailable, fmt.Errorf("%s: %w", e.subject, err))
		case err != nil && lastErr != nil && ctx.Err() != nil:
			return nil, lastOutcome, errors.Join(lastErr, fmt.Errorf("%s: sent again until the deadline: %w", e.subject, err))
		case err != nil:
			return nil, OutcomeNoAnswer, errors.Join(errs.ErrUnavailable, fmt.Errorf("%s: %w", e.subject, err))
		case resp.Header.Get(errorCodeHeader) == "":
			return resp, OutcomeOK, nil
		default:
			err = remoteError(e.subject, resp)
			if !errors.Is(err, ErrBusy) {
				return nil, outcomeOf(err), err
			}
			outcome = OutcomeBusy
		}
		var pause time.Duration
		pause, wait = backoff(wait)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < pause {
			return nil, outcome, err
		}
		m.retried(e.subject, outcome)
		lastOutcome, lastErr = outcome, err
		select {
		case <-ctx.Done():
			return nil, outcome, err
		case <-time.After(pause):
		}
	}
}

// outcomeOf is the outcome of an error answer other than busy.
func outcomeOf(err error) string {
	switch {
	case errors.Is(err, ErrHandlerTimeout):
		return OutcomeTimeout
	case errs.IsUnavailable(err):
		return OutcomeError
	}
	return OutcomeClientError
}
