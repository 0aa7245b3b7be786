package h1

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// ConnLimits caps the connections a Server serves at once. A connection beyond a cap is
// answered 503 with Connection: close and closed, without a request being read.
type ConnLimits struct {
	// Max caps the connections in total (default 10,000; negative: no cap).
	Max int
	// PerClient caps the connections of one client address, an IPv6 client's /64 as one
	// (default 256; negative: no cap).
	PerClient int
	// Trusted are the proxies in front of the server (the ingress): each carries many
	// clients' connections, so it is capped by PerProxy instead of PerClient.
	Trusted []netip.Prefix
	// PerProxy caps the connections of one trusted proxy (default: Max).
	PerProxy int
}

const (
	defaultMaxConns          = 10_000
	defaultMaxConnsPerClient = 256
	// maxRefusing bounds the connections being answered 503 at once; beyond it a
	// connection over a cap is closed without an answer.
	maxRefusing = 1024
	// refuseTimeout bounds the writing of the 503 to a connection over a cap.
	refuseTimeout = time.Second
)

func (l ConnLimits) withDefaults() ConnLimits {
	if l.Max == 0 {
		l.Max = defaultMaxConns
	}
	if l.PerClient == 0 {
		l.PerClient = defaultMaxConnsPerClient
	}
	if l.PerProxy == 0 {
		l.PerProxy = l.Max
	}
	return l
}

// connKey is what a connection is counted on: its peer's address (IPv6: its /64).
// The zero key is a peer that is no IP address (a unix socket), counted in the total only.
func connKey(a net.Addr) netip.Prefix {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := tcp.AddrPort().Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, 32)
}

// admit counts a new connection against the caps, under s.mu; a non-nil Error is the
// answer of one over a cap (nothing counted).
func (s *Server) admit(c *conn) *Error {
	l := &s.connLimits
	if l.Max > 0 && s.open >= l.Max {
		return connsOver(l.Max, "in total", "Max")
	}
	key := connKey(c.nc.RemoteAddr())
	if key.IsValid() {
		limit, who, field := l.PerClient, "from this client address", "PerClient"
		for _, p := range l.Trusted {
			if p.Contains(key.Addr()) {
				limit, who, field = l.PerProxy, "from this proxy", "PerProxy"
				break
			}
		}
		if limit > 0 && s.perPeer[key] >= limit {
			return connsOver(limit, who, field)
		}
		s.perPeer[key]++
	}
	s.open++
	c.counted, c.key = true, key
	return nil
}

// release uncounts c, under s.mu.
func (s *Server) release(c *conn) {
	if !c.counted {
		return
	}
	c.counted = false
	s.open--
	if c.key.IsValid() {
		if n := s.perPeer[c.key] - 1; n > 0 {
			s.perPeer[c.key] = n
		} else {
			delete(s.perPeer, c.key)
		}
	}
}

func connsOver(limit int, who, field string) *Error {
	return &Error{Status: http.StatusServiceUnavailable,
		Msg:   "too many connections " + who + ": the limit is " + strconv.Itoa(limit) + " at once; close one or retry shortly",
		Limit: field}
}

// serveRefused answers a connection over a cap and closes it: 503 at once (the request
// it may have sent is drained, not read), within refuseTimeout.
func (c *conn) serveRefused(e *Error) {
	defer c.srv.forget(c)
	defer c.srv.refusing.Add(-1)
	c.state.Store(stateActive)
	c.refused = true
	c.now = time.Now()
	c.refuse(e)
}

// writeTimeout bounds the writing of one response on c.
func (c *conn) writeTimeout() time.Duration {
	if c.refused {
		return refuseTimeout
	}
	return c.srv.writeTimeout()
}
