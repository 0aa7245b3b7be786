package dbtsync_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

const v12 = `"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"`

// Manifests that JSON readers could read two ways: a duplicate member name (the metadata's
// with an unsupported schema version after it, a node's name, a name spelled with an
// escape) and invalid UTF-8 (in a node's name, in SQL the conversion skips).
var twoReadings = []struct {
	name, manifest string
	field          string // the worker's failure names it
	pointer        string // the upload's 400 names it
}{
	{"duplicate-in-metadata-hiding-its-version", `{"metadata":{"x":1,"x":2,"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v99.json"},"nodes":{}}`,
		`metadata: manifest is not valid JSON: duplicate member name "x"`, `duplicate member name \"x\" in /manifest/metadata`},
	{"duplicate-node-name", `{"metadata":{` + v12 + `},"nodes":{"model.p.m":{"resource_type":"model","name":"a","name":"b"}}}`,
		`nodes["model.p.m"]: manifest is not valid JSON: duplicate member name "name"`, `duplicate member name \"name\" in /manifest/nodes/model.p.m`},
	{"duplicate-spelled-with-an-escape", `{"metadata":{` + v12 + `},"nodes":{"model.p.m":{"resource_type":"model","name":"a","n\u0061me":"b"}}}`,
		`nodes["model.p.m"]: manifest is not valid JSON: duplicate member name "name"`, `duplicate member name \"name\" in /manifest/nodes/model.p.m`},
	{"duplicate-node", `{"metadata":{` + v12 + `},"nodes":{"model.p.m":{"name":"a"},"model.p.m":{"name":"b"}}}`,
		`nodes: manifest is not valid JSON: duplicate member name "model.p.m"`, `duplicate member name \"model.p.m\" in /manifest/nodes`},
	{"duplicate-in-a-metric", `{"metadata":{` + v12 + `},"nodes":{},"metrics":{"metric.p.x":{"name":"x","type":"simple","type":"ratio"}}}`,
		`metrics["metric.p.x"]: manifest is not valid JSON: duplicate member name "type"`, `duplicate member name \"type\" in /manifest/metrics/metric.p.x`},
	{"duplicate-in-meta", `{"metadata":{` + v12 + `},"nodes":{"model.p.m":{"resource_type":"model","name":"m","meta":{"k":{"a":1,"a":2}}}}}`,
		`nodes["model.p.m"].meta: manifest is not valid JSON: duplicate member name "a"`, `duplicate member name \"a\" in /manifest/nodes/model.p.m/meta/k`},
	{"invalid-utf8-in-a-node-name", `{"metadata":{` + v12 + `},"nodes":{"model.p.m":{"resource_type":"model","name":"a` + "\xff" + `"}}}`,
		`nodes["model.p.m"].name: manifest is not valid JSON: invalid UTF-8 in a string`, `invalid UTF-8 in a string at /manifest/nodes/model.p.m/name`},
	{"invalid-utf8-in-skipped-sql", `{"metadata":{` + v12 + `},"nodes":{"model.p.m":{"resource_type":"model","name":"m","raw_code":"select '` + "\xc3\x28" + `'"}}}`,
		`nodes["model.p.m"].raw_code: manifest is not valid JSON: invalid UTF-8 in a string`, `invalid UTF-8 in a string at /manifest/nodes/model.p.m/raw_code`},
	{"lone-surrogate-in-a-description", `{"metadata":{` + v12 + `},"nodes":{"model.p.m":{"resource_type":"model","name":"m","description":"\ud800"}}}`,
		`nodes["model.p.m"].description: manifest is not valid JSON`, `/manifest/nodes/model.p.m/description`},
}

// A git-sourced manifest (read by DecodeManifest, as the worker reads it) that JSON
// readers could read two ways fails the job with invalid_manifest naming the field,
// never converting one of the readings.
func TestManifestWithTwoReadingsFailsTheJobNamingTheField(t *testing.T) {
	for _, c := range twoReadings {
		t.Run(c.name, func(t *testing.T) {
			p, err := dbtsync.DecodeManifest(strings.NewReader(c.manifest))
			var f *dbtsync.JobFailure
			if !errors.As(err, &f) || f.Code != dbtsync.CodeInvalidManifest || !dbtsync.IsPermanent(err) || !strings.HasPrefix(f.Message, c.field) {
				t.Fatalf("got %v (%+v), want a permanent invalid_manifest failure starting %q", err, p, c.field)
			}
		})
	}
}

