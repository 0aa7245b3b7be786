package devstack_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// The request-reply kit (libs/natsx: Server, Handle, Client, Endpoint) against a real
// nats-server: each test has its own server, connections and registry.

const (
	echoSubject = "test.echo"
	echoQueue   = "test-echo"
)

type echoRequest struct {
	N int `json:"n"`
}

type echoReply struct {
	N int `json:"n"`
}

// rrPair is a server and a client of the kit on two connections to one nats-server,
// recording their metrics on one registry.
type rrPair struct {
	nc     *nats.Conn // the client's connection
	reg    *prometheus.Registry
	server *natsx.Server
	client *natsx.Client
}

func newRRPair(t *testing.T, so natsx.ServerOptions, co natsx.ClientOptions) *rrPair {
	t.Helper()
	ns := devstack.NATSForTest(t)
	p := &rrPair{nc: devstack.NATSConnForTest(t, ns.URL), reg: prometheus.NewRegistry()}
	m := natsx.NewRequestMetrics(p.reg)
	so.Metrics, co.Metrics = m, m
	p.server = natsx.NewServer(devstack.NATSConnForTest(t, ns.URL), so)
	t.Cleanup(func() { _ = p.server.Close() })
	p.client = natsx.NewClient(p.nc, co)
	return p
}

// serve answers echoSubject with h and waits until the server has the subscription.
func (p *rrPair) serve(t *testing.T, h func(ctx context.Context, req echoRequest) (echoReply, error)) {
	t.Helper()
	if err := natsx.Handle(p.server, echoSubject, echoQueue, h); err != nil {
		t.Fatal(err)
	}
}

func (p *rrPair) endpoint(timeout time.Duration) *natsx.Endpoint[echoRequest, echoReply] {
	return natsx.NewEndpoint[echoRequest, echoReply](p.client, echoSubject, timeout)
}

func (p *rrPair) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return devstack.MetricValue(t, p.reg, name, labels...)
}

// gate holds handlers until it is opened, counting those inside and the most at once.
type gate struct {
	open          chan struct{}
	once          sync.Once
	inside, most  atomic.Int64
	entered, left atomic.Int64
}

// newGate returns a closed gate, opened at the test's end at the latest.
func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	t.Cleanup(g.release)
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (g *gate) handler(_ context.Context, req echoRequest) (echoReply, error) {
	g.entered.Add(1)
	n := g.inside.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	<-g.open
	g.inside.Add(-1)
	g.left.Add(1)
	return echoReply(req), nil
}

func kindOf(err error) errs.Kind {
	if e, ok := errs.As(err); ok {
		return e.Kind
	}
	return 0
}

// The client's span is the requester's child, and the server's span, across the wire,
// the client span's child in the same trace.
func TestRequestServerSpanIsTheChildOfTheClientSpan(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := newRRPair(t, natsx.ServerOptions{Tracer: tp}, natsx.ClientOptions{Tracer: tp})
	p.serve(t, func(_ context.Context, req echoRequest) (echoReply, error) { return echoReply(req), nil })

	ctx, parent := tp.Tracer("test").Start(context.Background(), "requester")
	rep, err := p.endpoint(5*time.Second).Call(ctx, echoRequest{N: 7})
	parent.End()
	if err != nil || rep.N != 7 {
		t.Fatalf("echo: %+v %v", rep, err)
	}
	var client, server sdktrace.ReadOnlySpan
	apitest.Eventually(t, 10*time.Second, "both spans ended", func() (bool, string) {
		for _, s := range rec.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindClient:
				client = s
			case trace.SpanKindServer:
				server = s
			}
		}
		return client != nil && server != nil, "client and server spans not both ended"
	})
	if client.Name() != echoSubject || client.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("client span %q, parent %v: want %q, the requester's child", client.Name(), client.Parent().SpanID(), echoSubject)
	}
	if server.Name() != echoSubject || server.Parent().SpanID() != client.SpanContext().SpanID() ||
		server.SpanContext().TraceID() != parent.SpanContext().TraceID() || !server.Parent().IsRemote() {
		t.Errorf("server span %q, parent %v (remote %v), trace %v: want the client span %v's remote child in trace %v",
			server.Name(), server.Parent().SpanID(), server.Parent().IsRemote(), server.SpanContext().TraceID(),
			client.SpanContext().SpanID(), parent.SpanContext().TraceID())
	}
	if got := p.metric(t, "nats_requests_total", natsx.OutcomeOK, echoSubject); got != 1 {
		t.Errorf(`nats_requests_total{outcome="ok"} = %v, want 1`, got)
	}
	if got := p.metric(t, "nats_replies_total", natsx.OutcomeOK, echoSubject); got != 1 {
		t.Errorf(`nats_replies_total{outcome="ok"} = %v, want 1`, got)
	}
}

