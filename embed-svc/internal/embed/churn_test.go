package embed_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// definitionsRequest is a creator-mode mint defining n attributes a0..a(n-1) with
// description desc.
func (f *fixture) definitionsRequest(n int, desc string) embed.GenerateSessionRequest {
	req := f.external("churner")
	req.CreatorMode, req.EmbedTenantName = ptr(true), ptr("cm-tenant")
	for i := range n {
		req.UserAttributeDefinitions = append(req.UserAttributeDefinitions, embed.DefinitionInput{Name: fmt.Sprintf("a%d", i), Type: embed.TypeString, Description: ptr(desc)})
	}
	return req
}

// TestDefinitionChurnPerRequestIsCapped: one generate-session creates or changes at most
// EMBED_MAX_DEFINITION_CHANGES definitions; past it the mint is 400 naming the limit and
// writes nothing, the dry run answers the same, and definitions that do not change do not
// count (so a client sending its whole catalog each time is not refused).
func TestDefinitionChurnPerRequestIsCapped(t *testing.T) {
	const limit = 10
	ctx := context.Background()
	f := newFixture(t).withLimits(embed.Limits{DefinitionChanges: limit})
	_, err := f.svc.GenerateSession(ctx, f.adminKey(), f.definitionsRequest(limit+1, "a"))
	status, code, msg := answer(err)
	if status != 400 || code != "invalid_request" || !strings.Contains(msg, "over the limit of 10 per request") || !strings.Contains(msg, "11 definitions") || strings.Contains(msg, "EMBED_") {
		t.Fatalf("%d new definitions: %d %s %q", limit+1, status, code, msg)
	}
	if _, dryErr := f.svc.DryRunSession(ctx, f.adminKey(), f.definitionsRequest(limit+1, "a")); dryErr == nil || dryErr.Error() != err.Error() {
		t.Fatalf("the dry run answers %v", dryErr)
	}
	f.nothingWritten(t)
	f.mint(t, f.adminKey(), f.definitionsRequest(limit, "a"))
	// The same catalog again changes nothing; alternating descriptions change all of it.
	f.mint(t, f.adminKey(), f.definitionsRequest(limit, "a"))
	f.mint(t, f.adminKey(), f.definitionsRequest(limit, "b"))
	// 10 known ones unchanged and one new: one change.
	f.mint(t, f.adminKey(), f.definitionsRequest(limit+1, "b"))
	_, err = f.svc.GenerateSession(ctx, f.adminKey(), f.definitionsRequest(limit+2, "c"))
	if status, _, msg := answer(err); status != 400 || !strings.Contains(msg, "12 definitions") {
		t.Fatalf("changing 11 and creating 1: %d %q", status, msg)
	}
	if n, _ := f.store.CountDefinitions(ctx, accountID, "cm-tenant", 100); n != limit+1 {
		t.Fatalf("%d definitions stored, want %d", n, limit+1)
	}
}
