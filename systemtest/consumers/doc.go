// Package consumers feeds api/openapi.yaml to the tools customers generate clients with,
// at pinned versions installed outside the repository, and checks what comes out: ogen's
// Go client builds and has a method for every operation; openapi-typescript's types
// compile with tsc --strict, cover every operation, and carry a typed script through the
// quickstart's embed flow against the running platform. (oapi-codegen's client is
// committed as api/client and checked there; Redocly lints the document in conformance;
// Prism judges the e2e suite's traffic.)
package consumers
