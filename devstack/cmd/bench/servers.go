package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The bench re-executes itself for the backend and the bare proxy so that each is
// a process of its own whose CPU can be read from /proc. The parent opens the
// listener and hands it over as fd 3: no port race and no address to parse.

// backendBody is the answer to every request: a small JSON body (~100 bytes).
var backendBody = []byte(`{"status":"ok","service":"bench-backend","items":[1,2,3],"note":"a small fixed JSON body"}` + "\n")

// emptyJWKS lets a gateway that fetches embed-svc's signing keys from its upstream
// find a valid, empty key set instead of logging errors during the run.
var emptyJWKS = []byte(`{"keys":[]}`)

func serveBackend() error {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/embed/.well-known/jwks.json" {
			_, _ = w.Write(emptyJWKS)
			return
		}
		_, _ = w.Write(backendBody)
	})
	return serveInherited(h)
}

// serveBareProxy is the honest baseline: httputil.ReverseProxy as the docs show
// it, with http.DefaultTransport and no BufferPool.
func serveBareProxy(upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-reverse-proxy %q: not an absolute URL", upstream)
	}
	return serveInherited(httputil.NewSingleHostReverseProxy(u))
}

// serveTunedProxy is net/http tuned as a proxy can be without leaving it: a Transport
// that keeps 64 idle connections to the backend (DefaultTransport keeps 2 per host, so
// 64 workers redial), HTTP/1.1 only, and a ReverseProxy that copies bodies through
// pooled 32 KiB buffers.
func serveTunedProxy(upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-tuned-reverse-proxy %q: not an absolute URL", upstream)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout = 64, 64, 2*time.Minute
	tr.ForceAttemptHTTP2 = false
	rp := &httputil.ReverseProxy{
		Rewrite:    func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		Transport:  tr,
		BufferPool: &bufferPool{},
	}
	return serveInherited(rp)
}

// bufferPool is an httputil.BufferPool of 32 KiB buffers.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// serveInherited serves h on the listener passed as fd 3 until SIGTERM or SIGINT.
func serveInherited(h http.Handler) error {
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return fmt.Errorf("inherited listener: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		return err
	case <-sig:
		_ = srv.Close()
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
