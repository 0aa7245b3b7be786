package workspace_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// FuzzValidKey: ValidKey accepts exactly the keys of the stated grammar (1 to 128
// characters of a-z 0-9 _ . -, starting and ending with a letter or a digit), and every
// key it accepts is one path segment as it is.
func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"a", "sales.q1", "a-b_c.d", "-a", "a-", "A", "a/b", "", strings.Repeat("a", 128), strings.Repeat("a", 129), "é", "a b", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
		want := len(k) >= 1 && len(k) <= workspace.MaxKeyLength && alnum(k[0]) && alnum(k[len(k)-1])
		for i := 0; want && i < len(k); i++ {
			want = alnum(k[i]) || k[i] == '_' || k[i] == '.' || k[i] == '-'
		}
		err := workspace.ValidKey(k)
		if (err == nil) != want {
			t.Fatalf("ValidKey(%q) = %v, want valid %v", k, err, want)
		}
		if err == nil && url.PathEscape(k) != k {
			t.Fatalf("valid key %q is not a path segment as it is", k)
		}
	})
}

func FuzzDecodePutItemByKeyRequest(f *testing.F) {
	fuzzDecoder(f, "PUT "+workspace.Base+"/workbooks/by-key/{key}", "/api/v1/deployments/7/workbooks/by-key/sales.q1", workspace.DecodePutItemByKeyRequest(workspace.TypeWorkbook),
		`{"name":"a","folderId":3,"meta":{"x":1},"calculatedFields":{},"dashboardDraft":{"kind":"CLASSIC"},"expectedVersion":2}`,
		`{"name":"a","expectedVersion":-1}`, `{"name":"a","folderId":0}`, `{"meta":{}}`, `{"name":"a","meta":[1]}`, `{"name":"a","key":"x"}`, `null`)
}

func FuzzDecodePutFolderByKeyRequest(f *testing.F) {
	fuzzDecoder(f, "PUT "+workspace.Base+"/folders/by-key/{key}", "/api/v1/deployments/7/folders/by-key/team-a", workspace.DecodePutFolderByKeyRequest,
		`{"name":"a","parentId":3,"position":2,"expectedVersion":1}`, `{"name":"a","parentId":0}`, `{"name":"a","parentId":null}`, `{}`, `{"name":"a","expectedVersion":"1"}`)
}
