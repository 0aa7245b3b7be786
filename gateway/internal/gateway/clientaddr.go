package gateway

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/analyticsco/platform/gateway/internal/h1"
)

// clientAddr is the address limits are counted on: the client's address (clientIP),
// with IPv6 clients counted per /64, which one subscriber usually holds whole.
func (g *Gateway) clientAddr(r *h1.Request) string {
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
func (g *Gateway) clientIP(r *h1.Request) string {
	client, ok := g.client(r)
	if !ok {
		return ""
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && client.Is4() && !strings.Contains(host, ":") && !g.trusted(client) {
		return host // the peer's own IPv4 address, written as netip writes it already
	}
	return client.String()
}

func (g *Gateway) client(r *h1.Request) (netip.Addr, bool) {
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

// peerTrusted reports whether r's connection comes from a trusted proxy itself (not
// what X-Forwarded-For claims).
func (g *Gateway) peerTrusted(r *h1.Request) bool {
	if len(g.o.TrustedProxies) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	return err == nil && g.trusted(peer.Unmap())
}

func (g *Gateway) trusted(a netip.Addr) bool {
	for _, p := range g.o.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
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

// CheckProxies refuses a gateway behind a proxy (GATEWAY_BEHIND_PROXY) with no trusted
// proxies: it would count every client as the proxy's one address, so one client's
// failures would throttle everyone, and the audit trail would record the proxy.
func CheckProxies(behindProxy bool, trusted []netip.Prefix) error {
	if behindProxy && len(trusted) == 0 {
		return fmt.Errorf("GATEWAY_BEHIND_PROXY is true but GATEWAY_TRUSTED_PROXIES is empty: list the addresses of the proxy in front of the gateway")
	}
	return nil
}
