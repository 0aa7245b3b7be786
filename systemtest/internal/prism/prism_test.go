package prism_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/internal/prism"
)

func exchange(method, uri, body string, status int, answer string) *prism.Exchange {
	return &prism.Exchange{Method: method, URI: uri, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body),
		Status: status, RespHeader: http.Header{"Content-Type": {"application/json"}}, RespBody: []byte(answer)}
}

func fields(vs []prism.Violation) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Field())
	}
	return strings.Join(out, " ")
}

// TestPrismRefusesNullBesideAllOfAndAdmitsANullableReference: what this branch's change to
// openapi.yaml rests on. In OpenAPI 3.0.3 nullable beside allOf admits no null (Prism
// names the field and the rule), while a $ref to a nullable component does; a request
// the document does not allow is a request violation, and a body Prism cannot parse
// still has its answer judged.
func TestPrismRefusesNullBesideAllOfAndAdmitsANullableReference(t *testing.T) {
	v := prism.Start(t, filepath.Join("testdata", "nullable.yaml"))
	ctx := context.Background()
	valid := `{"name":"a","besideAllOf":{"id":1},"nullableRef":{"id":2}}`
	for _, c := range []struct {
		name, body, answer        string
		wantRequest, wantResponse string
		wantUnparsed              bool
	}{
		{"objects in both fields conform", valid, valid, "", "", false},
		{"null through the nullable reference conforms", valid, `{"name":"a","besideAllOf":{"id":1},"nullableRef":null}`, "", "", false},
		{"null beside allOf does not", valid, `{"name":"a","besideAllOf":null,"nullableRef":{"id":2}}`, "", "response.body.besideAllOf", false},
		{"a request without a required field is a request violation", `{"besideAllOf":{"id":1},"nullableRef":null}`, valid, "request.body", "", false},
		{"an unparsable request body still has its answer judged", `{"name":`, `{"name":"a"}`, "request.body", "response.body", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := v.Judge(ctx, exchange("PUT", "/things/1", c.body, 200, c.answer))
			if err != nil {
				t.Fatal(err)
			}
			if f := fields(got.Request); !strings.HasPrefix(f, c.wantRequest) || (c.wantRequest == "") != (f == "") {
				t.Errorf("request violations %v, want at %q", got.Request, c.wantRequest)
			}
			if f := fields(got.Response); !strings.HasPrefix(f, c.wantResponse) || (c.wantResponse == "") != (f == "") {
				t.Errorf("response violations %v, want at %q", got.Response, c.wantResponse)
			}
			if (got.Unparsed != "") != c.wantUnparsed {
				t.Errorf("unparsed %q, want %v", got.Unparsed, c.wantUnparsed)
			}
		})
	}
	// The rule is named, not only the field.
	got, _ := v.Judge(ctx, exchange("PUT", "/things/1", valid, 200, `{"name":"a","besideAllOf":null,"nullableRef":null}`))
	if len(got.Response) != 1 || got.Response[0].Code != "type" || !strings.Contains(got.Response[0].Message, "must be object") {
		t.Errorf("violation %+v, want the type rule of besideAllOf", got.Response)
	}
	// An int64 beyond JavaScript's exact integers is Prism's bound, kept apart.
	got, _ = v.Judge(ctx, exchange("PUT", "/things/1", valid, 200, `{"name":"a","besideAllOf":{"id":9223372036854775807},"nullableRef":null}`))
	if len(got.Response) != 0 || fields(got.BeyondJavaScript) != "response.body.besideAllOf.id" {
		t.Errorf("an int64 of 2^63-1: violations %v, beyond JavaScript %v; want it beyond JavaScript only", got.Response, got.BeyondJavaScript)
	}
}

// TestTheDocumentStatesNoJavaScriptIntegerBound: Prism's findings at ±(2^53−1) are kept
// apart as Prism's own bound on int64 only while the document states no such bound.
func TestTheDocumentStatesNoJavaScriptIntegerBound(t *testing.T) {
	if strings.Contains(string(api.YAML), "9007199254740991") {
		t.Fatal("api/openapi.yaml states 9007199254740991 (2^53-1) as a bound: a violation of it is then the document's, and Verdict.BeyondJavaScript must not take it")
	}
}

