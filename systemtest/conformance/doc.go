// Package conformance holds the tests that keep openapi.yaml sound as a document: it is a
// valid OpenAPI 3 description, Redocly's recommended rules find no error in it, and every
// error code the services answer is documented. That the document and the routers agree is
// each process's own routes test (api.CheckRoutes over httpx.Router.Routes). The tests
// read files only; they start nothing.
package conformance
