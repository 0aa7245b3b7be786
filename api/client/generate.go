// Package client is the Go client of the platform's API, generated from api/openapi.yaml
// by oapi-codegen (pinned in tools/go.mod): a Client with one method per operation, and
// a ClientWithResponses whose methods decode every documented answer into its type.
//
//	c, err := client.NewClientWithResponses("http://127.0.0.1:8080",
//		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
//			r.Header.Set("Authorization", "Bearer "+token)
//			return nil
//		}))
//	folder, err := c.CreateFolderWithResponse(ctx, deploymentID, nil, client.CreateFolderJSONRequestBody{Name: "Finance"})
//
// Regenerate after a change to the document with `go generate ./...` in api/; a test
// fails while client.gen.go is not what the pinned generator makes of the document.
package client

//go:generate env GOWORK=off go tool -modfile=../../tools/go.mod oapi-codegen -config oapi-codegen.yaml ../openapi.yaml