// A handler still working at its timeout is answered a timeout error (503, the handler's
// result dropped); the caller's remaining time bounds the handler when it is shorter.
func TestHandlerOverItsTimeoutAnswersTimeout(t *testing.T) {
	p := newRRPair(t, natsx.ServerOptions{Timeout: 200 * time.Millisecond}, natsx.ClientOptions{})
	g := newGate(t)
	p.serve(t, g.handler)
	_, err := p.endpoint(time.Minute).Call(context.Background(), echoRequest{N: 1})
	if !errors.Is(err, natsx.ErrHandlerTimeout) || kindOf(err) != errs.Unavailable || !errs.IsUnavailable(err) {
		t.Fatalf("a handler over its timeout: %v, want a typed unavailable ErrHandlerTimeout", err)
	}
	if got := p.metric(t, "nats_replies_total", natsx.OutcomeTimeout, echoSubject); got != 1 {
		t.Errorf(`nats_replies_total{outcome="timeout"} = %v, want 1`, got)
	}
	if got := p.metric(t, "nats_requests_total", natsx.OutcomeTimeout, echoSubject); got != 1 {
		t.Errorf(`nats_requests_total{outcome="timeout"} = %v, want 1`, got)
	}
}

func TestHandlerIsToldTheCallersRemainingTime(t *testing.T) {
	p := newRRPair(t, natsx.ServerOptions{Timeout: time.Hour}, natsx.ClientOptions{})
	left := make(chan time.Duration, 1)
	p.serve(t, func(ctx context.Context, req echoRequest) (echoReply, error) {
		d, ok := ctx.Deadline()
		if !ok {
			left <- -1
		} else {
			left <- time.Until(d)
		}
		return echoReply(req), nil
	})
	const callerTimeout = 30 * time.Second
	if _, err := p.endpoint(callerTimeout).Call(context.Background(), echoRequest{}); err != nil {
		t.Fatal(err)
	}
	if d := <-left; d <= 0 || d > callerTimeout {
		t.Fatalf("the handler's time left: %v; want the caller's (at most %v), not the server's hour", d, callerTimeout)
	}
}

