package platform

import (
	"encoding/json"
	"os"
)

// StackFile is $DATA_DIR/stack.json: what `make run` writes once every process is ready
// (and removes when it stops), and platformctl, the bench and the developer read to find
// the running stack.
type StackFile struct {
	Gateway    string `json:"gateway"`
	MongoDBURI string `json:"mongodbUri"`
	NATSURL    string `json:"natsUrl"`
	RedisURL   string `json:"redisUrl"`
	// PostgresURL is the PostgreSQL database under the embedded FerretDB (engine
	// postgresql), for looking at what the engine does (psql, pg_stat_statements).
	PostgresURL            string `json:"postgresUrl,omitempty"`
	JWTPrivateKeyFile      string `json:"jwtPrivateKeyFile"`
	JWTIssuer              string `json:"jwtIssuer"`
	JWTAudience            string `json:"jwtAudience"`
	IdentitySigningKeyFile string `json:"identitySigningKeyFile"`
	// PIDs are the stack's processes by name (the table's, redis, postgres, prometheus).
	PIDs map[string]int `json:"pids"`
	// Metrics are the processes' metrics URLs (on their internal listeners), by name.
	Metrics map[string]string `json:"metrics"`
	// Prometheus is the local Prometheus's URL with OBS=1, empty otherwise.
	Prometheus string `json:"prometheus,omitempty"`
}

// WriteStackFile writes sf to path via a rename, so readers never see half a file.
func WriteStackFile(path string, sf StackFile) error {
	b, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadStackFile reads a stack.json.
func ReadStackFile(path string) (StackFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return StackFile{}, err
	}
	var sf StackFile
	err = json.Unmarshal(raw, &sf)
	return sf, err
}
