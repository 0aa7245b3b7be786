package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Every non-public range is refused, the ones the platform refused before and the ones
// IANA's registries add; public IPv4 and IPv6 addresses pass.
func TestOnlyPublicAddressesPass(t *testing.T) {
	g := New(nil)
	refused := map[string]string{
		"127.0.0.1":              "loopback",
		"::1":                    "IPv6 loopback",
		"10.1.2.3":               "private",
		"172.16.0.1":             "private",
		"192.168.1.1":            "private",
		"169.254.169.254":        "link-local (cloud metadata)",
		"fe80::1":                "IPv6 link-local",
		"fd00:ec2::254":          "unique local (cloud metadata)",
		"100.64.0.1":             "CGNAT",
		"0.0.0.0":                "this network",
		"0.1.2.3":                "this network",
		"192.0.0.8":              "IETF protocol assignments",
		"198.18.0.1":             "benchmarking",
		"192.0.2.1":              "documentation",
		"192.88.99.1":            "6to4 relay anycast",
		"240.0.0.1":              "reserved",
		"255.255.255.255":        "broadcast",
		"224.0.0.1":              "multicast",
		"ff02::1":                "IPv6 multicast",
		"::":                     "IPv6 unspecified",
		"::ffff:127.0.0.1":       "IPv4-mapped loopback",
		"::ffff:10.0.0.1":        "IPv4-mapped private",
		"64:ff9b::7f00:1":        "NAT64 of 127.0.0.1",
		"64:ff9b::8c52:7003":     "NAT64 of a public address",
		"64:ff9b:1::1":           "local-use NAT64",
		"2002:7f00:1::1":         "6to4",
		"2001::1":                "Teredo",
		"2001:10::1":             "ORCHID (inside 2001::/23)",
		"2001:db8::1":            "IPv6 documentation",
		"100::1":                 "discard-only",
		"::127.0.0.1":            "IPv4-compatible",
		"fec0::1":                "site-local",
		"fe80::1%eth0":           "zoned link-local",
		"3fff::1":                "IPv6 documentation (RFC 9637)",
		"2620:4f:8000::1":        "AS112",
		"4000::1":                "outside 2000::/3",
		"192.31.196.1":           "AS112",
		"198.51.100.7":           "TEST-NET-2",
		"203.0.113.9":            "TEST-NET-3",
		"100.127.255.255":        "CGNAT, last address",
		"172.31.255.255":         "private, last address",
		"::ffff:169.254.169.254": "IPv4-mapped metadata",
	}
	for addr, why := range refused {
		a := netip.MustParseAddr(addr)
		if err := g.Check("", a); !errors.Is(err, ErrNotPublic) {
			t.Errorf("%s (%s): %v, want refused", addr, why, err)
		}
		if g.Public(a) {
			t.Errorf("%s (%s) is called public", addr, why)
		}
	}
	for _, addr := range []string{"140.82.112.3", "8.8.8.8", "1.1.1.1", "100.128.0.1", "172.32.0.1", "2606:4700:4700::1111", "2a00:1450:4001:81b::200e", "2001:4860:4860::8888", "::ffff:140.82.112.3"} {
		if err := g.Check("", netip.MustParseAddr(addr)); err != nil {
			t.Errorf("public %s: %v", addr, err)
		}
	}
}

// The operator's list allows host names (whatever they resolve to), addresses and
// prefixes, and nothing next to them.
func TestTheAllowListIsHonoured(t *testing.T) {
	g := New([]string{" git.internal ", "10.20.0.0/16", "127.0.0.1", "fd00::5", "", "Mixed.Case.Example."})
	allowed := []struct{ host, addr string }{
		{"git.internal", "10.99.0.1"},
		{"GIT.INTERNAL", "169.254.169.254"},
		{"mixed.case.example", "127.0.0.2"},
		{"", "10.20.3.4"},
		{"other.example", "10.20.255.255"},
		{"", "127.0.0.1"},
		{"", "::ffff:127.0.0.1"},
		{"", "fd00::5"},
	}
	for _, c := range allowed {
		if err := g.Check(c.host, netip.MustParseAddr(c.addr)); err != nil {
			t.Errorf("allowed %s at %s: %v", c.host, c.addr, err)
		}
	}
	refused := []struct{ host, addr string }{
		{"other.example", "10.21.0.1"},
		{"", "127.0.0.2"},
		{"", "fd00::6"},
		{"git.internal.evil.example", "10.99.0.1"},
		{"", "169.254.169.254"},
	}
	for _, c := range refused {
		if err := g.Check(c.host, netip.MustParseAddr(c.addr)); !errors.Is(err, ErrNotPublic) {
			t.Errorf("%s at %s: %v, want refused", c.host, c.addr, err)
		}
	}
}

// The check runs when the socket connects, on the address the dialer resolved: a name
// that resolves to loopback is refused without a connection, and allowed when the
// operator lists it (by name or by address).
func TestDialsAreCheckedWhenTheyConnect(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := net.Dialer{Timeout: 2 * time.Second}
	for _, target := range []string{"localhost:" + port, "127.0.0.1:" + port} {
		if c, err := New(nil).DialContext(d)(ctx, "tcp4", target); !errors.Is(err, ErrNotPublic) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dial %s: %v, want refused", target, err)
		}
	}
	select {
	case <-accepted:
		t.Fatal("a refused dial reached the listener")
	case <-time.After(50 * time.Millisecond):
	}
	for _, allow := range []string{"localhost", "127.0.0.0/8"} {
		c, err := New([]string{allow}).DialContext(d)(ctx, "tcp4", "localhost:"+port)
		if err != nil {
			t.Fatalf("dial with %s allowed: %v", allow, err)
		}
		c.Close()
		<-accepted
	}
}

func TestControlRefusesWhatIsNotAnAddress(t *testing.T) {
	if err := New(nil).Control("")("tcp4", "not-an-address", nil); !errors.Is(err, ErrNotPublic) {
		t.Errorf("Control of a name: %v", err)
	}
}
