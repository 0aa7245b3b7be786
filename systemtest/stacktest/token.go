package stacktest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"strconv"
	"time"

	"github.com/analyticsco/platform/devstack/platform"
)

// Token issues a bearer token for userID signed with the stack's key, valid for ttl
// (a negative ttl gives an already expired token).
func (s *Stack) Token(userID int64, ttl time.Duration) string {
	s.t.Helper()
	raw, err := os.ReadFile(s.layout.Keys.JWTPrivateKeyFile)
	if err != nil {
		s.t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		s.t.Fatal(err)
	}
	return SignToken(k.(ed25519.PrivateKey), userID, ttl)
}

// SignToken signs a user bearer token with key (the stack's or a foreign one), with the
// issuer and audience the stack's gateway expects and the key id it derives.
func SignToken(key ed25519.PrivateKey, userID int64, ttl time.Duration) string {
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	sum := sha256.Sum256(der)
	var jti [8]byte
	_, _ = rand.Read(jti[:])
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": base64.RawURLEncoding.EncodeToString(sum[:12])})
	claims, _ := json.Marshal(map[string]any{"iss": platform.JWTIssuer, "aud": []string{platform.JWTAudience},
		"sub": strconv.FormatInt(userID, 10), "iat": now.Unix(), "nbf": now.Add(-2 * time.Hour).Unix(),
		"exp": now.Add(ttl).Unix(), "jti": hex.EncodeToString(jti[:])})
	signing := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	return signing + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(signing)))
}

// Secrets returns the stack's own secrets (identity HMAC key first, dbt credentials key,
// embed key-encryption key, then the services' own identity keys), for tests that check
// nothing secret reaches a log.
func (s *Stack) Secrets() []string { return s.layout.Keys.Secrets() }
