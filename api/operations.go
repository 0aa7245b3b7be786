package api

import (
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Operation is one operation of the document.
type Operation struct {
	Method string // upper case: GET, POST, ...
	Path   string // as the document writes it, with {parameters}
	ID     string // operationId
	Tag    string // its first tag, the route group
	// Service is the process that serves it: the x-served-by of its first tag.
	Service string
}

// methods are the path item keys that are operations.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Operations lists the document's operations, sorted by path and method: what every
// generated client must cover and the API reference must render.
func Operations() ([]Operation, error) {
	var doc struct {
		Tags []struct {
			Name     string `yaml:"name"`
			ServedBy string `yaml:"x-served-by"`
		} `yaml:"tags"`
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(YAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	servedBy := map[string]string{}
	for _, tag := range doc.Tags {
		servedBy[tag.Name] = tag.ServedBy
	}
	var ops []Operation
	for path, item := range doc.Paths {
		for key, node := range item {
			if !slices.Contains(methods, key) {
				continue
			}
			var op struct {
				ID   string   `yaml:"operationId"`
				Tags []string `yaml:"tags"`
			}
			if err := node.Decode(&op); err != nil {
				return nil, fmt.Errorf("openapi.yaml: %s %s: %w", key, path, err)
			}
			o := Operation{Method: strings.ToUpper(key), Path: path, ID: op.ID}
			if len(op.Tags) > 0 {
				o.Tag = op.Tags[0]
				o.Service = servedBy[o.Tag]
			}
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method)
	})
	return ops, nil
}
