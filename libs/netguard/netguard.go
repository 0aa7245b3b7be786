// Package netguard decides which addresses the platform's outbound connections to
// tenant-chosen hosts (git clones, webhook deliveries) may reach: the public internet
// only, as IANA's special-purpose registries define it (code.dny.dev/ssrf: every IPv4
// special-purpose range, among them loopback, private, link-local, CGNAT, 0/8,
// 192.0.0/24, 198.18/15, 6to4 relays and 240/4; every IPv6 address outside 2000::/3,
// NAT64 included, and the special ranges inside it, 2001::/23 and 6to4 among them), plus
// what the operator allows by host name, address or CIDR prefix (an in-cluster server).
//
// The check is made where the connection is made: Guard.Control is a net.Dialer's Control
// function, so it sees the address the socket is about to connect to, whatever a resolver
// said earlier (a host that resolves to a public address when it is saved and to an
// internal one when it is dialed, DNS rebinding, is refused).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
)

// ErrNotPublic is the error of a destination that is not a public internet address and
// that the operator did not allow.
var ErrNotPublic = errors.New("not a public internet address")

// Guard is a destination check; the zero value is not usable, New makes one. Safe for
// concurrent use.
type Guard struct {
	hosts    map[string]bool // host names allowed whatever they resolve to (lower case)
	prefixes []netip.Prefix  // addresses (as single-address prefixes) and prefixes allowed
	public   *ssrf.Guardian
}

// New is a guard that allows the public internet and the entries of allow: host names
// (trusted whatever they resolve to), IP addresses and CIDR prefixes. Blank entries are
// ignored.
func New(allow []string) *Guard {
	g := &Guard{hosts: map[string]bool{}, public: ssrf.New(ssrf.WithAnyPort())}
	for _, e := range allow {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			g.prefixes = append(g.prefixes, p.Masked())
		} else if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap().WithZone("")
			g.prefixes = append(g.prefixes, netip.PrefixFrom(a, a.BitLen()))
		} else {
			g.hosts[strings.ToLower(strings.TrimSuffix(e, "."))] = true
		}
	}
	return g
}

// HostAllowed reports whether the operator allowed host by name.
func (g *Guard) HostAllowed(host string) bool {
	return host != "" && g.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// Public reports whether a is a public internet address.
func (g *Guard) Public(a netip.Addr) bool {
	return g.public.SafeAddr(a.Unmap().WithZone("")) == nil
}

// Check is nil when a connection to a, for host (the name asked for, "" if none), may
// be made: a is public, or the operator allowed host by name or a by address or prefix.
// Otherwise its error wraps ErrNotPublic and names the address.
func (g *Guard) Check(host string, a netip.Addr) error {
	if g.HostAllowed(host) {
		return nil
	}
	a = a.Unmap().WithZone("")
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return nil
		}
	}
	if err := g.public.SafeAddr(a); err != nil {
		return fmt.Errorf("%w: %s", ErrNotPublic, a)
	}
	return nil
}

// Control is a net.Dialer Control function for connections asked for host ("" if the
// caller dials an address): it refuses, before the socket connects, any address Check
// refuses.
func (g *Guard) Control(host string) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %q is not an address", ErrNotPublic, address)
		}
		return g.Check(host, ap.Addr())
	}
}

// DialContext dials address (host:port) as d would, its resolver included, with every
// address it connects to checked at connect time (d's own Control, if any, is replaced).
func (g *Guard) DialContext(d net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		dd := d
		dd.Control, dd.ControlContext = g.Control(host), nil
		return dd.DialContext(ctx, network, address)
	}
}
