package devstack

// Seed is the output of `platformctl seed --json`: the demo accounts and fresh
// credentials. One definition for every reader of it: the services' black-box tests
// (gatewaytest), the platform-wide suites (systemtest/stacktest), make bench and the
// local stack's own tests.
type Seed struct {
	Gateway  string                 `json:"gateway"`
	Accounts map[string]SeedAccount `json:"accounts"`
}

// SeedAccount is one seeded account.
type SeedAccount struct {
	ID                 int64               `json:"id"`
	Plan               string              `json:"plan"`
	EmbeddingEnabled   bool                `json:"embeddingEnabled"`
	UseCreatorMode     bool                `json:"useCreatorMode"`
	DefaultEmbedTenant string              `json:"defaultEmbedTenant"`
	Deployments        []SeedDeployment    `json:"deployments"`
	Users              map[string]SeedUser `json:"users"`
	APIKeys            map[string]string   `json:"apiKeys"`
}

// SeedDeployment is a seeded deployment.
type SeedDeployment struct {
	ID               int64  `json:"id"`
	ProductionBranch string `json:"productionBranch"`
}

// SeedUser is a seeded user with a bearer token (valid 24 h).
type SeedUser struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Email    string `json:"email"`
	Role     string `json:"role"`
	Bearer   string `json:"bearer"`
}
