// Package attack holds the attack suite of the platform: each threat to a tenant's
// isolation or to what tenants share is a named test that attacks the real stack
// (stacktest) through the gateway, as a hostile client, repository or manifest would,
// and checks that the part stays up, bounded and closed. Tests are grouped by the part
// they attack: gateway_*, nats_*, dbt_*, embed_*, workspace_* and neighbour_*_test.go.
// The package has no code of its own; everything is in its tests.
package attack