// Past its cap of handlers in flight a server answers busy at once; the client sends
// again within its deadline, and is answered once a place frees.
func TestServerPastItsCapAnswersBusy(t *testing.T) {
	const limit = 2
	p := newRRPair(t, natsx.ServerOptions{MaxInFlight: limit}, natsx.ClientOptions{})
	g := newGate(t)
	p.serve(t, g.handler)
	e := p.endpoint(time.Minute)
	var wg sync.WaitGroup
	errc := make(chan error, limit+1)
	for i := range limit {
		wg.Go(func() { _, err := e.Call(context.Background(), echoRequest{N: i}); errc <- err })
	}
	apitest.Eventually(t, 10*time.Second, "the cap's handlers inside", func() (bool, string) {
		return g.inside.Load() == limit, "handlers inside: " + itoa(g.inside.Load())
	})

	short := p.endpoint(300 * time.Millisecond)
	_, err := short.Call(context.Background(), echoRequest{N: 99})
	if !errors.Is(err, natsx.ErrBusy) || kindOf(err) != errs.Unavailable || !errs.IsUnavailable(err) {
		t.Fatalf("past the cap: %v, want a typed unavailable ErrBusy", err)
	}
	busy := p.metric(t, "nats_replies_total", natsx.OutcomeBusy, echoSubject)
	if busy < 1 || p.metric(t, "nats_request_retries_total", natsx.OutcomeBusy, echoSubject) < 1 {
		t.Fatalf("busy answers %v, busy retries %v: want the busy request answered busy and sent again", busy,
			p.metric(t, "nats_request_retries_total", natsx.OutcomeBusy, echoSubject))
	}

	// A request waiting out busy answers is served once the handlers leave.
	wg.Go(func() { _, err := e.Call(context.Background(), echoRequest{N: 3}); errc <- err })
	apitest.Eventually(t, 10*time.Second, "the next request answered busy", func() (bool, string) {
		n := p.metric(t, "nats_replies_total", natsx.OutcomeBusy, echoSubject)
		return n > busy, "busy answers: " + itoa(int64(n))
	})
	g.release()
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Errorf("a request under the cap, or retried until a place freed: %v", err)
		}
	}
	if g.entered.Load() != limit+1 || g.most.Load() != limit {
		t.Errorf("handlers run: %d, most at once: %d; want %d and %d", g.entered.Load(), g.most.Load(), limit+1, limit)
	}
}

// A client sends at most its cap of requests at once; the rest wait for a place.
func TestClientCapBoundsRequestsInFlight(t *testing.T) {
	const limit, calls = 2, 5
	p := newRRPair(t, natsx.ServerOptions{MaxInFlight: 100}, natsx.ClientOptions{MaxInFlight: limit})
	g := newGate(t)
	p.serve(t, g.handler)
	e := p.endpoint(time.Minute)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range calls {
		wg.Go(func() {
			if rep, err := e.Call(context.Background(), echoRequest{N: i}); err != nil || rep.N != i {
				failed.Add(1)
			}
		})
	}
	apitest.Eventually(t, 10*time.Second, "the cap in flight, the rest waiting", func() (bool, string) {
		inFlight, waiting := p.metric(t, "nats_requests_in_flight"), p.metric(t, "nats_requests_waiting")
		return inFlight == limit && waiting == calls-limit && g.inside.Load() == limit,
			"in flight " + itoa(int64(inFlight)) + ", waiting " + itoa(int64(waiting)) + ", handlers inside " + itoa(g.inside.Load())
	})
	g.release()
	wg.Wait()
	if failed.Load() != 0 || g.entered.Load() != calls || g.most.Load() != limit {
		t.Fatalf("failed %d, handlers run %d, most at once %d; want 0, %d, %d", failed.Load(), g.entered.Load(), g.most.Load(), calls, limit)
	}
	if p.metric(t, "nats_requests_in_flight") != 0 || p.metric(t, "nats_requests_waiting") != 0 {
		t.Error("requests still counted in flight or waiting after all were answered")
	}
}

// With nobody subscribed, the request is sent again until its deadline, then
// unavailable for no responders.
func TestNoRespondersIsRetriedUntilTheDeadline(t *testing.T) {
	p := newRRPair(t, natsx.ServerOptions{}, natsx.ClientOptions{})
	_, err := p.endpoint(300*time.Millisecond).Call(context.Background(), echoRequest{})
	if !errors.Is(err, nats.ErrNoResponders) || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("no responders: %v, want unavailable for no responders", err)
	}
	if n := p.metric(t, "nats_request_retries_total", natsx.OutcomeNoResponders, echoSubject); n < 1 {
		t.Errorf("retries for no responders: %v, want at least one", n)
	}
	if n := p.nc.Stats().InMsgs; n < 2 {
		t.Errorf("no-responders answers: %d, want the request sent again at least once", n)
	}
	if n := p.metric(t, "nats_requests_total", natsx.OutcomeNoResponders, echoSubject); n != 1 {
		t.Errorf(`nats_requests_total{outcome="no_responders"} = %v, want 1 (retries count once)`, n)
	}
}

