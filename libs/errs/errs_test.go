package errs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
)

// TestWriteAnswersEveryKindOfError: each kind (built with its shorthand) is answered
// with its status and code, a 401 with its challenge, a 503 with Retry-After.
func TestWriteAnswersEveryKindOfError(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter bool
		challenge  bool
	}{
		{"invalid", errs.Invalidf("%s is required", "name"), 400, "invalid_request", false, false},
		{"named-rule", errs.Invalidf("too deep").WithCode(errs.CodeDepthLimit), 400, "depth_limit", false, false},
		{"unauthorized", errs.Unauthorizedf("session ended"), 401, "unauthenticated", false, true},
		{"forbidden", fmt.Errorf("wrapped: %w", errs.Forbiddenf("admins only")), 403, "forbidden", false, false},
		{"not-found", errs.NotFoundf("folder %d not found", 1), 404, "not_found", false, false},
		{"conflict", errs.Conflictf("not empty"), 409, "conflict", false, false},
		{"too-large", errs.TooLargef("too big"), 413, "too_large", false, false},
		{"unavailable-kind", errs.Unavailablef("busy"), 503, "unavailable", true, false},
		{"unavailable-sentinel", errors.Join(errs.ErrUnavailable, errors.New("dial tcp: refused")), 503, "unavailable", true, false},
		{"deadline", context.DeadlineExceeded, 503, "unavailable", true, false},
		{"status", errs.Statusf(415, "Content-Type must be application/json"), 415, "unsupported_media_type", false, false},
		{"status-and-header", errs.Statusf(429, "slow down").WithCode(errs.CodeJobLimit).WithHeader("Retry-After", "7"), 429, "job_limit", true, false},
		{"bug", errors.New("nil map"), 500, "internal", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			errs.Write(context.Background(), w, slog.New(slog.NewJSONHandler(io.Discard, nil)), c.err)
			var body errs.Body
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if w.Code != c.status || body.Status != c.status || body.Code != c.code || body.Message == "" {
				t.Fatalf("%d %+v, want %d %s", w.Code, body, c.status, c.code)
			}
			if got := w.Header().Get("Retry-After") != ""; got != c.retryAfter {
				t.Errorf("Retry-After set: %v, want %v", got, c.retryAfter)
			}
			if got := w.Header().Get("WWW-Authenticate") != ""; got != c.challenge {
				t.Errorf("WWW-Authenticate set: %v, want %v", got, c.challenge)
			}
			if c.status == 500 && body.Message == c.err.Error() {
				t.Errorf("a 500 shows the error: %s", body.Message)
			}
		})
	}
}

// TestWriteLogsADependencysFailureEvenWhenTheDomainNamedIt: a 503 caused by a dependency
// (ErrUnavailable in the chain) is logged with its cause, whether the domain gave the
// client its own words for it or not; a 503 the domain decided alone is not logged.
func TestWriteLogsADependencysFailureEvenWhenTheDomainNamedIt(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.7:4222: connection refused")
	for _, c := range []struct {
		name   string
		err    error
		logged bool
	}{
		{"raw", errors.Join(errs.ErrUnavailable, cause), true},
		{"named-by-the-domain", errors.Join(errs.Unavailablef("the job queue is unavailable; retry shortly"), errs.ErrUnavailable, cause), true},
		{"decided-by-the-domain", errs.Unavailablef("the tree kept changing; retry"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log strings.Builder
			w := httptest.NewRecorder()
			errs.Write(context.Background(), w, slog.New(slog.NewJSONHandler(&log, nil)), c.err)
			if w.Code != 503 {
				t.Fatalf("status %d, want 503", w.Code)
			}
			if got := strings.Contains(log.String(), "connection refused"); got != c.logged {
				t.Errorf("cause logged: %v, want %v (log %q)", got, c.logged, log.String())
			}
			if strings.Contains(w.Body.String(), "10.0.0.7") {
				t.Errorf("the answer shows the cause: %s", w.Body)
			}
		})
	}
}

// KindOf inverts Status for every kind, and sorts the statuses no kind has by class.
func TestKindOfInvertsStatus(t *testing.T) {
	for k := errs.Invalid; k <= errs.Unavailable; k++ {
		if got := errs.KindOf(errs.Status(k)); got != k {
			t.Errorf("errs.KindOf(Status(%d) = %d) = %d", k, errs.Status(k), got)
		}
	}
	for status, want := range map[int]errs.Kind{429: errs.Invalid, 405: errs.Invalid, 500: errs.Unavailable, 502: errs.Unavailable} {
		if got := errs.KindOf(status); got != want {
			t.Errorf("errs.KindOf(%d) = %d, want %d", status, got, want)
		}
	}
}
