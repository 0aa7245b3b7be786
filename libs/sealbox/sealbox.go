// Package sealbox encrypts small secrets at rest (saved git credentials, embed signing
// keys) with AES-256-GCM under a list of keys, so the key can be rotated without
// downtime: the first key seals, every key opens, and a sealed value names the key
// that sealed it.
//
// A key list is one setting: base64 32-byte keys separated by commas, the sealing key
// first ("NEW,OLD"). Each key's id is derived from the key itself (the first 8 bytes of
// its SHA-256 under a fixed label, in hex), so operators never name keys. Rotation:
//
//  1. append the new key ("OLD,NEW") and roll out: every replica can open both;
//  2. put it first ("NEW,OLD") and roll out: new values are sealed with it, and the
//     owning service re-seals what it stored under older keys when it starts;
//  3. once the service logs that nothing is left under the old key, remove it ("NEW").
//
// Sealed layout: 'S' 0x01 | key id (8 bytes) | nonce (12) | ciphertext+tag. Values
// sealed before key ids existed (nonce | ciphertext) still open: every key is tried.
package sealbox

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

const (
	idLen    = 8
	nonceLen = 12
)

var magic = []byte{'S', 0x01}

// ErrOpen is returned when no key opens a value (wrong key, other associated data,
// or tampering).
var ErrOpen = errors.New("sealbox: cannot decrypt with any configured key")

// MaxKeys bounds a key list: every key is tried on a legacy value.
const MaxKeys = 8

type key struct {
	id   [idLen]byte
	aead cipher.AEAD
}

// Box seals with its first key and opens with any.
type Box struct{ keys []key }

// Parse reads a key list from the setting named name (for error messages).
func Parse(name, list string) (*Box, error) {
	var b Box
	seen := map[[idLen]byte]bool{}
	for i, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(part)
		if err != nil {
			raw, err = base64.RawURLEncoding.DecodeString(part)
		}
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("%s: key %d must be 32 bytes in base64", name, i+1)
		}
		k, err := newKey(raw)
		if err != nil {
			return nil, err
		}
		if seen[k.id] {
			return nil, fmt.Errorf("%s: key %d is listed twice", name, i+1)
		}
		seen[k.id] = true
		b.keys = append(b.keys, k)
	}
	switch {
	case len(b.keys) == 0:
		return nil, fmt.Errorf("%s: no key (base64 32-byte keys, comma-separated, the sealing key first)", name)
	case len(b.keys) > MaxKeys:
		return nil, fmt.Errorf("%s: %d keys, at most %d", name, len(b.keys), MaxKeys)
	}
	return &b, nil
}

func newKey(raw []byte) (key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	sum := sha256.Sum256(append([]byte("sealbox key id\x00"), raw...))
	var k key
	copy(k.id[:], sum[:idLen])
	k.aead = aead
	return k, nil
}

// PrimaryID is the id of the sealing key, in hex (for logs and metrics).
func (b *Box) PrimaryID() string { return hex.EncodeToString(b.keys[0].id[:]) }

// Seal encrypts plain with the first key; ad is authenticated, not stored.
func (b *Box) Seal(plain, ad []byte) []byte {
	k := b.keys[0]
	out := make([]byte, 0, len(magic)+idLen+nonceLen+len(plain)+k.aead.Overhead())
	out = append(append(out, magic...), k.id[:]...)
	nonce := make([]byte, nonceLen)
	_, _ = rand.Read(nonce)
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plain, ad)
}

// Open decrypts a value sealed by Seal (or by the headerless legacy layout) with ad.
func (b *Box) Open(sealed, ad []byte) ([]byte, error) {
	plain, _, err := b.open(sealed, ad)
	return plain, err
}

// Current reports whether sealed opens with ad and was sealed with the first key;
// a value that opens but is not current should be re-sealed (Reseal).
func (b *Box) Current(sealed, ad []byte) (bool, error) {
	_, i, err := b.open(sealed, ad)
	return err == nil && i == 0, err
}

// Reseal opens sealed and seals it again with the first key. changed is false when it
// already was sealed with the first key (out is then sealed itself).
func (b *Box) Reseal(sealed, ad []byte) (out []byte, changed bool, err error) {
	plain, i, err := b.open(sealed, ad)
	if err != nil {
		return nil, false, err
	}
	if i == 0 {
		return sealed, false, nil
	}
	return b.Seal(plain, ad), true, nil
}

// open returns the plaintext and the index of the key that opened it.
func (b *Box) open(sealed, ad []byte) ([]byte, int, error) {
	if len(sealed) >= len(magic)+idLen+nonceLen && bytes.HasPrefix(sealed, magic) {
		id := sealed[len(magic) : len(magic)+idLen]
		body := sealed[len(magic)+idLen:]
		for i, k := range b.keys {
			if bytes.Equal(k.id[:], id) {
				if plain, err := k.aead.Open(nil, body[:nonceLen], body[nonceLen:], ad); err == nil {
					return plain, i, nil
				}
				break // the named key does not open it; a legacy value may still start with the magic bytes
			}
		}
	}
	// Legacy layout: nonce | ciphertext, under an unnamed key.
	if len(sealed) >= nonceLen {
		for i, k := range b.keys {
			if plain, err := k.aead.Open(nil, sealed[:nonceLen], sealed[nonceLen:], ad); err == nil {
				return plain, i + len(b.keys), nil // never "current": re-seal it with a key id
			}
		}
	}
	return nil, -1, ErrOpen
}
