package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"
)

// FuzzBodyDeploymentID: the gateway's peek at a generate-session body never fails on
// content, never panics, forwards the body byte for byte, and reports a deployment only
// when the body's deploymentId is exactly that positive integer (anything else is left to
// embed-svc's strict decoder, which answers 400).
func FuzzBodyDeploymentID(f *testing.F) {
	for _, s := range []string{`{"deploymentId":1,"externalId":"a"}`, `{"deploymentId":"1"}`, `{"deploymentId":1.0}`, `{"deploymentId":-1}`,
		`{"deploymentId":01}`, `{"deploymentId":1e3}`, `{"deploymentId":99999999999999999999}`, `{"deploymentId":1,"deploymentId":2}`,
		`{"DeploymentID":3}`, `[]`, `null`, `{`, ``, `{"deploymentId":null}`, `{"deploymentId":1} trailing`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/api/v1/embed/generate-session", bytes.NewReader(body))
		id, err := bodyDeploymentID(r)
		if err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		forwarded, _ := io.ReadAll(r.Body)
		if !bytes.Equal(forwarded, body) || r.ContentLength != int64(len(body)) {
			t.Fatalf("body %q forwarded as %q (length %d)", body, forwarded, r.ContentLength)
		}
		if id == 0 {
			return
		}
		var peek struct {
			DeploymentID json.RawMessage `json:"deploymentId"`
		}
		if json.Unmarshal(body, &peek) != nil {
			t.Fatalf("body %q is not JSON, yet deployment %d was read from it", body, id)
		}
		if got, ok := parseID(string(peek.DeploymentID)); !ok || got != id || id <= 0 {
			t.Fatalf("body %q: deployment %d, but deploymentId is %s", body, id, peek.DeploymentID)
		}
	})
}
