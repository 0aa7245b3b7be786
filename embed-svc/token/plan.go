package token

// PlanAllowsEmbedding is the one rule of which plans may embed: premium and enterprise.
// embed-svc applies it when a session is minted (403 plan_not_eligible), and the
// gateway's verifier on every embed-token request, so a live session's tokens end when
// its account leaves those plans.
func PlanAllowsEmbedding(plan string) bool { return plan == "premium" || plan == "enterprise" }
