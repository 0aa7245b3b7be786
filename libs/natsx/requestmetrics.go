package natsx

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Request outcomes, the closed label sets of nats_requests_total (the caller's side) and
// nats_replies_total (the server's side).
const (
	OutcomeOK           = "ok"            // answered
	OutcomeClientError  = "client_error"  // an error answer of status 4xx (the request was refused)
	OutcomeError        = "error"         // an error answer of status 5xx from the handler
	OutcomeBusy         = "busy"          // the server was at its cap of requests in flight
	OutcomeTimeout      = "timeout"       // the handler did not finish within its timeout
	OutcomeNoResponders = "no_responders" // caller: nobody subscribed until the deadline
	OutcomeNoAnswer     = "no_answer"     // caller: no (readable) answer before the deadline
	OutcomeSaturated    = "saturated"     // caller: its own cap of requests in flight, until the deadline
)

var (
	clientOutcomes = []string{OutcomeOK, OutcomeClientError, OutcomeError, OutcomeBusy, OutcomeTimeout, OutcomeNoResponders, OutcomeNoAnswer, OutcomeSaturated}
	serverOutcomes = []string{OutcomeOK, OutcomeClientError, OutcomeError, OutcomeBusy, OutcomeTimeout}
	retryReasons   = []string{OutcomeNoResponders, OutcomeBusy}
)

// RequestMetrics are the request-reply metrics of a process, on both sides: create one
// per registry and give it to every Client and Server of the process. Their subject
// label is the subject of an Endpoint or a Handle, constants of the contracts: a closed
// set, each series created with its endpoint. A nil *RequestMetrics records nothing.
type RequestMetrics struct {
	requests, replies *prometheus.CounterVec
	retries           *prometheus.CounterVec
	requestDuration   *prometheus.HistogramVec
	replyDuration     *prometheus.HistogramVec
	inFlight, waiting prometheus.Gauge
	handling          prometheus.Gauge
}

// NewRequestMetrics registers the request-reply metrics on reg.
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &RequestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nats_requests_total",
			Help: "NATS requests this process sent, by subject and outcome (retries within one request count once)."}, []string{"subject", "outcome"}),
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nats_replies_total",
			Help: "NATS requests this process answered, by subject and outcome."}, []string{"subject", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nats_request_retries_total",
			Help: "NATS requests sent again within their deadline, by subject and reason (no_responders, busy)."}, []string{"subject", "reason"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nats_request_duration_seconds",
			Help: "Time from a NATS request to its answer, retries included, by subject.", Buckets: buckets}, []string{"subject"}),
		replyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nats_reply_duration_seconds",
			Help: "Time a NATS request's handler took, by subject.", Buckets: buckets}, []string{"subject"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nats_requests_in_flight",
			Help: "NATS requests this process has sent and awaits the answer of."}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nats_requests_waiting",
			Help: "NATS requests waiting for a slot under the process's cap of requests in flight."}),
		handling: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nats_replies_in_flight",
			Help: "NATS requests this process's handlers are working on."}),
	}
	reg.MustRegister(m.requests, m.replies, m.retries, m.requestDuration, m.replyDuration, m.inFlight, m.waiting, m.handling)
	return m
}

// endpoint creates the caller's series of subject.
func (m *RequestMetrics) endpoint(subject string) {
	if m == nil {
		return
	}
	for _, o := range clientOutcomes {
		m.requests.WithLabelValues(subject, o)
	}
	for _, r := range retryReasons {
		m.retries.WithLabelValues(subject, r)
	}
}

// handler creates the server's series of subject.
func (m *RequestMetrics) handler(subject string) {
	if m == nil {
		return
	}
	for _, o := range serverOutcomes {
		m.replies.WithLabelValues(subject, o)
	}
}

func (m *RequestMetrics) requested(subject, outcome string, elapsed time.Duration) {
	if m != nil {
		m.requests.WithLabelValues(subject, outcome).Inc()
		m.requestDuration.WithLabelValues(subject).Observe(elapsed.Seconds())
	}
}

func (m *RequestMetrics) retried(subject, reason string) {
	if m != nil {
		m.retries.WithLabelValues(subject, reason).Inc()
	}
}

func (m *RequestMetrics) replied(subject, outcome string, elapsed time.Duration) {
	if m != nil {
		m.replies.WithLabelValues(subject, outcome).Inc()
		if outcome != OutcomeBusy {
			m.replyDuration.WithLabelValues(subject).Observe(elapsed.Seconds())
		}
	}
}

// gauge moves g by d (a nil m: nothing).
func (m *RequestMetrics) gauge(g func(*RequestMetrics) prometheus.Gauge, d float64) {
	if m != nil {
		g(m).Add(d)
	}
}

func inFlight(m *RequestMetrics) prometheus.Gauge { return m.inFlight }
func waiting(m *RequestMetrics) prometheus.Gauge  { return m.waiting }
func handling(m *RequestMetrics) prometheus.Gauge { return m.handling }