// When the deadline ends a request sent again before its answer comes, the caller still
// learns what the last answer said: nobody subscribed (a no-responders status can come
// late on a loaded machine; here a silent subscriber holds the resend to the deadline).
func TestARetryCutByTheDeadlineReportsTheLastAnswer(t *testing.T) {
	p := newRRPair(t, natsx.ServerOptions{}, natsx.ClientOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := p.endpoint(2*time.Second).Call(context.Background(), echoRequest{})
		done <- err
	}()
	apitest.Eventually(t, 2*time.Second, "the first request answered: no responders", func() (bool, string) {
		return p.nc.Stats().InMsgs >= 1, "no answer yet"
	})
	silent := devstack.NATSConnForTest(t, p.nc.ConnectedUrl())
	if _, err := silent.Subscribe(echoSubject, func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := silent.Flush(); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, nats.ErrNoResponders) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("a resend cut by the deadline: %v; want unavailable, for no responders, then the deadline", err)
	}
	if n := p.metric(t, "nats_requests_total", natsx.OutcomeNoResponders, echoSubject); n != 1 {
		t.Errorf(`nats_requests_total{outcome="no_responders"} = %v, want 1`, n)
	}
}

// An error answer arrives typed: a client error with its kind, code and message; a
// request that is not the handler's JSON a 400; a failure no client caused (an error,
// a panic) unavailable, saying nothing of its cause.
func TestErrorAnswersArriveTyped(t *testing.T) {
	p := newRRPair(t, natsx.ServerOptions{}, natsx.ClientOptions{})
	p.serve(t, func(_ context.Context, req echoRequest) (echoReply, error) {
		switch req.N {
		case 1:
			return echoReply{}, errs.Conflictf("folder %d holds items", req.N).WithCode(errs.CodeFolderNotEmpty)
		case 2:
			return echoReply{}, errors.New("secret cause")
		case 3:
			panic("secret panic")
		}
		return echoReply(req), nil
	})
	e := p.endpoint(5 * time.Second)
	_, err := e.Call(context.Background(), echoRequest{N: 1})
	if got, ok := errs.As(err); !ok || got.Kind != errs.Conflict || got.Code != errs.CodeFolderNotEmpty || got.Message != "folder 1 holds items" || errs.IsUnavailable(err) {
		t.Errorf("a conflict answer: %#v (%v), want kind Conflict, code %s and the handler's message", got, err, errs.CodeFolderNotEmpty)
	}
	for _, n := range []int{2, 3} {
		_, err := e.Call(context.Background(), echoRequest{N: n})
		if got, ok := errs.As(err); !ok || got.Kind != errs.Unavailable || got.Message != "internal error" || !errors.Is(err, errs.ErrUnavailable) {
			t.Errorf("a handler's failure (%d): %#v (%v), want unavailable, \"internal error\"", n, got, err)
		}
	}
	_, err = natsx.NewEndpoint[string, echoReply](p.client, echoSubject, 5*time.Second).Call(context.Background(), "not an echo request")
	if kindOf(err) != errs.Invalid {
		t.Errorf("a body that is not the request's JSON: %v, want kind Invalid", err)
	}
	for outcome, want := range map[string]float64{natsx.OutcomeClientError: 2, natsx.OutcomeError: 2} {
		if got := p.metric(t, "nats_replies_total", outcome, echoSubject); got != want {
			t.Errorf("nats_replies_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
		if got := p.metric(t, "nats_requests_total", outcome, echoSubject); got != want {
			t.Errorf("nats_requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}
