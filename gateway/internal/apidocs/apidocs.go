// Package apidocs is the interactive API reference the gateway serves at /api/v1/docs:
// Redoc (npm redoc, pinned), rendering the document the gateway serves at
// /api/v1/openapi.json. Redoc's standalone bundle is embedded in the binary and inlined
// into the one page, so the reference needs nothing but the gateway: no CDN, no second
// route. The page's Content-Security-Policy lets exactly that bundle run (by its hash)
// and lets nothing load from anywhere else.
//
// redoc.standalone.js is redoc@RedocVersion's bundles/redoc.standalone.js, byte for byte
// (a test compares it with the npm release); refresh it after changing RedocVersion with
// `make redoc`. Its licenses: redoc.LICENSE and redoc.standalone.js.LICENSE.txt.
package apidocs

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/analyticsco/platform/libs/httpx"
)

// RedocVersion is the npm release of redoc whose standalone bundle is embedded.
const RedocVersion = "2.5.4"

//go:embed redoc.standalone.js
var redocJS string

var page = template.Must(template.New("docs").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<link rel="icon" href="data:,">
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<redoc spec-url="{{.SpecURL}}"></redoc>
<script>{{.Script}}</script>
</body>
</html>
`))

// Handler serves the reference page of the document at specURL (a path of the same
// origin) for GET and HEAD, with conditional requests answered 304 by its ETag. The
// caller routes only GET and HEAD to it. The page (the bundle inlined, about 1.1 MB) is
// built at its first request, not here: a gateway that never serves it never holds it,
// nor touches the bundle's pages of the binary (5 MiB of peak RSS at start otherwise).
func Handler(title, specURL string) (http.Handler, error) {
	if title == "" || !strings.HasPrefix(specURL, "/") {
		return nil, fmt.Errorf("apidocs: a title and a same-origin path of the document are needed")
	}
	built := sync.OnceValues(func() (*builtPage, error) { return build(title, specURL) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := built()
		if err != nil {
			httpx.WriteError(w, http.StatusInternalServerError, "the API reference cannot be served")
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", p.csp)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", p.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(p.html))
	}), nil
}

type builtPage struct {
	html      []byte
	csp, etag string
}

// build renders the page, the bundle inlined, into one buffer of its final size.
func build(title, specURL string) (*builtPage, error) {
	if strings.Contains(redocJS, "</script") {
		return nil, fmt.Errorf("apidocs: the Redoc bundle contains </script and cannot be inlined")
	}
	b := bytes.NewBuffer(make([]byte, 0, len(redocJS)+1024))
	err := page.Execute(b, struct {
		Title, SpecURL string
		Script         template.JS
	}{title, specURL, template.JS(redocJS)})
	if err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	html := b.Bytes()
	scriptHash := sha256.Sum256([]byte(redocJS))
	pageHash := sha256.Sum256(html)
	csp := strings.Join([]string{
		"default-src 'none'",
		"script-src 'sha256-" + base64.StdEncoding.EncodeToString(scriptHash[:]) + "'",
		// Redoc's styled-components write <style> elements at run time (a hash beside
		// 'unsafe-inline' would turn it off), and its search runs in a worker it starts
		// from a blob.
		"style-src 'unsafe-inline'",
		"worker-src blob:",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
	etag := `"` + base64.RawURLEncoding.EncodeToString(pageHash[:16]) + `"`
	return &builtPage{html: html, csp: csp, etag: etag}, nil
}
