package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/netguard"
)

// Policy says which repositories a dbt git integration may clone. Repositories are
// hostile: their URL must not reach the worker's own network (SSRF), and what a clone
// brings is bounded in time and size.
type Policy struct {
	// AllowFile enables file:// URLs (the local stack and tests; never production).
	AllowFile bool
	// AllowedHosts are host names, IP addresses or CIDR prefixes that may be cloned even
	// though they resolve to a loopback, private or link-local address (an in-cluster
	// git server an operator trusts).
	AllowedHosts []string
	// Resolve looks a host up (nil: the system resolver).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// refused is the policy's refusal, with the reason the caller is told.
func refused(format string, args ...any) error {
	return &dbtsync.RepositoryRefusedError{Reason: fmt.Sprintf(format, args...)}
}

// guard is the outbound-address check of this policy: public addresses, and the hosts,
// addresses and prefixes the operator listed.
func (p Policy) guard() *netguard.Guard { return netguard.New(p.AllowedHosts) }

// CheckURL validates a repository URL: https (or file:// when allowed), no credentials in
// it, and a host that resolves only to public addresses unless listed. Its errors name the
// host and the reason, and are safe to show the caller.
func (p Policy) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return refused("repoUrl must be an https:// URL")
	}
	switch u.Scheme {
	case "https":
	case "file":
		if !p.AllowFile {
			return refused("file:// repositories are disabled on this platform")
		}
		return nil
	default:
		return refused("repoUrl must be an https:// URL")
	}
	if u.User != nil {
		return refused("repoUrl must not carry credentials: send them in \"credentials\"")
	}
	host := u.Hostname()
	if host == "" {
		return refused("repoUrl has no host")
	}
	g := p.guard()
	if a, err := netip.ParseAddr(host); err == nil {
		return checkAddr(g, host, a)
	}
	if g.HostAllowed(host) {
		return nil // a host the operator listed by name is trusted whatever it resolves to
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return refused("host %s is this machine", host)
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return refused("host %s cannot be resolved", host)
	}
	for _, a := range addrs {
		if err := checkAddr(g, host, a); err != nil {
			return err
		}
	}
	return nil
}

func checkAddr(g *netguard.Guard, host string, a netip.Addr) error {
	if g.Check(host, a) != nil {
		return refusedAddr(host)
	}
	return nil
}

func refusedAddr(host string) error {
	return refused("host %s is not a public internet address (it is loopback, private, link-local, metadata or reserved); only public git servers can be cloned, and hosts the operator allowed", host)
}

func (p Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if p.Resolve != nil {
		return p.Resolve(ctx, host)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// dialContext connects only to addresses the policy allows, checked on the address it is
// about to dial (netguard's Control, as the socket connects): a host that resolved to a
// public address when the integration was saved and to an internal one now (DNS
// rebinding) is refused here.
func (p Policy) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = p.resolve(ctx, host); err != nil {
		return nil, err
	}
	g := p.guard()
	d := net.Dialer{Timeout: 10 * time.Second, Control: g.Control(host)}
	var last error = refused("host %s has no address", host)
	for _, a := range addrs {
		if err := checkAddr(g, host, a); err != nil {
			return nil, err
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, netguard.ErrNotPublic) {
			return nil, refusedAddr(host)
		}
		last = err
	}
	return nil, last
}

// transport is what git clones over https with: dials through the policy, timeouts on
// every phase, at most maxAdvert bytes read of a reference advertisement (info/refs) and
// maxBytes of any other response. (The client around it, installHTTPS's, refuses
// redirects; the clone's context bounds its time.)
func (p Policy) transport(maxBytes, maxAdvert int64) http.RoundTripper {
	tr := &http.Transport{
		DialContext:           p.dialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConns:          4,
		ForceAttemptHTTP2:     true,
	}
	return limitedTransport{rt: tr, max: maxBytes, maxAdvert: maxAdvert}
}

// limitedTransport stops reading a response after its limit.
type limitedTransport struct {
	rt             http.RoundTripper
	max, maxAdvert int64
}

func (l limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/info/refs") && l.maxAdvert > 0:
		resp.Body = &limitedBody{rc: resp.Body, left: l.maxAdvert, over: errAdvertTooLarge}
	case l.max > 0:
		resp.Body = &limitedBody{rc: resp.Body, left: l.max, over: errRepoTooLarge}
	}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
	over error // what a read past the limit returns
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, b.over
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
