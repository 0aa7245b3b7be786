package platform

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/analyticsco/platform/libs/identity"
)

// Keys are the platform's secrets and signing keys, created once in Dir and reused, so
// tokens and encrypted credentials survive a restart (make run keeps them under
// $DATA_DIR/keys; a test's stack in its temp dir).
type Keys struct {
	Dir                string
	IdentitySigningKey string // base64 of 32 bytes; IDENTITY_SIGNING_KEY
	IdentityKeyFile    string
	DBTCredentialsKey  string // base64 of 32 bytes; DBT_CREDENTIALS_KEY
	EmbedKeyEncryption string // base64 of 32 bytes; EMBED_KEY_ENCRYPTION_KEY
	JWTPrivateKeyFile  string // PKCS#8 PEM Ed25519
	JWTPublicKeyFile   string // PKIX PEM
	// OAuthSigningKeyFile is the gateway's own key for service accounts' access tokens
	// (PKCS#8 PEM Ed25519; OAUTH_SIGNING_KEY_FILE).
	OAuthSigningKeyFile string
}

// EnsureKeys reads the keys in dir, creating the missing ones.
func EnsureKeys(dir string) (Keys, error) {
	k := Keys{
		Dir:               dir,
		IdentityKeyFile:   filepath.Join(dir, "identity.key"),
		JWTPrivateKeyFile: filepath.Join(dir, "bearer-ed25519.pem"),
		JWTPublicKeyFile:  filepath.Join(dir, "bearer-ed25519.pub.pem"),

		OAuthSigningKeyFile: filepath.Join(dir, "oauth-ed25519.pem"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return k, fmt.Errorf("keys dir: %w", err)
	}
	var err error
	if k.IdentitySigningKey, err = ensureSecret(k.IdentityKeyFile); err != nil {
		return k, err
	}
	if k.DBTCredentialsKey, err = ensureSecret(filepath.Join(dir, "dbt-secrets.key")); err != nil {
		return k, err
	}
	if k.EmbedKeyEncryption, err = ensureSecret(filepath.Join(dir, "embed-keys.key")); err != nil {
		return k, err
	}
	if err := ensureEd25519(k.JWTPrivateKeyFile, k.JWTPublicKeyFile); err != nil {
		return k, err
	}
	if err := ensureEd25519(k.OAuthSigningKeyFile, filepath.Join(dir, "oauth-ed25519.pub.pem")); err != nil {
		return k, err
	}
	return k, nil
}

// NewSecret returns 32 random bytes in standard base64: the form of every secret of the
// platform (IDENTITY_SIGNING_KEY, DBT_CREDENTIALS_KEY, EMBED_KEY_ENCRYPTION_KEY).
func NewSecret() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (Go 1.24)
	return base64.StdEncoding.EncodeToString(raw[:])
}

// IdentityKey is the IDENTITY_SIGNING_KEY of p: the gateway holds the key; each service
// only its own key derived from it (it verifies what is sent to it and can sign for no
// other service); the dbt worker, which runs untrusted repositories and serves no API,
// none ("").
func (k Keys) IdentityKey(p Proc) (string, error) {
	switch {
	case p.Binary == Gateway.Name:
		return k.IdentitySigningKey, nil
	case p.DBTWorker():
		return "", nil
	case p.Binary == WorkspaceSvc.Name, p.Binary == EmbedSvc.Name, p.Binary == DBTSyncSvc.Name:
		sk, err := identity.ServiceKey(k.IdentitySigningKey, p.Binary)
		if err != nil {
			return "", fmt.Errorf("%s: %w", k.IdentityKeyFile, err)
		}
		return sk, nil
	}
	return "", nil
}

// Secrets are the values of every secret in k (the identity key first, the dbt and embed
// keys, then the services' own identity keys), for tests that check none reaches a log.
func (k Keys) Secrets() []string {
	out := []string{k.IdentitySigningKey, k.DBTCredentialsKey, k.EmbedKeyEncryption}
	for _, b := range []Binary{WorkspaceSvc, EmbedSvc, DBTSyncSvc} {
		if sk, err := k.IdentityKey(Proc{Binary: b.Name}); err == nil {
			out = append(out, sk)
		}
	}
	return out
}

// ensureSecret returns the base64 (std) 32-byte secret in path, creating it.
func ensureSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) != 32 {
			return "", fmt.Errorf("%s: want 32 bytes in standard base64; delete it to regenerate", path)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	s := NewSecret()
	if err := writeFileExclusive(path, []byte(s+"\n")); err != nil {
		return "", err
	}
	return s, nil
}

func ensureEd25519(privPath, pubPath string) error {
	privPEM, err := os.ReadFile(privPath)
	if err == nil {
		block, _ := pem.Decode(privPEM)
		if block == nil {
			return fmt.Errorf("%s: no PEM block; delete it to regenerate", privPath)
		}
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return fmt.Errorf("%s: %w", privPath, err)
		}
		priv, ok := key.(ed25519.PrivateKey)
		if !ok {
			return fmt.Errorf("%s: not an Ed25519 key", privPath)
		}
		// The public half is derived, so rewrite it if it went missing.
		if _, err := os.Stat(pubPath); errors.Is(err, fs.ErrNotExist) {
			return writePublic(pubPath, priv.Public().(ed25519.PublicKey))
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	if err := writeFileExclusive(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return err
	}
	_ = os.Remove(pubPath) // a stale public key would not match the new private key
	return writePublic(pubPath, pub)
}

func writePublic(path string, pub ed25519.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	return writeFileExclusive(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// writeFileExclusive creates path with mode 0600, failing if it exists, so
// two runners racing on one DATA_DIR cannot end up with different keys.
func writeFileExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
