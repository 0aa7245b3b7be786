// Package attack holds the attack suite of the platform: every finding of the security
// review (../shared/reviews/security.md) is a named test that attacks the real stack
// (stacktest) through the gateway, as a hostile client, repository or manifest would,
// and checks that the part stays up, bounded and closed. Tests are grouped by the part
// they attack: gateway_test.go, dbt_test.go, embed_test.go, workspace_test.go.
// The package has no code of its own; everything is in its tests.
package attack
