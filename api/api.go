// Package api is the platform's API description, openapi.yaml (OpenAPI 3.0.3): the one
// copy of the document, embedded here so that the gateway serves exactly what is
// committed. The Go client generated from it is the client subpackage.
package api

import (
	_ "embed"
	"encoding/json"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// YAML is openapi.yaml as committed.
//
//go:embed openapi.yaml
var YAML []byte

// JSON returns the document converted to JSON (what GET /api/v1/openapi.json serves).
func JSON() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(YAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return json.Marshal(doc)
}
