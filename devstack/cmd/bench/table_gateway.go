package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The gateway table: what the gateway costs per request against the backend alone, a bare
// Go reverse proxy, nginx, Caddy, HAProxy and a tuned Go reverse proxy. Every row sends
// the same request: POST /api/v1/embed/session/revoke with a 64-byte JSON body, a route
// that takes a user's bearer token and an API key alike, so the two gateway rows differ
// in the credential only.
func init() {
	registerTable(&Table{
		Name:     "gateway",
		Title:    "gateway vs. reverse proxies, POST with a 64-byte JSON body and a ~100-byte JSON answer",
		Baseline: "c",
		Scenarios: []Scenario{
			{Key: "a", Name: "(a) backend direct", Setup: proxyRow((*Env).Backend)},
			{Key: "b", Name: "(b) bare ReverseProxy", Setup: proxyRow((*Env).BareProxy)},
			{Key: "c", Name: "(c) nginx, 2 workers", Setup: proxyRow((*Env).Nginx)},
			{Key: "d", Name: "(d) Caddy", Setup: proxyRow((*Env).Caddy)},
			{Key: "e", Name: "(e) HAProxy, 2 threads", Setup: proxyRow((*Env).HAProxy)},
			{Key: "f", Name: "(f) gateway, Bearer JWT", Setup: gatewayRow(func(gw gatewayInfo) string { return "Bearer " + gw.Bearer })},
			{Key: "g", Name: "(g) gateway, Api-Key", Setup: gatewayRow(func(gw gatewayInfo) string { return "Api-Key " + gw.APIKey })},
			{Key: "h", Name: "(h) tuned ReverseProxy", Setup: proxyRow((*Env).TunedProxy)},
		},
		Ratios: []Ratio{{"f", "c"}, {"g", "c"}, {"f", "d"}, {"g", "d"}, {"g", "f"}, {"f", "h"}},
		Notes:  gatewayBars,
	})
}

// revokePath and revokeBody are every row's request.
const revokePath = "/api/v1/embed/session/revoke"

var revokeBody = []byte(`{"sessionId":"00000000000000000000000000000000000000000000000000"}`)

// benchAuthorization stands in for a credential where nothing checks it (the proxy
// rows): a header as long as a signed user token.
var benchAuthorization = "Bearer " + strings.Repeat("x", 400)

func getTargeter(url string) vegeta.Targeter {
	return vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: url})
}

func revokeTargeter(base, authorization string) vegeta.Targeter {
	return vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodPost,
		URL:    base + revokePath,
		Body:   revokeBody,
		Header: http.Header{"Authorization": {authorization}, "Content-Type": {"application/json"}},
	})
}

// proxyRow is a row sending the request to what start runs.
func proxyRow(start func(*Env, context.Context) (backend, error)) func(context.Context, *Env) (*Target, error) {
	return func(ctx context.Context, env *Env) (*Target, error) {
		p, err := start(env, ctx)
		if err != nil {
			return nil, err
		}
		return &Target{Targeter: revokeTargeter(p.URL, benchAuthorization), Proc: p.Proc}, nil
	}
}

// gatewayRow is a gateway row with the credential authorization picks from the seed.
func gatewayRow(authorization func(gatewayInfo) string) func(context.Context, *Env) (*Target, error) {
	return func(ctx context.Context, env *Env) (*Target, error) {
		gw, err := env.Gateway(ctx)
		if err != nil {
			return nil, err
		}
		return &Target{Targeter: revokeTargeter(gw.URL, authorization(gw)), Proc: gw.Proc, Prepare: gw.profile}, nil
	}
}

// gatewayBars compares (f) and (g) with the gateway's targets, as ratios of this run: at
// least 0.8x nginx's requests/s at most 1.5x its CPU per request, more requests/s and
// less CPU per request than Caddy, peak RSS at most 40 MiB, and an API key no dearer
// than a bearer token.
func gatewayBars(res map[string]*Summary) []string {
	ok := func(s *Summary) bool { return s != nil && s.Err == nil && s.RPS > 0 && s.CPUPerReq > 0 }
	nginx, caddy := res["c"], res["d"]
	var lines []string
	for _, k := range []string{"f", "g"} {
		s := res[k]
		if !ok(s) {
			continue
		}
		var parts []string
		if ok(nginx) {
			rps, cpu := s.RPS/nginx.RPS, s.CPUPerReq/nginx.CPUPerReq
			parts = append(parts, fmt.Sprintf("rps %.2fx (c) [need >= 0.80: %s], cpu %.2fx (c) [need <= 1.50: %s]", rps, passFail(rps >= 0.8), cpu, passFail(cpu <= 1.5)))
		}
		if ok(caddy) {
			parts = append(parts, fmt.Sprintf("vs (d) rps %.2fx cpu %.2fx [need > 1 and < 1: %s]", s.RPS/caddy.RPS, s.CPUPerReq/caddy.CPUPerReq,
				passFail(s.RPS > caddy.RPS && s.CPUPerReq < caddy.CPUPerReq)))
		}
		if s.Proc != nil {
			if b, err := peakRSS(s.Proc.PIDs()); err == nil {
				mib := float64(b) / (1 << 20)
				parts = append(parts, fmt.Sprintf("peak RSS %.1f MiB [need <= 40: %s]", mib, passFail(mib <= 40)))
			}
		}
		parts = append(parts, fmt.Sprintf("p99 %s", fmtDur(s.P99)))
		lines = append(lines, fmt.Sprintf("bars (%s): %s", k, strings.Join(parts, ", ")))
	}
	if f, g := res["f"], res["g"]; ok(f) && ok(g) {
		lines = append(lines, fmt.Sprintf("bars (g)/(f): an API key costs %.2fx the CPU of a bearer token [need <= 1: %s]",
			g.CPUPerReq/f.CPUPerReq, passFail(g.CPUPerReq <= f.CPUPerReq)))
	}
	return lines
}

func passFail(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}
