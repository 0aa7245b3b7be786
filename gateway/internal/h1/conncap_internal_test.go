package h1

import (
	"net"
	"testing"
)

// Connections are counted per IPv4 address and per IPv6 /64 (one subscriber holds a
// whole /64), IPv4-mapped IPv6 as IPv4; a peer that is no IP address only in the total.
func TestConnectionsAreCountedPerAddressAndIPv6Slash64(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 1}, "203.0.113.7/32"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:203.0.113.7"), Port: 1}, "203.0.113.7/32"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 1}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::1"), Port: 2}, "2001:db8:1:2::/64"},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "invalid Prefix"},
	} {
		if got := connKey(c.addr).String(); got != c.want {
			t.Errorf("%v: counted as %s, want %s", c.addr, got, c.want)
		}
	}
}
