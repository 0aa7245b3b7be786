package natsx

import (
	"errors"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
)

// An error answer's status, code and message come back as the *errs.Error errs would
// have answered them from: a client error keeps its kind and code; a server's failure
// is unavailable to its caller; busy and timeout keep their reason. (Round trips over a
// real nats-server: devstack/natsrequest_test.go.)
func TestErrorAnswerArrivesAsErrsModel(t *testing.T) {
	cases := []struct {
		sent        wireError
		kind        errs.Kind
		code        string
		unavailable bool
		reason      error
	}{
		{wireError{Status: 404, Code: errs.CodeBranchNotFound, Message: "m"}, errs.NotFound, errs.CodeBranchNotFound, false, nil},
		{wireError{Status: 409, Code: errs.CodeConflict, Message: "m"}, errs.Conflict, errs.CodeConflict, false, nil},
		{wireError{Status: 429, Code: errs.CodeRateLimited, Message: "m"}, errs.Invalid, "", false, nil},
		{wireError{Status: 500, Code: errs.CodeInternal, Message: "m"}, errs.Unavailable, "", true, nil},
		{wireError{Status: 503, Code: errs.CodeNotApplied, Message: "m"}, errs.Unavailable, errs.CodeNotApplied, true, nil},
		{wireError{Status: 503, Code: errs.CodeUnavailable, Message: "m", Reason: reasonBusy}, errs.Unavailable, errs.CodeUnavailable, true, ErrBusy},
		{wireError{Status: 503, Code: errs.CodeUnavailable, Message: "m", Reason: reasonTimeout}, errs.Unavailable, errs.CodeUnavailable, true, ErrHandlerTimeout},
	}
	for _, c := range cases {
		msg := errorReply(c.sent)
		if msg.Header.Get(errorCodeHeader) == "" {
			t.Fatalf("%+v: the reply is not marked an error answer", c.sent)
		}
		err := remoteError("s", msg)
		e, ok := errs.As(err)
		if !ok || e.Kind != c.kind || e.Code != c.code || e.Message != "m" || errors.Is(err, errs.ErrUnavailable) != c.unavailable {
			t.Errorf("%+v arrived as %#v (unavailable %v); want kind %d, code %q, unavailable %v", c.sent, e, errors.Is(err, errs.ErrUnavailable), c.kind, c.code, c.unavailable)
		}
		if c.reason != nil && !errors.Is(err, c.reason) {
			t.Errorf("%+v: %v, want %v", c.sent, err, c.reason)
		}
	}
	msg := errorReply(wireError{Status: 200})
	if err := remoteError("s", msg); !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("an error answer of status 200: %v, want unreadable (unavailable)", err)
	}
}
