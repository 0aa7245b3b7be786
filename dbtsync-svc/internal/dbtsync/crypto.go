package dbtsync

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Sealer encrypts saved git credentials with AES-256-GCM.
type Sealer struct{ aead cipher.AEAD }

// NewSealer takes the base64 32-byte key of DBT_CREDENTIALS_KEY.
func NewSealer(base64Key string) (*Sealer, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(base64Key))
	if err != nil {
		return nil, fmt.Errorf("DBT_CREDENTIALS_KEY is not base64")
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("DBT_CREDENTIALS_KEY must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal returns nonce || ciphertext; the deployment id is authenticated data, so a sealed
// value copied to another deployment does not open.
func (s *Sealer) Seal(plain []byte, deploymentID int64) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, []byte(fmt.Sprint(deploymentID)))
}

// Open reverses Seal.
func (s *Sealer) Open(sealed []byte, deploymentID int64) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed credentials too short")
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], []byte(fmt.Sprint(deploymentID)))
}
