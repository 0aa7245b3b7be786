package server

import (
	"net/http"
	"runtime"
)

// ForceGC runs two garbage collections and answers 204 once they are done. It is on
// the internal listener only (POST /debug/gc): the soak (make soak) forces a collection
// before it reads go_gc_heap_live_bytes, so every process's live heap is measured at
// the same point instead of wherever its last collection happened to be. Two, because
// what sync.Pool holds survives one collection in its victim cache.
func ForceGC(w http.ResponseWriter, _ *http.Request) {
	runtime.GC()
	runtime.GC()
	w.WriteHeader(http.StatusNoContent)
}
