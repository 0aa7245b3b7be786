package httpx_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

type body struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Items []struct {
		ID int64 `json:"id"`
	} `json:"items"`
}

func TestDecodeJSON(t *testing.T) {
	cases := []struct {
		name, ct, body string
		status         int
		msg            string
	}{
		{"ok", "application/json", `{"name":"a","count":2}`, 0, ""},
		{"ok-charset", "application/json; charset=utf-8", `{"name":"a"}`, 0, ""},
		{"415-no-content-type", "", `{}`, 415, "Content-Type"},
		{"415-text", "text/plain", `{}`, 415, "Content-Type"},
		{"400-empty", "application/json", ``, 400, "empty"},
		{"400-malformed", "application/json", `{"name":`, 400, "malformed"},
		{"400-unknown-field", "application/json", `{"nope":1}`, 400, `unknown field "nope"`},
		{"400-wrong-type", "application/json", `{"count":"x"}`, 400, `field "count" must be an integer`},
		{"400-nested-wrong-type", "application/json", `{"items":[{"id":1.5}]}`, 400, `field "items.id" must be an integer`},
		{"400-not-an-object", "application/json", `[1]`, 400, "must be an object"},
		{"400-trailing", "application/json", `{"name":"a"} {"name":"b"}`, 400, "single JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
			if c.ct != "" {
				req.Header.Set("Content-Type", c.ct)
			}
			var b body
			err := httpx.DecodeJSON(req, &b)
			if c.status == 0 {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			e, ok := err.(*errs.Error)
			if !ok || e.StatusCode() != c.status || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %v, want %d containing %q", err, c.status, c.msg)
			}
		})
	}
}

func TestDecodeJSONTooLarge(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/", strings.NewReader(`{"name":"`+strings.Repeat("x", 100)+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Body = http.MaxBytesReader(rec, req.Body, 10)
	var b body
	err := httpx.DecodeJSON(req, &b)
	if e, ok := err.(*errs.Error); !ok || e.StatusCode() != 413 {
		t.Fatalf("got %v, want 413", err)
	}
}

func TestInternalHidesTheError(t *testing.T) {
	rec := httptest.NewRecorder()
	httpx.Internal(rec, httptest.NewRequest("GET", "/", nil), discardLogger(), errSecret{})
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "s3cr3t") || !strings.Contains(rec.Body.String(), "internal error") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

type errSecret struct{}

func (errSecret) Error() string { return "db password s3cr3t" }

// Every code DefaultCode gives and every status Codes lists agree: a code is sent only
// with its statuses.
func TestCodesMatchTheirStatuses(t *testing.T) {
	for status := 400; status < 600; status++ {
		code := errs.DefaultCode(status)
		statuses, ok := errs.Codes[code]
		if !ok {
			t.Fatalf("status %d: default code %q is not in Codes", status, code)
		}
		found := false
		for _, s := range statuses {
			found = found || s == status
		}
		if !found && statuses != nil && http.StatusText(status) != "" {
			t.Errorf("status %d: default code %q, whose statuses are %v", status, code, statuses)
		}
	}
	rec := httptest.NewRecorder()
	httpx.WriteCodedError(rec, 403, errs.CodeExternalUserLimit, "limit")
	if rec.Body.String() != "{\"status\":403,\"code\":\"external_user_limit\",\"message\":\"limit\"}\n" {
		t.Fatalf("coded error body %q", rec.Body)
	}
}

func TestTimeIsMillisecondsUTC(t *testing.T) {
	at := time.Date(2026, 11, 25, 4, 30, 0, 120_456_789, time.FixedZone("x", 3600))
	raw, err := json.Marshal(struct {
		A httpx.Time  `json:"a"`
		B *httpx.Time `json:"b"`
		C *httpx.Time `json:"c"`
	}{A: httpx.At(at), B: httpx.AtPtr(&at)})
	if err != nil || string(raw) != `{"a":"2026-11-25T03:30:00.120Z","b":"2026-11-25T03:30:00.120Z","c":null}` {
		t.Fatalf("%s %v", raw, err)
	}
	var back httpx.Time
	if err := json.Unmarshal([]byte(`"2026-11-25T03:30:00.123456Z"`), &back); err != nil || back.Nanosecond() != 123_456_000 {
		t.Fatalf("%v %v", back, err)
	}
}

// TestEncodeResponseAnswersNoContent204AndTheRestAsJSON: NoContent is a 204 with no body
// and no content type; any other response is 200 JSON, with "<" and "&" as they are.
func TestEncodeResponseAnswersNoContent204AndTheRestAsJSON(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := httpx.EncodeResponse(t.Context(), rec, httpx.NoContent{}); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 204 || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Fatalf("NoContent: %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = httptest.NewRecorder()
	if err := httpx.EncodeResponse(t.Context(), rec, body{Name: "<a&b>", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"<a&b>","count":2,"items":null}` + "\n"; rec.Code != 200 || rec.Body.String() != want ||
		rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("a body: %d %q %q, want 200 %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
	}
}
