// Package credentials makes and parses the platform's credentials: API keys and the
// bearer JWTs that platformctl issues for local use and tests.
package credentials

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// API keys look like "pk_<16 hex key id>_<43 base64url secret chars>". The key id is
// public (it is how the key is found); the 256-bit secret is only ever stored as its
// SHA-256 hash. A slow hash is not needed for a random secret of that size.
const keyPrefix = "pk_"

// NewAPIKey returns a fresh key id, the full key to show once, and the secret's hash.
func NewAPIKey() (keyID, key string, secretHash []byte) {
	var id [8]byte
	var secret [32]byte
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(secret[:])
	keyID = hex.EncodeToString(id[:])
	s := base64.RawURLEncoding.EncodeToString(secret[:])
	h := sha256.Sum256([]byte(s))
	return keyID, keyPrefix + keyID + "_" + s, h[:]
}

// NewAPIKeySecret returns a new full key for an existing key id (a rotation) and its
// secret's hash.
func NewAPIKeySecret(keyID string) (key string, secretHash []byte, err error) {
	if len(keyID) != 16 {
		return "", nil, errors.New("credentials: a key id is 16 hex characters")
	}
	var secret [32]byte
	_, _ = rand.Read(secret[:])
	s := base64.RawURLEncoding.EncodeToString(secret[:])
	h := sha256.Sum256([]byte(s))
	return keyPrefix + keyID + "_" + s, h[:], nil
}

// ParseAPIKey splits a key into its id and the hash of its secret.
func ParseAPIKey(key string) (keyID string, secretHash [32]byte, ok bool) {
	rest, found := strings.CutPrefix(key, keyPrefix)
	if !found || len(rest) != 16+1+43 || rest[16] != '_' {
		return "", secretHash, false
	}
	keyID = rest[:16]
	for _, c := range keyID {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", secretHash, false
		}
	}
	var secret [43]byte // on the stack: hashing the secret costs no allocation
	copy(secret[:], rest[17:])
	return keyID, sha256.Sum256(secret[:]), true
}

// Claims are the claims of a bearer token. Scope and ClientID are those of a service
// account's access token, which the gateway itself signs (RFC 9068's scope and
// client_id): scope is its deployment ids, space-separated.
type Claims struct {
	jwt.RegisteredClaims
	Scope    string `json:"scope,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}

// DeploymentScope reads the deployment ids of a service account token's scope (nil:
// every deployment of the account).
func (c Claims) DeploymentScope() ([]int64, error) {
	var out []int64
	for _, f := range strings.Fields(c.Scope) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil || id <= 0 {
			return nil, errors.New("scope is not a list of deployment ids")
		}
		out = append(out, id)
	}
	return out, nil
}

// UserID returns the subject as a user id.
func (c Claims) UserID() (int64, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 {
		return 0, errors.New("sub is not a user id")
	}
	return id, nil
}

// Issuer signs bearer tokens with an Ed25519 private key.
type Issuer struct {
	Key      ed25519.PrivateKey
	KeyID    string
	Issuer   string
	Audience string
}

// Issue returns a token for userID valid for ttl.
func (is Issuer) Issue(userID int64, ttl time.Duration) (string, time.Time, error) {
	now := time.Now()
	exp := now.Add(ttl)
	var jti [12]byte
	_, _ = rand.Read(jti[:])
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, Claims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer:    is.Issuer,
		Subject:   strconv.FormatInt(userID, 10),
		Audience:  jwt.ClaimStrings{is.Audience},
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(exp),
		ID:        hex.EncodeToString(jti[:]),
	}})
	if is.KeyID != "" {
		tok.Header["kid"] = is.KeyID
	}
	s, err := tok.SignedString(is.Key)
	return s, exp, err
}

// KeyID derives a stable key id from a public key (its SHA-256, shortened).
func KeyID(pub crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

// LoadEd25519PrivateKey reads a PKCS#8 PEM Ed25519 private key.
func LoadEd25519PrivateKey(path string) (ed25519.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return priv, nil
}

// LoadPublicKeys reads every PKIX public key (Ed25519 or RSA) in a PEM file.
func LoadPublicKeys(path string) ([]crypto.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePublicKeys(raw)
}

// ParsePublicKeys parses every PKIX public key (Ed25519 or RSA) in PEM data.
func ParsePublicKeys(raw []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, raw = pem.Decode(raw)
		if block == nil {
			break
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no public key in PEM data")
	}
	return keys, nil
}
