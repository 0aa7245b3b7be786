// Package natsx counts a NATS connection's errors for Prometheus, the same way in every
// process that talks to NATS (embed-svc's branch resolver, dbtsync-svc and its worker).
package natsx

import (
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics feeds nats_client_errors_total{kind} and nats_client_reconnects_total, and
// exports nats_client_connected once Track has been given the connection.
type Metrics struct {
	reg        prometheus.Registerer
	errors     *prometheus.CounterVec
	reconnects prometheus.Counter
}

// Error kinds: a closed set, one per handler.
const (
	KindAsync      = "async"      // an asynchronous error (slow consumer, permissions, protocol)
	KindDisconnect = "disconnect" // the connection was lost
)

// NewMetrics registers the counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nats_client_errors_total",
			Help: "NATS connection errors of this process, by kind (async: slow consumer, permissions, protocol; disconnect: connection lost)."}, []string{"kind"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "nats_client_reconnects_total",
			Help: "Times this process's NATS connection was re-established."}),
	}
	reg.MustRegister(m.errors, m.reconnects)
	m.errors.WithLabelValues(KindAsync)
	m.errors.WithLabelValues(KindDisconnect)
	return m
}

// Options are the connection handlers that count; pass them to nats.Connect. They
// replace any error, disconnect and reconnect handlers given before them.
func (m *Metrics) Options() []nats.Option {
	return []nats.Option{
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { m.errors.WithLabelValues(KindAsync).Inc() }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			// A disconnect without an error is our own Close or Drain.
			if err != nil {
				m.errors.WithLabelValues(KindDisconnect).Inc()
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { m.reconnects.Inc() }),
	}
}

// Track exports nats_client_connected: 1 while nc is connected, 0 otherwise.
func (m *Metrics) Track(nc *nats.Conn) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nats_client_connected",
		Help: "1 while this process's NATS connection is up, 0 while it is down or reconnecting."}, func() float64 {
		if nc.IsConnected() {
			return 1
		}
		return 0
	}))
}
