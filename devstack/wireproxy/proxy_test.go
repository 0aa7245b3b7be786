package wireproxy_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/wireproxy"
)

const (
	opQuery = 2004
	opReply = 1
	opMsg   = 2013

	moreToCome     = 1 << 1
	exhaustAllowed = 1 << 16
)

// msg builds a message: header, then for OP_MSG the flag bits, then body.
func msg(requestID, responseTo, op int32, flags uint32, body string) []byte {
	b := make([]byte, 16, 16+4+len(body))
	if op == opMsg {
		b = binary.LittleEndian.AppendUint32(b, flags)
	}
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)))
	binary.LittleEndian.PutUint32(b[4:], uint32(requestID))
	binary.LittleEndian.PutUint32(b[8:], uint32(responseTo))
	binary.LittleEndian.PutUint32(b[12:], uint32(op))
	return b
}

func flagsOf(m []byte) uint32 { return binary.LittleEndian.Uint32(m[16:20]) }
func bodyOf(m []byte) string {
	if binary.LittleEndian.Uint32(m[12:16]) == opMsg {
		return string(m[20:])
	}
	return string(m[16:])
}

// fakeUpstream accepts connections and answers each request with
// reply(request) (zero or more messages).
type fakeUpstream struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	received [][]byte
}

func startFake(t *testing.T, reply func(req []byte) [][]byte) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeUpstream{ln: ln}
	var conns sync.Map
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					req, err := wireproxy.ReadMessage(r)
					if err != nil {
						return
					}
					f.mu.Lock()
					f.received = append(f.received, req)
					f.mu.Unlock()
					for _, m := range reply(req) {
						if _, err := c.Write(m); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		f.wg.Wait()
	})
	return f
}

