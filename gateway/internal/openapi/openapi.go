// Package openapi embeds the API description. openapi.yaml here is a copy of the one
// at the repository root (kept identical by a test and by `make openapi`), because an
// embed directive cannot reach outside the module.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var YAML []byte

// JSON returns the document converted to JSON.
func JSON() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(YAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return json.Marshal(doc)
}
