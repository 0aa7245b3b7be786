package stacktest

import "github.com/analyticsco/platform/devstack"

// The contract of `platformctl seed --json`, defined once in devstack.
type (
	// Seed is the whole output.
	Seed = devstack.Seed
	// Account is one seeded account.
	Account = devstack.SeedAccount
	// Deployment is a seeded deployment.
	Deployment = devstack.SeedDeployment
	// User is a seeded user with a bearer token.
	User = devstack.SeedUser
)
