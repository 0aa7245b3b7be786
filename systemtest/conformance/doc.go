// Package conformance holds the tests that keep openapi.yaml and the routers in step:
// every route a service's ServeMux registers under /api/v1 or /build/api/v1 (plus the
// gateway's own document route) is described in the document and every operation of the
// document is registered by a router, the document is a valid OpenAPI 3 description,
// and the gateway embeds an identical copy of it. The tests read source code and files
// only; they start nothing.
package conformance
