package httpx

import (
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Router is the one way every service registers its routes, so every service answers the
// same for what it does not serve: an unknown path is a 404 and a known path asked with
// another method a 405 with an Allow header, both with the JSON error body (the ServeMux
// alone answers plain text).
type Router struct {
	mux     *http.ServeMux
	mu      sync.Mutex
	methods map[string][]string // path pattern -> methods registered on it
	paths   []string            // in registration order
	once    sync.Once
	first   []firstRoute // HandleFirst's, matched before the mux
}

// firstRoute is a route matched segment by segment before the ServeMux.
type firstRoute struct {
	method string
	segs   []string // literal segments, or "{name}" wildcards of one segment
	h      http.Handler
}

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{mux: http.NewServeMux(), methods: map[string][]string{}} }

// Handle serves method on the path pattern (ServeMux syntax, e.g. "/api/v1/x/{id}").
func (r *Router) Handle(method, path string, h http.Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.methods[path]; !ok {
		r.paths = append(r.paths, path)
	}
	r.methods[path] = append(r.methods[path], method)
	r.mux.Handle(method+" "+path, h)
}

// HandleFirst serves method on the path pattern before any pattern of the ServeMux is
// tried: a path with a literal segment where other routes have a wildcard
// ("/x/by-key/{key}" beside "/x/{id}/permissions"), which the ServeMux refuses as a
// conflict. The pattern's wildcards are whole segments ({name}); a request that matches
// it with another method goes on to the ServeMux.
func (r *Router) HandleFirst(method, path string, h http.Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.methods[path]; !ok {
		r.paths = append(r.paths, path)
	}
	r.methods[path] = append(r.methods[path], method)
	r.first = append(r.first, firstRoute{method: method, segs: strings.Split(strings.Trim(path, "/"), "/"), h: h})
}

// match reports whether the request's path fits f's segments, setting its wildcards.
func (f firstRoute) match(req *http.Request) bool {
	if req.Method != f.method {
		return false
	}
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(segs) != len(f.segs) {
		return false
	}
	var values [][2]string
	for i, s := range f.segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			if segs[i] == "" {
				return false
			}
			values = append(values, [2]string{s[1 : len(s)-1], segs[i]})
			continue
		}
		if s != segs[i] {
			return false
		}
	}
	for _, v := range values {
		req.SetPathValue(v[0], v[1])
	}
	return true
}

// Routes lists what the router serves, one "METHOD /path" ServeMux pattern a route, grouped
// by path in the order the paths were first registered: the table a test compares with the API document, read from the
// router itself rather than recovered from source.
func (r *Router) Routes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var routes []string
	for _, path := range r.paths {
		for _, method := range r.methods[path] {
			routes = append(routes, method+" "+path)
		}
	}
	return routes
}

// HandleFunc is Handle for a function.
func (r *Router) HandleFunc(method, path string, f http.HandlerFunc) { r.Handle(method, path, f) }

// ServeHTTP routes the request; the first request installs the 405 and 404 answers.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.once.Do(r.seal)
	for _, f := range r.first {
		if f.match(req) {
			f.h.ServeHTTP(w, req)
			return
		}
	}
	r.mux.ServeHTTP(w, req)
}

// isFirst reports whether path is a HandleFirst route's.
func (r *Router) isFirst(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, f := range r.first {
		if slices.Equal(f.segs, segs) {
			return true
		}
	}
	return false
}

// seal registers, for every path, the 405 of the methods it does not serve, and the 404
// of every other path. Routes registered after the first request are not served.
func (r *Router) seal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, path := range r.paths {
		if r.isFirst(path) {
			continue // no 405 of its own: the ServeMux's patterns answer the other methods
		}
		allowed := slices.Clone(r.methods[path])
		if slices.Contains(allowed, http.MethodGet) && !slices.Contains(allowed, http.MethodHead) {
			allowed = append(allowed, http.MethodHead) // the ServeMux serves HEAD with GET
		}
		slices.Sort(allowed)
		allow := strings.Join(allowed, ", ")
		r.mux.HandleFunc(path, func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Allow", allow)
			WriteError(w, http.StatusMethodNotAllowed, "method "+req.Method+" is not allowed on "+req.URL.Path+"; allowed: "+allow)
		})
	}
	if _, ok := r.methods["/"]; !ok {
		r.mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
			WriteError(w, http.StatusNotFound, "no route for "+req.Method+" "+req.URL.Path)
		})
	}
}
