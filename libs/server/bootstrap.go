package server

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/analyticsco/platform/libs/config"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/obs"
)

// Process is what every main sets up first: a logger, a context canceled by SIGINT or
// SIGTERM, and tracing. Close flushes spans and releases the signal handler.
type Process struct {
	Ctx    context.Context
	Logger *slog.Logger
	Close  func()
}

// Start logs the configuration (secrets masked) and sets up signals and tracing.
func Start(service string, common config.Common, cfg any) (*Process, error) {
	log := logging.New(os.Stdout, common.LogLevel, service)
	log.Info("starting", "config", config.LogValue(cfg))
	ml := SetMemoryLimit("/sys/fs/cgroup", os.Getenv)
	log.Info("memory limit", "gomemlimit_bytes", ml.Bytes, "from", ml.Reason)
	ctx, stop := SignalContext()
	name := common.ServiceName
	if name == "" {
		name = service
	}
	shutdown, err := obs.SetupTracing(ctx, name, common.OTLPEndpoint)
	if err != nil {
		stop()
		return nil, err
	}
	return &Process{Ctx: ctx, Logger: log, Close: func() {
		_ = shutdown(context.Background())
		stop()
		log.Info("stopped")
	}}, nil
}

// NotFound answers every request it gets with a JSON 404; a service mounts it at "/"
// so unknown paths never get Go's plain-text 404.
func NotFound(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
}