func startProxy(t *testing.T, upstream string) *wireproxy.Proxy {
	t.Helper()
	p, err := wireproxy.Listen("127.0.0.1:0", upstream, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *wireproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A broken proxy must fail the test, not hang it.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// echo answers every request that expects a reply with one reply naming it.
func echo(req []byte) [][]byte {
	id := int32(binary.LittleEndian.Uint32(req[4:8]))
	switch binary.LittleEndian.Uint32(req[12:16]) {
	case opMsg:
		if flagsOf(req)&moreToCome != 0 {
			return nil
		}
		return [][]byte{msg(id+1000, id, opMsg, 0, "re:"+bodyOf(req))}
	case opQuery:
		return [][]byte{msg(id+1000, id, opReply, 0, "re:"+bodyOf(req))}
	}
	return nil
}

func TestProxy(t *testing.T) {
	t.Run("forwards OP_QUERY handshake and OP_MSG replies", func(t *testing.T) {
		p := startProxy(t, startFake(t, echo).ln.Addr().String())
		c, r := dial(t, p)
		for i, m := range [][]byte{msg(1, 0, opQuery, 0, "isMaster"), msg(2, 0, opMsg, 0, "find")} {
			if _, err := c.Write(m); err != nil {
				t.Fatal(err)
			}
			got, err := wireproxy.ReadMessage(r)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if want := "re:" + bodyOf(m); bodyOf(got) != want {
				t.Errorf("message %d: got body %q, want %q", i, bodyOf(got), want)
			}
		}
	})

	t.Run("does not wait for a reply to a moreToCome request", func(t *testing.T) {
		f := startFake(t, echo)
		p := startProxy(t, f.ln.Addr().String())
		c, r := dial(t, p)
		c.Write(msg(1, 0, opMsg, moreToCome, "insert w:0"))
		c.Write(msg(2, 0, opMsg, 0, "ping"))
		got, err := wireproxy.ReadMessage(r)
		if err != nil {
			t.Fatal(err)
		}
		if bodyOf(got) != "re:ping" {
			t.Errorf("got %q, want the reply to ping", bodyOf(got))
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.received) != 2 {
			t.Errorf("upstream received %d messages, want 2", len(f.received))
		}
	})

	t.Run("relays an exhaust stream and clears exhaustAllowed", func(t *testing.T) {
		f := startFake(t, func(req []byte) [][]byte {
			return [][]byte{
				msg(10, 1, opMsg, moreToCome, "a"),
				msg(11, 1, opMsg, moreToCome, "b"),
				msg(12, 1, opMsg, 0, "c"),
			}
		})
		p := startProxy(t, f.ln.Addr().String())
		c, r := dial(t, p)
		c.Write(msg(1, 0, opMsg, exhaustAllowed, "getMore"))
		for _, want := range []string{"a", "b", "c"} {
			got, err := wireproxy.ReadMessage(r)
			if err != nil {
				t.Fatal(err)
			}
			if bodyOf(got) != want {
				t.Errorf("got %q, want %q", bodyOf(got), want)
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if fl := flagsOf(f.received[0]); fl&exhaustAllowed != 0 {
			t.Errorf("upstream saw flags %#x, want exhaustAllowed cleared", fl)
		}
	})

	t.Run("closes a connection announcing a message over MaxMessageSize", func(t *testing.T) {
		f := startFake(t, echo)
		p := startProxy(t, f.ln.Addr().String())
		c, r := dial(t, p)
		hdr := msg(1, 0, opMsg, 0, "")
		binary.LittleEndian.PutUint32(hdr[0:], wireproxy.MaxMessageSize+1)
		c.Write(hdr)
		if _, err := wireproxy.ReadMessage(r); !errors.Is(err, io.EOF) {
			t.Errorf("got %v, want EOF from the proxy closing the connection", err)
		}
	})

	t.Run("accepts a message of MongoDB's 48000000-byte maximum", func(t *testing.T) {
		f := startFake(t, func(req []byte) [][]byte { return [][]byte{msg(2, 1, opMsg, 0, "ok")} })
		p := startProxy(t, f.ln.Addr().String())
		c, r := dial(t, p)
		big := msg(1, 0, opMsg, 0, string(make([]byte, 48_000_000-20)))
		if _, err := c.Write(big); err != nil {
			t.Fatal(err)
		}
		got, err := wireproxy.ReadMessage(r)
		if err != nil || bodyOf(got) != "ok" {
			t.Fatalf("got %v, %v; want the reply", got, err)
		}
	})

	t.Run("runs one command at a time across connections", func(t *testing.T) {
		var inFlight, maxInFlight atomic.Int32
		f := startFake(t, func(req []byte) [][]byte {
			n := inFlight.Add(1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
			for range 100 { // widen the window a concurrent command would hit
				runtime.Gosched()
			}
			inFlight.Add(-1)
			return echo(req)
		})
		p := startProxy(t, f.ln.Addr().String())
		var wg sync.WaitGroup
		for g := range 8 {
			c, r := dial(t, p)
			wg.Go(func() {
				for i := range 50 {
					if _, err := c.Write(msg(int32(g*1000+i), 0, opMsg, 0, "cmd")); err != nil {
						t.Error(err)
						return
					}
					if _, err := wireproxy.ReadMessage(r); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if got := maxInFlight.Load(); got != 1 {
			t.Errorf("max commands in flight upstream = %d, want 1", got)
		}
	})

	t.Run("Close ends every connection and leaks no goroutine", func(t *testing.T) {
		f := startFake(t, echo)
		before := runtime.NumGoroutine()
		p, err := wireproxy.Listen("127.0.0.1:0", f.ln.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var clients []*bufio.Reader
		for range 5 {
			c, r := dial(t, p)
			c.Write(msg(1, 0, opMsg, 0, "ping"))
			if _, err := wireproxy.ReadMessage(r); err != nil {
				t.Fatal(err)
			}
			clients = append(clients, r)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		for i, r := range clients {
			if _, err := wireproxy.ReadMessage(r); !errors.Is(err, io.EOF) {
				t.Errorf("client %d: got %v after Close, want EOF", i, err)
			}
		}
		// The fake upstream's per-connection goroutines end once they see
		// the proxy's upstream connections close; poll for that.
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		if got := runtime.NumGoroutine(); got > before {
			t.Errorf("goroutines: %d after Close, %d before Listen", got, before)
		}
	})
}

// command is an OP_MSG whose body (a kind-0 section) is {name: 1}.
func command(requestID int32, name string) []byte {
	doc := binary.LittleEndian.AppendUint32(nil, 0)
	doc = append(doc, 0x10)
	doc = append(doc, name...)
	doc = append(doc, 0)
	doc = binary.LittleEndian.AppendUint32(doc, 1)
	doc = append(doc, 0)
	binary.LittleEndian.PutUint32(doc, uint32(len(doc)))
	return msg(requestID, 0, opMsg, 0, "\x00"+string(doc))
}

// commandOf is the command name of a message built by command.
func commandOf(m []byte) string {
	b := m[16+4+1+4+1:]
	return string(b[:bytes.IndexByte(b, 0)])
}

func TestProxyWritesMode(t *testing.T) {
	t.Run("a read is answered while a write holds the turn", func(t *testing.T) {
		release := make(chan struct{})
		var received atomic.Int32
		f := startFake(t, func(req []byte) [][]byte {
			if commandOf(req) == "insert" {
				received.Add(1)
				<-release
			}
			return [][]byte{msg(2, 1, opMsg, 0, "ok")}
		})
		p, err := wireproxy.ListenWith("127.0.0.1:0", f.ln.Addr().String(), wireproxy.Options{Mode: wireproxy.Writes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		defer close(release)
		w, _ := dial(t, p)
		w.Write(command(1, "insert"))
		for deadline := time.Now().Add(10 * time.Second); received.Load() == 0; {
			if time.Now().After(deadline) {
				t.Fatal("the insert never reached the upstream")
			}
			runtime.Gosched()
		}
		for _, name := range []string{"find", "count", "getMore", "hello"} {
			c, r := dial(t, p)
			c.Write(command(2, name))
			if _, err := wireproxy.ReadMessage(r); err != nil {
				t.Errorf("%s while a write is in flight: %v, want an answer", name, err)
			}
		}
		if fwd, ser := p.Counts(); fwd != 5 || ser != 1 {
			t.Errorf("counts: %d forwarded, %d serialised; want 5 and 1", fwd, ser)
		}
	})

	t.Run("writes run one at a time across connections", func(t *testing.T) {
		var inFlight, maxInFlight atomic.Int32
		f := startFake(t, func(req []byte) [][]byte {
			if commandOf(req) != "find" {
				n := inFlight.Add(1)
				for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
				}
				for range 100 {
					runtime.Gosched()
				}
				inFlight.Add(-1)
			}
			return [][]byte{msg(2, 1, opMsg, 0, "ok")}
		})
		p, err := wireproxy.ListenWith("127.0.0.1:0", f.ln.Addr().String(), wireproxy.Options{Mode: wireproxy.Writes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		var wg sync.WaitGroup
		names := []string{"update", "findAndModify", "insert", "delete", "createIndexes", "aggregate", "someFutureCommand", "find"}
		for g, name := range names {
			c, r := dial(t, p)
			wg.Go(func() {
				for i := range 50 {
					c.Write(command(int32(g*1000+i), name))
					if _, err := wireproxy.ReadMessage(r); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if got := maxInFlight.Load(); got != 1 {
			t.Errorf("max writes in flight upstream = %d, want 1", got)
		}
	})
}
