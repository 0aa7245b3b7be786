package gateway_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/gateway"
)

// playwrightCoreVersion drives the browser; the browser is Debian's chromium.
const playwrightCoreVersion = "1.65.1"

const chromium = "/usr/bin/chromium"

// TestAPIReferenceRendersEveryOperation opens /api/v1/docs of a gateway serving the real
// document in headless Chromium: Redoc draws a section for every operation of the
// document without an error, every request of the page stays on the gateway's origin, and
// the page's policy blocks nothing but the one image Redoc would fetch from its CDN.
func TestAPIReferenceRendersEveryOperation(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s: %v: install Debian's chromium (apt-get install -y chromium)", chromium, err)
	}
	doc, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := api.Operations()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *gateway.Options) { o.OpenAPIJSON = doc })
	modules := devstack.NpmPackage(t, "playwright-core", playwrightCoreVersion, "the API reference's browser test")

	out := devstack.Node(t, 3*time.Minute, []string{"PLAYWRIGHT_CORE=" + filepath.Join(modules, "playwright-core"), "CHROMIUM=" + chromium},
		filepath.Join("testdata", "render-reference.js"), h.gw.URL+"/api/v1/docs", strconv.Itoa(len(ops)))
	var got struct {
		Operations []string
		Requests   []string
		Blocked    []string
		Errors     []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%q: %v", out, err)
	}

	rendered := map[string]bool{}
	for _, id := range got.Operations {
		_, op, _ := strings.Cut(id, "/operation/")
		rendered[op] = true
	}
	for _, op := range ops {
		if !rendered[op.ID] {
			t.Errorf("%s %s (%s) is not rendered", op.Method, op.Path, op.ID)
		}
	}
	origin, _ := url.Parse(h.gw.URL)
	for _, r := range got.Requests {
		if u, err := url.Parse(r); err != nil || (u.Host != origin.Host && u.Scheme != "blob" && u.Scheme != "data") {
			t.Errorf("the page requested %s, outside the gateway", r)
		}
	}
	// Redoc's sidebar shows Redocly's logo from their CDN when it can; the policy stops
	// that request before it is made, and the sidebar does without.
	for _, b := range got.Blocked {
		if !strings.HasPrefix(b, "https://cdn.redoc.ly/") {
			t.Errorf("the page's policy blocked %s: the reference needs it", b)
		}
	}
	for _, e := range got.Errors {
		if !strings.Contains(e, "'https://cdn.redoc.ly/") || !strings.Contains(e, "violates the following Content Security Policy directive") {
			t.Errorf("page error: %s", e)
		}
	}
	t.Logf("Redoc rendered %d of the document's %d operations; the page made %d requests", len(rendered), len(ops), len(got.Requests))
}