// TestPrismOnTheDocument runs one Prism on api/openapi.yaml for the checks below.
func TestPrismOnTheDocument(t *testing.T) {
	v := prism.Start(t, filepath.Join(devstack.RepoRoot(t), "api", "openapi.yaml"))
	t.Run("admits-the-nulls-of-the-document", func(t *testing.T) { admitsTheNullsOfTheDocument(t, v) })
	t.Run("judges-the-answers-of-every-operation", func(t *testing.T) { judgesTheAnswersOfEveryOperation(t, v) })
}

// admitsTheNullsOfTheDocument: api/openapi.yaml admits the nulls the services send where
// the contract says "or null" (a workbook without dashboards or owner), and still refuses
// a value of the wrong type there.
func admitsTheNullsOfTheDocument(t *testing.T, v *prism.Validator) {
	workbook := func(draft string) string {
		return `{"id":1,"deploymentId":1,"name":"w","type":"WORKBOOK","key":null,"version":1,"meta":{},"calculatedFields":{},` +
			`"createdAt":"2026-01-01T00:00:00.000Z","updatedAt":"2026-01-01T00:00:00.000Z","createdBy":1,"userId":null,"user":null,` +
			`"folderId":null,"folderPath":[],"slug":"w-1","isFavorite":null,"dashboardDraft":` + draft + `,"dashboardPublished":null,"publishedDashboard":null}`
	}
	ctx := context.Background()
	get := func(answer string) prism.Verdict {
		x := exchange("GET", "/api/v1/deployments/1/workbooks/1", "", 200, answer)
		x.Header = http.Header{"Authorization": {"Bearer x"}}
		got, err := v.Judge(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := get(workbook(`{"kind":null,"layout":null,"app":null}`)); len(got.Response) != 0 {
		t.Errorf("a workbook with its nulls: %v", got.Response)
	}
	if got := get(workbook(`"draft"`)); fields(got.Response) != "response.body.dashboardDraft" {
		t.Errorf("a string draft: %v, want the one violation at response.body.dashboardDraft", got.Response)
	}
}

// judgesTheAnswersOfEveryOperation: for every operation of api/openapi.yaml, an answer
// that is not what the document says is a violation. Prism judges nothing, silently, for
// an answer whose schema it cannot compile (an enum listing null did that), so a run of
// the e2e suite without violations would prove nothing there.
func judgesTheAnswersOfEveryOperation(t *testing.T, v *prism.Validator) {
	doc, err := openapi3.NewLoader().LoadFromData(api.YAML)
	if err != nil {
		t.Fatal(err)
	}
	judged, notJSON := 0, []string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			status, ok := jsonAnswer(op)
			if !ok {
				notJSON = append(notJSON, op.OperationID) // the HTML reference page
				continue
			}
			uri := path
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value.In == "path" {
					uri = strings.ReplaceAll(uri, "{"+p.Value.Name+"}", "1")
				}
			}
			x := exchange(method, uri, "", status, `12345`)
			x.Header = http.Header{"Authorization": {"Bearer x"}}
			got, err := v.Judge(context.Background(), x)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Response) == 0 {
				t.Errorf("%s %s (%s): a %d answer of 12345 is no violation to Prism: it does not judge this operation's answers", method, uri, op.OperationID, status)
			}
			judged++
		}
	}
	if len(notJSON) > 1 {
		t.Errorf("operations without a JSON answer, which this test does not judge: %v", notJSON)
	}
	t.Logf("Prism %s judged a wrong answer of each of %d operations (%v answer HTML)", prism.Version, judged, notJSON)
}

// jsonAnswer is the first status (in order) an operation answers with a JSON body.
func jsonAnswer(op *openapi3.Operation) (int, bool) {
	for _, code := range []int{200, 201, 202, 400, 401, 404} {
		r := op.Responses.Status(code)
		if r != nil && r.Value != nil && r.Value.Content.Get("application/json") != nil {
			return code, true
		}
	}
	return 0, false
}
