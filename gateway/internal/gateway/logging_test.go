package gateway_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/analyticsco/platform/gateway/internal/gateway"
	"github.com/analyticsco/platform/libs/logging"
)

// One request with a 30 KB method and a 30 KB path buys a log line of bounded size: the
// method as its metric label, the path cut.
func TestGatewayRequestLogBoundsMethodAndPath(t *testing.T) {
	var logs bytes.Buffer
	h := newHarness(t, func(o *gateway.Options) { o.Logger = logging.New(&logs, "info", "gateway") })
	code, _, _ := h.do(strings.Repeat("M", 30_000), "/"+strings.Repeat("p", 30_000), "", nil)
	if code != 404 {
		t.Fatalf("unknown route: %d", code)
	}
	if logs.Len() > 2048 {
		t.Fatalf("the request wrote %d bytes of log", logs.Len())
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line["method"] != "OTHER" || len(line["path"].(string)) > logging.MaxPathBytes+3 {
		t.Fatalf("logged method %.40v path %.300v", line["method"], line["path"])
	}
}
