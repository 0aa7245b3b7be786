package app_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
)

// queueGauges reads the job queue's gauges from a process's registry.
func queueGauges(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// The API exports the job queue's depth and the age of its oldest job while no worker
// runs (what the dead-worker and queue-age alerts read), and the queue drains to zero
// once a worker takes the job.
func TestJobQueueMetrics(t *testing.T) {
	h := newHarness(t)
	reg := h.deps.Registry
	if g := queueGauges(t, reg); g["dbtsync_svc_job_queue_jobs"] != 0 || g["dbtsync_svc_job_queue_oldest_age_seconds"] != 0 {
		t.Fatalf("empty queue: %v", g)
	}
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": smallManifest("v12", "orders"), "ref": "queue-metrics"})
	if code != 202 {
		t.Fatalf("start: %d %v", code, acc)
	}
	// The oldest job's age grows while nothing takes it.
	deadline := time.Now().Add(10 * time.Second)
	var g map[string]float64
	for {
		g = queueGauges(t, reg)
		if g["dbtsync_svc_job_queue_oldest_age_seconds"] > 0 || time.Now().After(deadline) {
			break
		}
	}
	if g["dbtsync_svc_job_queue_jobs"] != 1 || g["dbtsync_svc_job_queue_undelivered"] != 1 || g["dbtsync_svc_job_queue_in_flight"] != 0 ||
		g["dbtsync_svc_job_queue_oldest_age_seconds"] <= 0 {
		t.Fatalf("one queued job, no worker: %v", g)
	}
	h.worker(worker.Options{})
	if job := h.waitJob(acc["syncJobId"].(string)); job["status"] != "succeeded" {
		t.Fatalf("job: %v", job)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		g = queueGauges(t, reg)
		if g["dbtsync_svc_job_queue_jobs"] == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval, bounded by the deadline
	}
	if g["dbtsync_svc_job_queue_jobs"] != 0 || g["dbtsync_svc_job_queue_undelivered"] != 0 || g["dbtsync_svc_job_queue_oldest_age_seconds"] != 0 ||
		g["dbtsync_svc_job_queue_read_failures_total"] != 0 {
		t.Fatalf("after the worker finished: %v", g)
	}
}
