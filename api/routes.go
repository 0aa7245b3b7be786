package api

import (
	"fmt"
	"slices"
	"strings"
)

// CheckRoutes compares what one process's router serves with the document: routes are
// "METHOD /path" ServeMux patterns (httpx.Router.Routes), compared by shape, so a path
// parameter's name and a trailing {name...} do not matter. It fails, naming each, on a
// route the document does not describe and on an operation served by service (the
// x-served-by of its tag) that no route serves. Routes outside /api/v1 and /build/api/v1
// are the process's own, not the API, and are ignored.
func CheckRoutes(service string, routes []string) error {
	ops, err := Operations()
	if err != nil {
		return err
	}
	documented := map[string]Operation{}
	for _, op := range ops {
		if op.Service == "" {
			return fmt.Errorf("openapi.yaml: %s %s: its tag %q has no x-served-by", op.Method, op.Path, op.Tag)
		}
		documented[routeShape(op.Method+" "+op.Path)] = op
	}
	served := map[string]bool{}
	var problems []string
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		if !strings.HasPrefix(path, "/api/v1/") && !strings.HasPrefix(path, "/build/api/v1/") {
			continue
		}
		key := routeShape(r)
		if served[key] {
			problems = append(problems, fmt.Sprintf("%s %s is registered twice", method, path))
		}
		served[key] = true
		switch op, ok := documented[key]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s %s is served but openapi.yaml does not describe it", method, path))
		case op.Service != service:
			problems = append(problems, fmt.Sprintf("%s %s is served by %s but openapi.yaml says %s (x-served-by of tag %q)", method, path, service, op.Service, op.Tag))
		}
	}
	for _, op := range ops {
		if op.Service == service && !served[routeShape(op.Method+" "+op.Path)] {
			problems = append(problems, fmt.Sprintf("%s %s (%s) is in openapi.yaml but %s does not serve it", op.Method, op.Path, op.ID, service))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return fmt.Errorf("%s's routes and openapi.yaml disagree:\n  %s", service, strings.Join(problems, "\n  "))
}

// routeShape writes every path parameter of "METHOD /path" as {}.
func routeShape(route string) string {
	segs := strings.Split(route, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}
