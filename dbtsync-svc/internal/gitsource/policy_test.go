package gitsource

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

func TestPolicyCheckURL(t *testing.T) {
	public := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "github.com":
			return []netip.Addr{netip.MustParseAddr("140.82.112.3")}, nil
		case "rebind.example":
			return []netip.Addr{netip.MustParseAddr("140.82.112.3"), netip.MustParseAddr("10.1.2.3")}, nil
		case "internal.git":
			return []netip.Addr{netip.MustParseAddr("10.20.0.5")}, nil
		}
		return nil, errors.New("no such host")
	}
	p := Policy{Resolve: public}
	for _, u := range []string{"https://github.com/acme/dbt.git", "https://140.82.112.3/x.git"} {
		if err := p.CheckURL(context.Background(), u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for u, want := range map[string]string{
		"https://127.0.0.1:9/x":           "127.0.0.1",
		"https://169.254.169.254/latest":  "169.254.169.254",
		"https://10.0.0.1/x":              "10.0.0.1",
		"https://[::1]/x":                 "::1",
		"https://[fd00:ec2::254]/x":       "fd00:ec2::254",
		"https://100.64.0.1/x":            "100.64.0.1",
		"https://0.0.0.0/x":               "0.0.0.0",
		"https://[::ffff:127.0.0.1]/x":    "::ffff:127.0.0.1",
		"https://[64:ff9b::a00:1]/x":      "64:ff9b::a00:1",
		"https://[64:ff9b:1::1]/x":        "64:ff9b:1::1",
		"https://[2002:a00:1::1]/x":       "2002:a00:1::1",
		"https://[2001::1]/x":             "2001::1",
		"https://240.0.0.1/x":             "240.0.0.1",
		"https://192.88.99.1/x":           "192.88.99.1",
		"https://198.18.0.1/x":            "198.18.0.1",
		"https://localhost/x":             "localhost",
		"https://internal.git/x":          "internal.git",
		"https://rebind.example/x":        "rebind.example",
		"https://nowhere.invalid/x":       "cannot be resolved",
		"file:///etc":                     "file://",
		"http://github.com/x":             "https://",
		"git@github.com:acme/dbt.git":     "https://",
		"ssh://git@github.com/acme/x.git": "https://",
		"https://user:pw@github.com/x":    "credentials",
	} {
		err := p.CheckURL(context.Background(), u)
		var refused *dbtsync.RepositoryRefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, want) {
			t.Errorf("%s: %v, want a refusal naming %q", u, err, want)
		}
	}
	allow := Policy{Resolve: public, AllowFile: true, AllowedHosts: []string{"internal.git", "127.0.0.0/8"}}
	for _, u := range []string{"https://internal.git/x", "https://127.0.0.1:9/x", "file:///srv/repo"} {
		if err := allow.CheckURL(context.Background(), u); err != nil {
			t.Errorf("allowed %s: %v", u, err)
		}
	}
	if err := allow.CheckURL(context.Background(), "https://10.0.0.1/x"); err == nil {
		t.Error("an allowlist entry let another private address through")
	}
}

// The dial-time check refuses an internal address even for a host that passed the save
// (DNS rebinding), before any connection is made.
func TestPolicyDialRefusesInternalAddresses(t *testing.T) {
	p := Policy{Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
	}}
	_, err := p.dialContext(context.Background(), "tcp", "rebind.example:443")
	var refused *dbtsync.RepositoryRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("dial to a rebound host: %v, want a refusal", err)
	}
}

// The https transport go-git clones with is built once per Source, not per request: the
// requests of a clone (and later clones) reuse its connections.
func TestPolicyTransportReusesConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	New(nil, Limits{Policy: Policy{AllowedHosts: []string{"127.0.0.1"}}})
	for range 3 {
		req, _ := http.NewRequest("GET", srv.URL+"/info/refs", nil)
		resp, err := policyTransport{}.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("3 requests opened %d connections, want 1", n)
	}
}

// The dial-time check (netguard's, as the socket connects) honours the operator's list:
// a listed host name is dialed whatever it resolves to, a listed prefix covers its
// addresses, and nothing else internal is reached.
func TestPolicyDialHonoursTheAllowListAsItConnects(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	loopback := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	for _, allow := range [][]string{{"git.internal"}, {"127.0.0.0/8"}, {"127.0.0.1"}} {
		p := Policy{Resolve: loopback, AllowedHosts: allow}
		c, err := p.dialContext(context.Background(), "tcp4", net.JoinHostPort("git.internal", port))
		if err != nil {
			t.Errorf("allowed %v: %v", allow, err)
			continue
		}
		c.Close()
	}
	p := Policy{Resolve: loopback, AllowedHosts: []string{"other.internal", "10.0.0.0/8"}}
	_, err = p.dialContext(context.Background(), "tcp4", net.JoinHostPort("git.internal", port))
	var refused *dbtsync.RepositoryRefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "git.internal") || strings.Contains(refused.Reason, "DBT_SYNC_") {
		t.Errorf("dial to an unlisted internal host: %v", err)
	}
}
