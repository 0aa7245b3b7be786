package stacktest

// Seed is the contract of `platformctl seed --json`.
type Seed struct {
	Gateway  string             `json:"gateway"`
	Accounts map[string]Account `json:"accounts"`
}

// Account is one seeded account.
type Account struct {
	ID                 int64             `json:"id"`
	Plan               string            `json:"plan"`
	EmbeddingEnabled   bool              `json:"embeddingEnabled"`
	UseCreatorMode     bool              `json:"useCreatorMode"`
	DefaultEmbedTenant string            `json:"defaultEmbedTenant"`
	Deployments        []Deployment      `json:"deployments"`
	Users              map[string]User   `json:"users"`
	APIKeys            map[string]string `json:"apiKeys"`
}

// Deployment is a seeded deployment.
type Deployment struct {
	ID               int64  `json:"id"`
	ProductionBranch string `json:"productionBranch"`
}

// User is a seeded user with a bearer token.
type User struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Email    string `json:"email"`
	Role     string `json:"role"`
	Bearer   string `json:"bearer"`
}
