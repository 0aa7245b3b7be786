package embedauth_test

import (
	"testing"

	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/gateway/internal/store"
)

// TestStorePlansEmbedAsTheContractSays: the plan names the identity store keeps are the
// ones embed-svc's one eligibility rule (token.PlanAllowsEmbedding) knows.
func TestStorePlansEmbedAsTheContractSays(t *testing.T) {
	for plan, want := range map[string]bool{store.PlanFree: false, store.PlanPremium: true, store.PlanEnterprise: true} {
		if got := token.PlanAllowsEmbedding(plan); got != want {
			t.Errorf("plan %q embeds: %v, want %v", plan, got, want)
		}
	}
}
