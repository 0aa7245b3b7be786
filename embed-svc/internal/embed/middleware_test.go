package embed_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// TestLoggingMiddleware: a change of state is logged once done, with who and where, and
// never with the session id (a credential); a refused call is not logged here.
func TestLoggingMiddleware(t *testing.T) {
	f := newFixture(t)
	var buf bytes.Buffer
	svc := embed.LoggingMiddleware(slog.New(slog.NewJSONHandler(&buf, nil)))(f.svc)
	ctx := context.Background()
	id, err := svc.GenerateSession(ctx, f.adminKey(), f.external("u"))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.RevokeSession(ctx, f.adminKey(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GenerateSession(ctx, f.adminKey(), embed.GenerateSessionRequest{DeploymentID: ptr(f.otherDep), ExternalID: ptr("u")}); err == nil {
		t.Fatal("another account's deployment was minted for")
	}
	logs := buf.String()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"msg":"embed session minted"`) || !strings.Contains(lines[0], `"accountId":41`) ||
		!strings.Contains(lines[1], `"msg":"embed session revoke accepted"`) {
		t.Fatalf("logs:\n%s", logs)
	}
	if strings.Contains(logs, id) || strings.Contains(logs, embed.PublicSessionHandle(id)) {
		t.Fatalf("the session id is in the logs:\n%s", logs)
	}
}
