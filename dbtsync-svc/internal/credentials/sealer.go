// Package credentials seals the git credentials dbtsync-svc saves with an integration.
package credentials

import (
	"strconv"

	"github.com/analyticsco/platform/libs/sealbox"
)

// Sealer encrypts saved git credentials with AES-256-GCM under DBT_CREDENTIALS_KEY, a
// comma-separated key list whose first key seals (see libs/sealbox for rotation).
type Sealer struct{ box *sealbox.Box }

// NewSealer takes DBT_CREDENTIALS_KEY: base64 32-byte keys, comma-separated, the
// sealing key first.
func NewSealer(keys string) (*Sealer, error) {
	box, err := sealbox.Parse("DBT_CREDENTIALS_KEY", keys)
	if err != nil {
		return nil, err
	}
	return &Sealer{box: box}, nil
}

// The deployment id is authenticated data, so a sealed value copied to another
// deployment does not open.
func deploymentAD(deploymentID int64) []byte { return []byte(strconv.FormatInt(deploymentID, 10)) }

// Seal encrypts plain for deploymentID with the first key.
func (s *Sealer) Seal(plain []byte, deploymentID int64) []byte {
	return s.box.Seal(plain, deploymentAD(deploymentID))
}

// Open reverses Seal, with any listed key.
func (s *Sealer) Open(sealed []byte, deploymentID int64) ([]byte, error) {
	return s.box.Open(sealed, deploymentAD(deploymentID))
}

// Reseal returns sealed under the first key; changed is false when it already was.
func (s *Sealer) Reseal(sealed []byte, deploymentID int64) ([]byte, bool, error) {
	return s.box.Reseal(sealed, deploymentAD(deploymentID))
}
