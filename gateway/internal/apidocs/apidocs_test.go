package apidocs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/apidocs"
)

var update = flag.Bool("update", false, "copy the files of redoc@RedocVersion from npm over the embedded ones (make redoc)")

// The files of the npm release embedded here, by their path in the package.
var released = map[string]string{
	"redoc.standalone.js":             "bundles/redoc.standalone.js",
	"redoc.standalone.js.LICENSE.txt": "bundles/redoc.standalone.js.LICENSE.txt",
	"redoc.LICENSE":                   "LICENSE",
}

// TestEmbeddedRedocIsTheNpmRelease: the embedded bundle and its licenses are those of
// redoc@RedocVersion on npm, byte for byte. With -update (make redoc) it copies them.
func TestEmbeddedRedocIsTheNpmRelease(t *testing.T) {
	pkg := filepath.Join(devstack.NpmPackage(t, "redoc", apidocs.RedocVersion, "the API reference's Redoc bundle"), "redoc")
	for embedded, path := range released {
		want, err := os.ReadFile(filepath.Join(pkg, filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(embedded, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(embedded)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("gateway/internal/apidocs/%s is not redoc@%s's %s: run `make redoc`", embedded, apidocs.RedocVersion, path)
		}
	}
}

func handler(t *testing.T) http.Handler {
	t.Helper()
	h, err := apidocs.Handler("Reference", "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var inlineScript = regexp.MustCompile(`(?s)<script>(.*)</script>`)

// TestPageRunsOnlyTheEmbeddedBundle: the page inlines the bundle, and its policy lets that
// script run by its hash and no source outside the gateway's origin serve anything.
func TestPageRunsOnlyTheEmbeddedBundle(t *testing.T) {
	h := handler(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/docs", nil))
	body := rec.Body.String()
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !strings.Contains(body, `<redoc spec-url="/api/v1/openapi.json"></redoc>`) {
		t.Errorf("the page does not point Redoc at the document")
	}
	m := inlineScript.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no inline script")
	}
	sum := sha256.Sum256([]byte(m[1]))
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
		t.Errorf("the policy %q does not allow the page's script by its hash", csp)
	}
	for _, directive := range []string{"default-src 'none'", "connect-src 'self'", "img-src 'self' data:", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, directive) {
			t.Errorf("the policy %q lacks %s", csp, directive)
		}
	}
	if strings.Contains(csp, "http") || strings.Contains(csp, "*") {
		t.Errorf("the policy %q names a source outside the gateway", csp)
	}
}

// TestPageAnswersConditionalRequests: a browser that has the page gets a 304.
func TestPageAnswersConditionalRequests(t *testing.T) {
	h := handler(t)
	first := httptest.NewRecorder()
	h.ServeHTTP(first, httptest.NewRequest("GET", "/api/v1/docs", nil))
	etag := first.Header().Get("ETag")
	req := httptest.NewRequest("GET", "/api/v1/docs", nil)
	req.Header.Set("If-None-Match", etag)
	again := httptest.NewRecorder()
	h.ServeHTTP(again, req)
	if etag == "" || again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Fatalf("ETag %q, then %d with %d bytes: want 304 and no body", etag, again.Code, again.Body.Len())
	}
}
