package gitsource

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
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

// blockedPrefixes are the ranges a clone must never reach, beyond what netip classifies
// as loopback, private, link-local, multicast or unspecified: shared address space
// (CGNAT), "this network", IETF protocol assignments and benchmarking.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

func internalAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// allowed reports whether the operator listed host (or one of its addresses).
func (p Policy) allowed(host string, addr netip.Addr) bool {
	for _, h := range p.AllowedHosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if strings.EqualFold(h, host) {
			return true
		}
		if pfx, err := netip.ParsePrefix(h); err == nil && addr.IsValid() && pfx.Contains(addr.Unmap()) {
			return true
		}
		if a, err := netip.ParseAddr(h); err == nil && addr.IsValid() && a.Unmap() == addr.Unmap() {
			return true
		}
	}
	return false
}

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
			return refused("file:// repositories are disabled on this platform (DBT_SYNC_ALLOW_FILE_URLS)")
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
	if a, err := netip.ParseAddr(host); err == nil {
		return p.checkAddr(host, a)
	}
	if p.allowed(host, netip.Addr{}) {
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
		if err := p.checkAddr(host, a); err != nil {
			return err
		}
	}
	return nil
}

func (p Policy) checkAddr(host string, a netip.Addr) error {
	if internalAddr(a) && !p.allowed(host, a) {
		return refused("host %s is a loopback, private, link-local or metadata address; only public git servers can be cloned (or hosts listed in DBT_SYNC_ALLOWED_HOSTS)", host)
	}
	return nil
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
// about to dial: a host that resolved to a public address when the integration was saved
// and to an internal one now (DNS rebinding) is refused here.
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
	d := net.Dialer{Timeout: 10 * time.Second}
	var last error = refused("host %s has no address", host)
	for _, a := range addrs {
		if err := p.checkAddr(host, a); err != nil {
			return nil, err
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		last = err
	}
	return nil, last
}

// transport is what git clones over https with: dials through the policy, timeouts on
// every phase, and at most maxBytes read from the server per response. (The client
// around it, installHTTPS's, refuses redirects; the clone's context bounds its time.)
func (p Policy) transport(maxBytes int64) http.RoundTripper {
	tr := &http.Transport{
		DialContext:           p.dialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConns:          4,
		ForceAttemptHTTP2:     true,
	}
	return limitedTransport{rt: tr, max: maxBytes}
}

// limitedTransport stops reading a response after max bytes.
type limitedTransport struct {
	rt  http.RoundTripper
	max int64
}

func (l limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil || l.max <= 0 {
		return resp, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: l.max}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errRepoTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
