package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/libs/httpx"
)

// clientAddr is the address limits are counted on: the client's address (clientIP),
// with IPv6 clients counted per /64, which one subscriber usually holds whole.
func (g *Gateway) clientAddr(r *http.Request) string {
	client, ok := g.client(r)
	if !ok {
		// Not an IP address (a unix socket, a test's fake peer): counted as it is.
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		return host
	}
	if client.Is6() {
		p, _ := client.Prefix(64)
		return p.String()
	}
	return client.String()
}

// clientIP is the client's address as the audit trail records it: the connection's
// peer, or, when the peer is a configured trusted proxy, the nearest untrusted address of
// X-Forwarded-For (read right to left: every hop before a trusted proxy could have been
// forged by the client).
func (g *Gateway) clientIP(r *http.Request) string {
	client, ok := g.client(r)
	if !ok {
		return ""
	}
	return client.String()
}

func (g *Gateway) client(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	client := peer.Unmap()
	if g.trusted(client) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a malformed hop: trust nothing beyond it
			}
			client = a.Unmap()
			if !g.trusted(client) {
				break
			}
		}
	}
	return client, true
}

func (g *Gateway) trusted(a netip.Addr) bool {
	for _, p := range g.o.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// failedAuthThrottled reports (and answers 429) when the client's failed authentications
// are over AUTH_FAILURE_LIMIT: such a client gets no further authentication attempts, so
// guessing costs neither the identity store nor the JWKS endpoint anything, until the
// window passes. The block is remembered in this replica; the count is shared in Redis.
func (g *Gateway) failedAuthThrottled(w http.ResponseWriter, r *http.Request) bool {
	if g.blocked == nil {
		return false
	}
	until, ok := g.blocked.Get(g.clientAddr(r))
	if !ok || !time.Now().Before(until) {
		return false
	}
	writeAuthThrottled(w, until, g.o.AuthFailureLimit.N, g.o.AuthFailureLimit.Window)
	return true
}

// countFailedAuth counts a failed authentication of the client; it reports whether the
// client is now over the limit (and then answers 429 instead of the 401).
func (g *Gateway) countFailedAuth(ctx context.Context, w http.ResponseWriter, r *http.Request) bool {
	if g.blocked == nil || g.o.RateLimiter == nil {
		return false
	}
	addr := g.clientAddr(r)
	d, err := g.o.RateLimiter.Allow(ctx, "authfail:"+addr, g.o.AuthFailureLimit)
	if err != nil || d.Allowed {
		return false
	}
	until := time.Now().Add(d.RetryAfter)
	g.blocked.Put(addr, until, until)
	writeAuthThrottled(w, until, g.o.AuthFailureLimit.N, g.o.AuthFailureLimit.Window)
	return true
}

func writeAuthThrottled(w http.ResponseWriter, until time.Time, n int64, window time.Duration) {
	secs := max(int64((time.Until(until)+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	httpx.WriteError(w, http.StatusTooManyRequests,
		fmt.Sprintf("more than %d failed authentications per %s from this client address (AUTH_FAILURE_LIMIT); retry in %d s", n, window, secs))
}

// newBlockedClients is the bounded set of client addresses over the failure limit.
func newBlockedClients() *auth.Cache[string, time.Time] {
	return auth.NewCache[string, time.Time](100_000, time.Now)
}

// ParsePrefixes parses addresses and CIDR prefixes (an address is its own /32 or /128).
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}