// The same manifests uploaded are 400 invalid_request naming where, before any job is
// queued.
func TestUploadedManifestWithTwoReadingsIs400(t *testing.T) {
	f := newFixture(t)
	h := f.handler(developer, dbtsync.DefaultMaxSyncBodyBytes)
	for _, c := range twoReadings {
		t.Run("dbt-sync-400-"+c.name, func(t *testing.T) {
			body := `{"source":"manifest","branchName":"dbt/x","manifest":` + c.manifest + `}`
			w, out := call(t, h, "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), body)
			msg, _ := out["message"].(string)
			if w.Code != 400 || out["code"] != "invalid_request" || !strings.HasPrefix(msg, "malformed JSON: ") || !strings.Contains(msg, strings.ReplaceAll(c.pointer, `\"`, `"`)) {
				t.Fatalf("%d %v, want 400 invalid_request naming %s", w.Code, out, c.pointer)
			}
		})
	}
	body := `{"source":"git","source":"manifest","manifest":{"nodes":{}}}`
	if w, out := call(t, h, "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), body); w.Code != 400 || out["message"] != `malformed JSON: duplicate member name "source" in /` {
		t.Errorf("dbt-sync-400-duplicate-field: %d %v", w.Code, out)
	}
	if n := len(f.jobs(t)); n != 0 {
		t.Errorf("%d jobs queued", n)
	}
}

// A manifest over the worker's limits fails the job with work_limit naming the limit: a
// node's members the conversion reads that hold more than MaxMemberBytes, more names
// in open objects than MaxNames.
func TestManifestOverItsLimitsFailsWithWorkLimit(t *testing.T) {
	for _, c := range []struct {
		name, manifest string
		limits         convert.ManifestLimits
		want           string
	}{
		{"description-over-member-bytes", `{"nodes":{"model.p.m":{"resource_type":"model","name":"m","description":"` + strings.Repeat("d", 4<<20) + `"}}}`,
			convert.ManifestLimits{MaxMemberBytes: 1 << 20}, `nodes["model.p.m"].description: the manifest read is over its limit of 1048576 bytes of one value the conversion reads`},
		{"members-over-member-bytes", `{"nodes":{"model.p.m":{"resource_type":"model","name":"m","description":"` + strings.Repeat("d", 600<<10) + `","alias":"` + strings.Repeat("a", 600<<10) + `"}}}`,
			convert.ManifestLimits{MaxMemberBytes: 1 << 20}, `nodes["model.p.m"].alias: the manifest read is over its limit of 1048576 bytes of the members of one node the conversion reads`},
		{"nodes-over-names", `{"nodes":{` + nodesOf(200) + `}}`,
			convert.ManifestLimits{MaxNames: 100}, `nodes: the manifest read is over its limit of 100 member names of the objects open at once`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := dbtsync.DecodeManifestWith(strings.NewReader(c.manifest), c.limits)
			var f *dbtsync.JobFailure
			if !errors.As(err, &f) || f.Code != dbtsync.CodeWorkLimit || !dbtsync.IsPermanent(err) || f.Message != c.want {
				t.Fatalf("got %v, want a permanent work_limit failure %q", err, c.want)
			}
		})
	}
}

func nodesOf(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"n%d":{}`, i)
	}
	return b.String()
}

// An upload whose open objects hold more member names than the worker remembers is 413
// naming the limit (the decoder remembers them too, to refuse a duplicate); as many is
// taken, as the worker takes it.
func TestUploadOverTheNamesLimitIs413(t *testing.T) {
	f := newFixture(t)
	h := f.handlerWith(developer, dbtsync.DefaultMaxSyncBodyBytes, convert.ManifestLimits{MaxNames: 100})
	for _, c := range []struct {
		name  string
		nodes int
		code  int
	}{{"dbt-sync-202-at-the-names-limit", 98, 202}, {"dbt-sync-413-over-the-names-limit", 99, 413}} {
		// The names open at once: the manifest's metadata and nodes, and the nodes.
		manifest := `{"metadata":{` + v12 + `},"nodes":{` + nodesOf(c.nodes) + `}}`
		body := `{"source":"manifest","branchName":"dbt/x","manifest":` + manifest + `}`
		w, out := call(t, h, "POST", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync", dep), body)
		if w.Code != c.code || c.code == 413 && out["message"] != `field "manifest" is over its limit of 100 member names in the objects open at once` {
			t.Errorf("%s: %d %v", c.name, w.Code, out)
		}
		_, err := dbtsync.DecodeManifestWith(strings.NewReader(manifest), convert.ManifestLimits{MaxNames: 100})
		if (err == nil) != (c.code == 202) {
			t.Errorf("%s: the worker reads it with %v", c.name, err)
		}
	}
}
