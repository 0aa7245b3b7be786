package workspace_test

import (
	"context"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/store/memstore"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// FuzzImportBundle feeds import bodies to the bundle decoder (always a dry run, so the
// fuzzer explores the decoder, not the writes): every body is either planned or refused
// with a 4xx naming what is wrong, never a panic or another error.
func FuzzImportBundle(f *testing.F) {
	const head = `{"format":"analytics-workspace-bundle/1","source":{"accountId":100,"deploymentId":1,"folderId":null},`
	for _, s := range []string{
		head + `"items":[]}`,
		head + `"items":[{"type":"FOLDER","key":"a","folderKey":null,"name":"a","position":1,"grants":[{"userId":3,"level":"view"}]},` +
			`{"type":"REPORT","key":"r","folderKey":"a","name":"r","position":0,"meta":{"sql":"select 1"}},` +
			`{"type":"WORKBOOK","key":"w","folderKey":"a","name":"w","position":0,"dashboardDraft":{"widgets":[{"id":"x","type":"CHART","position":{"x":0,"y":0,"w":1,"h":1},"config":{"reportKey":"r"}}]},` +
			`"dashboardPublished":{"status":"published","allowEmbed":true,"config":{},"reportSnapshots":[{"reportKey":"r"}]},"embedAccess":{"tenants":[],"groups":[]}}]}`,
		head + `"rootEmbedAccess":{"allEmbedUsers":"read","tenants":[],"groups":[]},"items":[{"type":"FOLDER","key":"x","folderKey":"y","name":"x"},{"type":"FOLDER","key":"y","folderKey":"x","name":"y"}]}`,
		`{"format":"analytics-workspace-bundle/2","items":[]}`, `{"items":[]}`, `{"format":1}`, `[]`, `{`, ``, `{"format":"analytics-workspace-bundle/1","items":[{"type":"FOLDER"}]}`,
	} {
		f.Add(s)
	}
	store := memstore.New()
	svc := workspace.NewService(workspace.Ports{Store: store}, workspace.Options{Limits: workspace.Limits{ImportBytes: 64 << 10, ImportItems: 50}})
	f.Fuzz(func(t *testing.T, bundle string) {
		body := `{"dryRun":true,"bundle":` + bundle + `}`
		res, err := svc.Import(context.Background(), admin, 7, workspace.ImportInput{Body: strings.NewReader(body)})
		if err == nil {
			if !res.DryRun {
				t.Fatalf("a dry run answered as applied")
			}
			return
		}
		status, _, msg, ok := errs.Answer(err)
		if !ok || status < 400 || status > 499 || msg == "" {
			t.Fatalf("bundle %q: want a 4xx client error, got %#v", bundle, err)
		}
	})
}
