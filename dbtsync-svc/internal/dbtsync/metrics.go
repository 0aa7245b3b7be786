package dbtsync

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/identity"
)

// Metrics are the domain counters, the same names in the API and the worker process.
type Metrics struct {
	Jobs     *prometheus.CounterVec // dbtsync_svc_sync_jobs_total{outcome}
	Attempts *prometheus.CounterVec // dbtsync_svc_sync_job_attempts_total{result}
	Queued   *prometheus.CounterVec // dbtsync_svc_sync_jobs_queued_total{source}
	Versions prometheus.Counter     // dbtsync_svc_branch_versions_written_total
	Uploaded prometheus.Counter     // dbtsync_svc_manifest_bytes_uploaded_total
}

// NewMetrics registers the counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Jobs:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dbtsync_svc_sync_jobs_total", Help: "Finished sync jobs by outcome (succeeded, failed)."}, []string{"outcome"}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dbtsync_svc_sync_job_attempts_total", Help: "Sync job runs by result (succeeded, failed, retry)."}, []string{"result"}),
		Queued:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dbtsync_svc_sync_jobs_queued_total", Help: "Sync jobs accepted and queued, by source."}, []string{"source"}),
		Versions: prometheus.NewCounter(prometheus.CounterOpts{Name: "dbtsync_svc_branch_versions_written_total", Help: "Data-model branch versions written."}),
		Uploaded: prometheus.NewCounter(prometheus.CounterOpts{Name: "dbtsync_svc_manifest_bytes_uploaded_total", Help: "Bytes of uploaded manifests streamed to the object store."}),
	}
	reg.MustRegister(m.Jobs, m.Attempts, m.Queued, m.Versions, m.Uploaded)
	// Every outcome exists at zero from the start: the stuck-worker alert compares the
	// attempts' increase with zero, which a series that was never written cannot show.
	for _, s := range []string{StatusSucceeded, StatusFailed, StatusCanceled} {
		m.Jobs.WithLabelValues(s)
		m.Attempts.WithLabelValues(s)
	}
	m.Attempts.WithLabelValues("retry")
	m.Queued.WithLabelValues("git")
	m.Queued.WithLabelValues("manifest")
	return m
}

// instrumentingMiddleware counts the API's domain outcomes: sync jobs queued (by source)
// and manifest bytes streamed to the object store (nil m: no decorator).
func instrumentingMiddleware(m *Metrics) func(Service) Service {
	if m == nil {
		return nil
	}
	return func(next Service) Service { return &instrumenting{Service: next, m: m} }
}

type instrumenting struct {
	Service
	m *Metrics
}

func (i *instrumenting) StartSync(ctx context.Context, p *identity.Principal, deploymentID int64, body SyncRequestBody) (SyncStarted, error) {
	res, err := i.Service.StartSync(ctx, p, deploymentID, body)
	if res.ManifestBytes > 0 {
		i.m.Uploaded.Add(float64(res.ManifestBytes))
	}
	if err == nil {
		i.m.Queued.WithLabelValues(res.Source).Inc()
	}
	return res, err
}
