package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// The webhooks table: deliveries per second and the delay from an audit event's time to
// its delivery, while one of the account's receivers is dead.

const (
	// webhookReceivers are the well-behaved receivers, each subscribed to every folder
	// creation of acme: one event makes that many deliveries.
	webhookReceivers = 4
	// webhookEvents are the folders created per run (the load), by webhookWorkers.
	webhookEvents  = 60
	webhookWorkers = 4
	// webhookWait bounds how long a run waits for its deliveries after the last event.
	webhookWait = 90 * time.Second
)

func init() {
	registerTable(&Table{
		Name: "webhooks",
		Title: fmt.Sprintf("webhook deliveries: %d folder creations a run (%d workers) on acme, each delivered to %d receivers on loopback, beside a dead one",
			webhookEvents, webhookWorkers, webhookReceivers),
		Baseline:  "deliver",
		Scenarios: []Scenario{{Key: "deliver", Name: "deliveries, one receiver dead", Setup: setupWebhooks}},
		Notes:     func(map[string]*Summary) []string { return webhookNotes() },
		Legend: []string{
			"legend: a run creates the folders through the gateway and waits until every well-behaved receiver got every",
			"        folder's event: req/s = deliveries received / (first creation -> last delivery), p50/p99 = the received",
			"        time minus the envelope's timestamp (the audit event's time), medians over the rounds; errors = deliveries",
			"        missing after the wait. The dead receiver (same account, same events) accepts connections and never",
			"        answers: each of its attempts holds a delivery slot for WEBHOOK_ATTEMPT_TIMEOUT. cpu_us/req = embed-svc's",
			"        CPU (the audit ingest, the dispatcher and the deliverer) per delivery. load = the 1-minute load average",
			"        at the end of each run: other work on the 2 shared cores delays deliveries as much as the engine does.",
			"        Run 1 is the warm-up (unless -warmup 0); runs are numbered across the table.",
		},
	})
}

var webhookLines struct {
	sync.Mutex
	lines []string
}

func addWebhookLine(format string, args ...any) {
	webhookLines.Lock()
	webhookLines.lines = append(webhookLines.lines, fmt.Sprintf(format, args...))
	webhookLines.Unlock()
}

func webhookNotes() []string {
	webhookLines.Lock()
	defer webhookLines.Unlock()
	return slices.Clone(webhookLines.lines)
}

// hookReceiver records the first arrival of each folder's delivery and the event time
// its envelope carries.
type hookReceiver struct {
	srv *http.Server
	url string
	mu  sync.Mutex
	got map[int64]hookArrival // by folder id (the event's target)
}

type hookArrival struct{ received, eventTime time.Time }

func startHookReceiver() (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := &hookReceiver{url: "http://" + ln.Addr().String() + "/hook", got: map[int64]hookArrival{}}
	rc.srv = &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var env struct {
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			Target struct {
				ID string `json:"id"`
			} `json:"target"`
		} `json:"data"`
	}
	var id int64
	if json.Unmarshal(body, &env) == nil {
		_, _ = fmt.Sscan(env.Data.Target.ID, &id)
	}
	if id != 0 {
		rc.mu.Lock()
		if _, seen := rc.got[id]; !seen {
			rc.got[id] = hookArrival{received: now, eventTime: env.Timestamp}
		}
		rc.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// deadReceiver accepts connections and never answers, until the bench stops.
func deadReceiver(env *Env) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	var mu sync.Mutex
	var held []net.Conn // kept open, never read: each attempt times out
	env.beforeStop(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	return "http://" + ln.Addr().String() + "/hook", nil
}

func setupWebhooks(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	token := acme.Users["admin"].Bearer
	admin := "Bearer " + token
	dep := acme.Deployments[1].ID
	c := newAPIClient(p.Gateway)

	subscribe := func(url string) error {
		return c.do(ctx, http.MethodPost, "/api/v1/webhooks", admin,
			map[string]any{"url": url, "events": []string{"workspace.folder.create"}, "description": "bench"}, http.StatusCreated, nil)
	}
	dead, err := deadReceiver(env)
	if err != nil {
		return nil, err
	}
	if err := subscribe(dead); err != nil {
		return nil, err
	}
	var rcs []*hookReceiver
	for range webhookReceivers {
		rc, err := startHookReceiver()
		if err != nil {
			return nil, err
		}
		env.beforeStop(func() { _ = rc.srv.Close() })
		if err := subscribe(rc.url); err != nil {
			return nil, err
		}
		rcs = append(rcs, rc)
	}

	proc := singleProc("embed-svc", p.PIDs["embed-svc"])
	round := 0
	return &Target{Proc: proc, RSS: []*Proc{proc}, Measure: func(ctx context.Context) (roundResult, error) {
		round++
		ids := make([]int64, webhookEvents)
		cpu0 := cpuMicros(proc.PIDs())
		start := time.Now()
		err := parallel(ctx, webhookEvents, webhookWorkers, func(ctx context.Context, i int) error {
			id, err := c.createFolder(ctx, token, dep, fmt.Sprintf("webhook bench %d-%d-%d", start.UnixNano(), round, i), 0)
			ids[i] = id
			return err
		})
		if err != nil {
			return roundResult{}, err
		}
		created := time.Now()
		var delays []time.Duration
		var last time.Time
		want := webhookEvents * webhookReceivers
		for {
			delays, last = delays[:0], time.Time{}
			for _, rc := range rcs {
				rc.mu.Lock()
				for _, id := range ids {
					if a, ok := rc.got[id]; ok {
						delays = append(delays, a.received.Sub(a.eventTime))
						if a.received.After(last) {
							last = a.received
						}
					}
				}
				rc.mu.Unlock()
			}
			if len(delays) == want || time.Since(created) > webhookWait || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cpu1 := cpuMicros(proc.PIDs())
		load := loadAvg()
		if len(delays) == 0 {
			addWebhookLine("run %d: no delivery within %s of the last event (load %s)", round, webhookWait, load)
			return roundResult{requests: uint64(want), errors: uint64(want), errs: []string{"no delivery"}}, nil
		}
		slices.Sort(delays)
		q := func(f float64) time.Duration { return delays[min(len(delays)-1, int(f*float64(len(delays))))] }
		rr := roundResult{
			rps:       float64(len(delays)) / last.Sub(start).Seconds(),
			p50:       q(0.50),
			p99:       q(0.99),
			requests:  uint64(want),
			errors:    uint64(want - len(delays)),
			cpuPerReq: (cpu1 - cpu0) / float64(len(delays)),
		}
		if rr.errors > 0 {
			rr.errs = []string{fmt.Sprintf("%d deliveries missing after %s", rr.errors, webhookWait)}
		}
		addWebhookLine("run %d: %d/%d deliveries, %.1f/s, delay p50 %s p99 %s max %s, load average %s",
			round, len(delays), want, rr.rps, rr.p50.Round(time.Millisecond), rr.p99.Round(time.Millisecond),
			delays[len(delays)-1].Round(time.Millisecond), load)
		return rr, nil
	}}, nil
}
