package server

import (
	"net"
	"net/http"
	"net/netip"
	"runtime"
)

// ForceGC runs two garbage collections and answers 204 once they are done. It is on
// the internal listener only (POST /debug/gc), and answers only a caller on the same
// host (LoopbackOnly): the internal port is reachable from Prometheus and the probes,
// and a collection on demand is nothing they need. The soak (make soak) forces a collection
// before it reads go_gc_heap_live_bytes, so every process's live heap is measured at
// the same point instead of wherever its last collection happened to be. Two, because
// what sync.Pool holds survives one collection in its victim cache.
func ForceGC(w http.ResponseWriter, _ *http.Request) {
	runtime.GC()
	runtime.GC()
	w.WriteHeader(http.StatusNoContent)
}

// LoopbackOnly serves h to callers on the same host (a loopback peer address) and
// answers everyone else the JSON 404 of an unknown path.
func LoopbackOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if a, err := netip.ParseAddr(host); err != nil || !a.Unmap().IsLoopback() {
			NotFound(w, r)
			return
		}
		h(w, r)
	}
}
