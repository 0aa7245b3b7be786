package jetstream

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The job queue as Prometheus sees it, read from JetStream at scrape time (the stream and
// its workers' consumer are the truth; a copy kept in the process would go stale when
// another replica publishes or consumes). Both the API and the worker export it, so the
// queue's depth and age stay visible when every worker is down.
var (
	queueJobsDesc = prometheus.NewDesc("dbtsync_svc_job_queue_jobs",
		"Sync jobs in the work queue (stream "+JobsStream+"): queued, waiting for their branch, retrying or running.", nil, nil)
	queueUndeliveredDesc = prometheus.NewDesc("dbtsync_svc_job_queue_undelivered",
		"Sync jobs no worker has taken yet (the workers' consumer's pending count; all jobs when no worker ever started).", nil, nil)
	queueInFlightDesc = prometheus.NewDesc("dbtsync_svc_job_queue_in_flight",
		"Sync jobs delivered to a worker and not yet acknowledged (running, or waiting for a redelivery).", nil, nil)
	queueAgeDesc = prometheus.NewDesc("dbtsync_svc_job_queue_oldest_age_seconds",
		"Age of the oldest sync job still in the work queue (0 when it is empty): how long the longest waiter has waited.", nil, nil)
)

// queueCollector reads the queue's state on each scrape.
type queueCollector struct {
	q        *Queue
	failures prometheus.Counter
	now      func() time.Time
}

// RegisterMetrics registers on reg the job queue's gauges and, beside them,
// dbtsync_svc_job_queue_read_failures_total (scrapes that could not read the queue:
// NATS unreachable or JetStream not answering).
func (q *Queue) RegisterMetrics(reg prometheus.Registerer) {
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "dbtsync_svc_job_queue_read_failures_total",
		Help: "Scrapes that could not read the job queue's state from JetStream."})
	reg.MustRegister(failures, &queueCollector{q: q, failures: failures, now: time.Now})
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueJobsDesc
	ch <- queueUndeliveredDesc
	ch <- queueInFlightDesc
	ch <- queueAgeDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	// Short: a scrape must not hang on an unreachable NATS (Prometheus times out at 10 s).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.q.state(ctx, c.now())
	if err != nil {
		// No gauges rather than stale or zero ones: absent data is what the alerts expect.
		c.failures.Inc()
		return
	}
	ch <- prometheus.MustNewConstMetric(queueJobsDesc, prometheus.GaugeValue, float64(st.jobs))
	ch <- prometheus.MustNewConstMetric(queueUndeliveredDesc, prometheus.GaugeValue, float64(st.undelivered))
	ch <- prometheus.MustNewConstMetric(queueInFlightDesc, prometheus.GaugeValue, float64(st.inFlight))
	ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, st.oldestAge.Seconds())
}

type queueState struct {
	jobs, undelivered, inFlight uint64
	oldestAge                   time.Duration
}

// state reads the stream and the deployments' consumers. The stream is a work queue:
// a job's message is removed when a worker acknowledges it (done, failed or canceled),
// so the stream's first message is the oldest job not yet finished; a job is in flight
// while a consumer has it pending, and undelivered otherwise (no consumer yet included).
func (q *Queue) state(ctx context.Context, now time.Time) (queueState, error) {
	info, err := q.stream.Info(ctx)
	if err != nil {
		return queueState{}, err
	}
	st := queueState{jobs: info.State.Msgs}
	if st.jobs > 0 && !info.State.FirstTime.IsZero() {
		st.oldestAge = max(now.Sub(info.State.FirstTime), 0)
	}
	consumers := q.stream.ListConsumers(ctx)
	for ci := range consumers.Info() {
		st.inFlight += uint64(ci.NumAckPending)
	}
	if err := consumers.Err(); err != nil {
		return queueState{}, err
	}
	st.undelivered = st.jobs - min(st.inFlight, st.jobs)
	return st, nil
}
