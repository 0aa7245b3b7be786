package main

import (
	"context"
	"fmt"
	"net/http"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The gateway table: what the gateway costs per request against the backend
// alone, a bare Go reverse proxy and nginx (issue 2, "Benchmark").
func init() {
	registerTable(&Table{
		Name:     "gateway",
		Title:    "gateway vs. reverse proxies, GET/POST with a ~100-byte JSON answer",
		Baseline: "b",
		Scenarios: []Scenario{
			{Key: "a", Name: "(a) backend direct", Setup: func(ctx context.Context, env *Env) (*Target, error) {
				be, err := env.Backend(ctx)
				if err != nil {
					return nil, err
				}
				return &Target{Targeter: getTargeter(be.URL + "/api/v1/deployments/1/workspace"), Proc: be.Proc}, nil
			}},
			{Key: "b", Name: "(b) bare ReverseProxy", Setup: func(ctx context.Context, env *Env) (*Target, error) {
				p, err := env.BareProxy(ctx)
				if err != nil {
					return nil, err
				}
				return &Target{Targeter: getTargeter(p.URL + "/api/v1/deployments/1/workspace"), Proc: p.Proc}, nil
			}},
			{Key: "c", Name: "(c) nginx, 2 workers", Setup: func(ctx context.Context, env *Env) (*Target, error) {
				p, err := env.Nginx(ctx)
				if err != nil {
					return nil, err
				}
				return &Target{Targeter: getTargeter(p.URL + "/api/v1/deployments/1/workspace"), Proc: p.Proc}, nil
			}},
			{Key: "d", Name: "(d) gateway, Bearer JWT", Setup: func(ctx context.Context, env *Env) (*Target, error) {
				gw, err := env.Gateway(ctx)
				if err != nil {
					return nil, err
				}
				hdr := http.Header{"Authorization": {"Bearer " + gw.Bearer}}
				return &Target{Targeter: vegeta.NewStaticTargeter(vegeta.Target{
					Method: http.MethodGet,
					URL:    fmt.Sprintf("%s/api/v1/deployments/%d/workspace", gw.URL, gw.DeploymentID),
					Header: hdr,
				}), Proc: gw.Proc}, nil
			}},
			{Key: "e", Name: "(e) gateway, Api-Key", Setup: func(ctx context.Context, env *Env) (*Target, error) {
				gw, err := env.Gateway(ctx)
				if err != nil {
					return nil, err
				}
				hdr := http.Header{"Authorization": {"Api-Key " + gw.APIKey}, "Content-Type": {"application/json"}}
				return &Target{Targeter: vegeta.NewStaticTargeter(vegeta.Target{
					Method: http.MethodPost,
					URL:    gw.URL + "/api/v1/embed/generate-session",
					Body:   fmt.Appendf(nil, `{"deploymentId": %d}`, gw.DeploymentID),
					Header: hdr,
				}), Proc: gw.Proc}, nil
			}},
		},
		Ratios: []Ratio{{"d", "b"}, {"e", "b"}, {"d", "c"}},
		Notes:  gatewayBars,
	})
}

func getTargeter(url string) vegeta.Targeter {
	return vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: url})
}

// gatewayBars compares (d) and (e) with the bars: at least 1.3x the bare
// proxy's requests/s and at most 35 us of CPU per request.
func gatewayBars(res map[string]*Summary) []string {
	b := res["b"]
	var lines []string
	for _, k := range []string{"d", "e"} {
		s := res[k]
		if s == nil || s.Err != nil || b == nil || b.Err != nil || b.RPS == 0 {
			continue
		}
		ratio := s.RPS / b.RPS
		lines = append(lines, fmt.Sprintf("bars (%s): rps %.2fx (b) [need >= 1.30x: %s], cpu %.1f us/req [need <= 35: %s]",
			k, ratio, passFail(ratio >= 1.3), s.CPUPerReq, passFail(s.CPUPerReq <= 35)))
	}
	return lines
}

func passFail(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}
