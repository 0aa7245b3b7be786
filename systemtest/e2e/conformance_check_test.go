package e2e_test

import (
	"net/http"
	"testing"
)

// TestResponseCheckCatchesNonConformingResponses: the check every e2e call goes through
// rejects what the document forbids, so a passing suite means conforming responses.
func TestResponseCheckCatchesNonConformingResponses(t *testing.T) {
	_, router := loadContract(t)
	folder := `{"id":1,"deploymentId":1,"name":"f","position":0,"type":"FOLDER","key":null,"version":1,"createdAt":"2026-01-01T00:00:00.000Z",` +
		`"updatedAt":"2026-01-01T00:00:00.000Z","createdBy":1,"updatedBy":1,"parentId":null,"folderPath":[],"user":{"id":1,"email":"a@b.c"}}`
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	for _, c := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		conforms           bool
	}{
		{"a complete folder conforms", "POST", "/api/v1/deployments/1/folders", 200, jsonHeader, folder, true},
		{"a folder without a required field does not", "POST", "/api/v1/deployments/1/folders", 200, jsonHeader, `{"id":1,"deploymentId":1,"name":"f"}`, false},
		{"a field of the wrong type does not", "POST", "/api/v1/deployments/1/folders", 200, jsonHeader, `{"id":"1"` + folder[len(`{"id":1`):], false},
		{"a date that is not a date-time does not", "POST", "/api/v1/deployments/1/folders", 200, jsonHeader,
			`{"id":1,"deploymentId":1,"name":"f","position":0,"type":"FOLDER","createdAt":"yesterday","updatedAt":"2026-01-01T00:00:00Z","createdBy":1,"updatedBy":1,"parentId":null,"folderPath":[],"user":{"id":1,"email":"a@b.c"}}`, false},
		{"an undocumented status does not", "POST", "/api/v1/deployments/1/folders", 418, jsonHeader, `{"status":418,"message":"teapot"}`, false},
		{"an error body without message does not", "POST", "/api/v1/deployments/1/folders", 404, jsonHeader, `{"status":404}`, false},
		{"a 401 without WWW-Authenticate does not", "POST", "/api/v1/deployments/1/folders", 401, jsonHeader, `{"status":401,"code":"unauthenticated","message":"no"}`, false},
		{"an error body without code does not", "POST", "/api/v1/deployments/1/folders", 404, jsonHeader, `{"status":404,"message":"x"}`, false},
		{"an error body with an unknown code does not", "POST", "/api/v1/deployments/1/folders", 404, jsonHeader, `{"status":404,"code":"nope","message":"x"}`, false},
		{"a 204 with a body does not", "POST", "/api/v1/embed/session/revoke", 204, http.Header{}, `{}`, false},
		{"a 204 without a body conforms", "POST", "/api/v1/embed/session/revoke", 204, http.Header{}, ``, true},
		{"a percent-encoded branch name is one segment", "GET", "/build/api/v1/deployments/1/branches/dbt%2Fmain", 404, jsonHeader, `{"status":404,"code":"not_found","message":"x"}`, true},
		{"a file path with slashes is the path parameter", "GET", "/build/api/v1/deployments/1/branches/dbt%2Fmain/files/model/cubes/a.yml", 200, jsonHeader,
			`{"branchName":"dbt/main","version":1,"path":"model/cubes/a.yml","content":"cubes: []"}`, true},
		{"a path the document does not have does not", "GET", "/api/v1/nowhere", 200, jsonHeader, `{}`, false},
		{"the reference page conforms", "GET", "/api/v1/docs", 200, http.Header{"Content-Type": {"text/html; charset=utf-8"}}, `<!DOCTYPE html><html></html>`, true},
		{"the reference as JSON does not", "GET", "/api/v1/docs", 200, jsonHeader, `{}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, "http://127.0.0.1:1"+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = conformance(router, req, c.status, c.header, []byte(c.body))
			if (err == nil) != c.conforms {
				t.Fatalf("conforms %v, want %v (%v)", err == nil, c.conforms, err)
			}
		})
	}
}

func TestTimestampCheckCatchesOtherPrecisions(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"createdAt":"2026-11-25T04:30:00.120Z","items":[{"updatedAt":"2026-11-25T04:30:00.000Z"}]}`: true,
		`{"createdAt":"2026-11-25T04:30:00Z"}`:                                                        false,
		`{"items":[{"expiresAt":"2026-11-25T04:30:00.123456789Z"}]}`:                                  false,
		`{"revokedAt":null,"name":"2026"}`:                                                            true,
	} {
		if err := timestampsInOnePrecision([]byte(body)); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", body, err, ok)
		}
	}
}
