package h1

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Handler serves one request. It writes nothing after it returns, and keeps nothing of
// r (which is reused for the connection's next request).
type Handler interface {
	ServeH1(w *ResponseWriter, r *Request)
}

// Server serves HTTP/1.1 on a listener; the zero durations take the defaults.
type Server struct {
	Handler Handler
	Limits  Limits
	// ReadHeaderTimeout bounds the arrival of a request head once it has begun (10 s);
	// IdleTimeout how long a connection waits for its next request (2 min);
	// WriteTimeout the writing of one response (5 min); BodyTimeout the arrival of a
	// request body unless the handler sets its own (Body.SetTimeout; 30 s).
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	WriteTimeout      time.Duration
	BodyTimeout       time.Duration
	// OnError answers a request refused before the handler (nil: the JSON error body).
	OnError func(w *ResponseWriter, r *Request, e *Error)
	Logger  *slog.Logger
	// ConnLimits caps the connections served at once, in total and per client address.
	ConnLimits ConnLimits

	limits     Limits
	connLimits ConnLimits
	inShutdown atomic.Bool
	refusing   atomic.Int32 // connections over a cap being answered
	mu         sync.Mutex
	listeners  map[net.Listener]struct{}
	conns      map[*conn]struct{}
	open       int                  // connections counted against the caps
	perPeer    map[netip.Prefix]int // of them, per client address or proxy
	idle       chan struct{}        // closed when the last connection is gone during a shutdown
}

func (s *Server) readHeaderTimeout() time.Duration { return or(s.ReadHeaderTimeout, 10*time.Second) }
func (s *Server) idleTimeout() time.Duration       { return or(s.IdleTimeout, 2*time.Minute) }
func (s *Server) writeTimeout() time.Duration      { return or(s.WriteTimeout, 5*time.Minute) }
func (s *Server) bodyTimeout() time.Duration       { return or(s.BodyTimeout, 30*time.Second) }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (s *Server) shuttingDown() bool { return s.inShutdown.Load() }

// Serve accepts connections on ln until Shutdown or Close, then returns
// http.ErrServerClosed; any other accept error ends it too.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.inShutdown.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	if s.listeners == nil {
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
		s.limits = s.Limits.withDefaults()
		s.connLimits = s.ConnLimits.withDefaults()
		s.perPeer = map[netip.Prefix]int{}
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	ctx := context.Background()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				if s.Logger != nil {
					s.Logger.Warn("accept failed; retrying", "err", err, "delay", delay.String())
				}
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := &conn{srv: s, nc: nc, buf: make([]byte, initialBuffer), ctx: ctx, remote: nc.RemoteAddr().String(), now: time.Now()}
		over, ok := s.track(c)
		switch {
		case !ok:
			_ = nc.Close()
			return http.ErrServerClosed
		case over == nil:
			go c.serve()
		case s.refusing.Add(1) <= maxRefusing:
			go c.serveRefused(over)
		default:
			// Too many are being answered already: closed without an answer.
			s.refusing.Add(-1)
			s.forget(c)
			_ = nc.Close()
		}
	}
}

// track records c; false when the server is shutting down. over is the answer of a
// connection over a cap (ConnLimits), recorded but not counted.
func (s *Server) track(c *conn) (over *Error, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return nil, false
	}
	over = s.admit(c)
	s.conns[c] = struct{}{}
	return over, true
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	s.release(c)
	delete(s.conns, c)
	if len(s.conns) == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// Shutdown stops accepting, closes the connections that wait for a request, lets each
// active one finish its request, and returns once all are gone or ctx ends (then it
// closes the rest and returns ctx's error).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.inShutdown.Store(true)
	for ln := range s.listeners {
		_ = ln.Close()
	}
	done := make(chan struct{})
	if len(s.conns) == 0 {
		close(done)
	} else {
		s.idle = done
	}
	s.mu.Unlock()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		s.closeIdle()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			_ = s.Close()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// closeIdle closes the connections waiting for a request.
func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.Load() == stateIdle {
			_ = c.nc.Close()
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inShutdown.Store(true)
	for ln := range s.listeners {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.nc.Close()
	}
	return nil
}

// HandlerFunc is a function as a Handler.
type HandlerFunc func(w *ResponseWriter, r *Request)

// ServeH1 calls f.
func (f HandlerFunc) ServeH1(w *ResponseWriter, r *Request) { f(w, r) }
