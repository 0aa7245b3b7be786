package dbtsync_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/errs"
)

var startSyncSeeds = []string{
	`{}`,
	`{"source":"manifest","manifest":{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{}}}`,
	`{"source":"manifest","manifest":{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v6.json"}}}`,
	`{"ref":"abc1234"}`, `{"ref":"feature/x","branchName":"dbt/x","output":"files"}`,
	`{"source":1}`, `{"manifest":[1]}`, `{"x":null}`, `[`, `{"source":"git"} {}`, `{"manifest":{"a":[{"b":"c"}],"metadata":{"dbt_schema_version":3}}}`,
	`{"source":"git","source":"manifest"}`, "\"\xff\"", `{"branchName":"../x"}`,
	`{"source":"git","manifest":"x"}`, `{"manifest":{"metadata":{"dbt_schema_version":"v6"}},"source":"git"}`,
}

// FuzzDecodeStartSyncRequest: any body is either accepted with a consistent request or
// rejected with a 4xx naming the problem; never a panic. An accepted manifest is copied
// out as valid JSON.
func FuzzDecodeStartSyncRequest(f *testing.F) {
	for _, s := range startSyncSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var sink bytes.Buffer
		req, err := dbtsync.DecodeStartSyncRequest(bytes.NewReader(body), &sink)
		if err != nil {
			if status, _, msg, _ := errs.Answer(err); status < 400 || status > 499 || msg == "" {
				t.Fatalf("error %v is not a client error", err)
			}
			return
		}
		if req.Source != "git" && req.Source != "manifest" || req.Output != "branch" && req.Output != "files" {
			t.Fatalf("accepted bad enum: %+v", req)
		}
		if req.Source == "manifest" && !req.HasManifest {
			t.Fatal("manifest source accepted without a manifest")
		}
		if req.HasManifest && !json.Valid(sink.Bytes()) {
			t.Fatalf("streamed manifest is not valid JSON: %q", sink.String())
		}
	})
}

func TestDecodeStartSyncRequestStreamsManifestVerbatim(t *testing.T) {
	manifest := `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v20.json"},"nodes":{"a":{"raw_code":"select \"x\""}}}`
	var sink bytes.Buffer
	req, err := dbtsync.DecodeStartSyncRequest(strings.NewReader(`{"manifest":`+manifest+`,"source":"manifest"}`), &sink)
	if err != nil || req.SchemaVersion != 20 || !req.HasManifest {
		t.Fatalf("req %+v err %v", req, err)
	}
	var a, b any
	_ = json.Unmarshal([]byte(manifest), &a)
	_ = json.Unmarshal(sink.Bytes(), &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("streamed manifest differs:\n%s\n%s", ja, jb)
	}
}

func FuzzDecodeIntegrationRequest(f *testing.F) {
	for _, s := range []string{`{"repoUrl":"https://x/y.git","branch":"main","projectPath":"."}`, `{"repoUrl":"file:///r","branch":"m","projectPath":"","credentials":{"token":"t"}}`, `{"repoUrl":1}`, `{}`, `{"credentials":{"x":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := dbtsync.DecodeIntegrationRequest(bytes.NewReader(body))
		if status, _, _, _ := errs.Answer(err); err != nil && status >= 500 {
			t.Fatalf("error %v is not a client error", err)
		}
	})
}

func FuzzDecodeStagingRequest(f *testing.F) {
	for _, s := range []string{`{"enabled":true}`, `{"enabled":"yes"}`, `{}`, `{"enabled":false,"x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := dbtsync.DecodeStagingRequest(bytes.NewReader(body))
		if status, _, _, _ := errs.Answer(err); err != nil && status >= 500 {
			t.Fatalf("error %v is not a client error", err)
		}
	})
}

// A manifest sent with source "git" is ignored as the spec says: after "source":"git" it
// is skipped unread (nothing streamed out), before it (or with source left to its default)
// it is neither validated nor kept; the same manifest with source "manifest" is checked.
func TestDecodeStartSyncRequestIgnoresManifestForGit(t *testing.T) {
	v6 := `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v6.json"}}`
	for _, tc := range []struct {
		name, body string
		streamed   bool
		status     int
		msg        string
	}{
		{"source-first-skipped", `{"source":"git","manifest":` + v6 + `}`, false, 0, ""},
		{"source-first-any-type", `{"source":"git","manifest":"not an object"}`, false, 0, ""},
		{"default-source", `{"manifest":` + v6 + `}`, true, 0, ""},
		{"source-after", `{"manifest":` + v6 + `,"source":"git"}`, true, 0, ""},
		{"source-after-any-type", `{"manifest":[1,2],"source":"git"}`, false, 0, ""},
		{"checked-for-manifest", `{"manifest":` + v6 + `,"source":"manifest"}`, true, 400, "v6"},
		{"checked-for-manifest-first", `{"source":"manifest","manifest":` + v6 + `}`, true, 400, "v6"},
		{"type-checked-for-manifest", `{"manifest":"x","source":"manifest"}`, false, 400, "must be an object"},
		{"malformed-still-400", `{"source":"git","manifest":{"a":}`, false, 400, "malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sink bytes.Buffer
			req, err := dbtsync.DecodeStartSyncRequest(strings.NewReader(tc.body), &sink)
			if tc.status != 0 {
				if status, _, msg, _ := errs.Answer(err); err == nil || status != tc.status || !strings.Contains(msg, tc.msg) {
					t.Fatalf("err %v, want %d %q", err, tc.status, tc.msg)
				}
				return
			}
			if err != nil || req.Source != "git" || req.HasManifest || req.SchemaVersion != 0 {
				t.Fatalf("req %+v err %v, want an accepted git sync without a manifest", req, err)
			}
			if streamed := sink.Len() > 0; streamed != tc.streamed {
				t.Fatalf("streamed %d bytes, want streamed=%v", sink.Len(), tc.streamed)
			}
		})
	}
}
