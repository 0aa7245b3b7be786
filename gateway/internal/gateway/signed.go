package gateway

import (
	"crypto/sha256"
	"strconv"
	"strings"
	"time"

	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/libs/identity"
)

// signedIdentities reuses the signed identity header of a credential while what it says
// is unchanged. Authorization still runs on every request (expiry, revocation, scope,
// role, deployment); only the serialization and MAC of an identical principal are
// skipped. An entry is used only if the principal just built has the same fingerprint,
// and only while the header has more than half of its lifetime left.
type signedIdentities struct {
	cache *auth.Cache[signedKey, signedIdentity]
	now   func() time.Time
}

// signedKey is bounded whatever the client sends: the SHA-256 of the normalised credential
// (lower-case scheme, trimmed value), so padding or case variants of one credential share
// an entry and no entry holds a client's header.
type signedKey struct {
	credential   [sha256.Size]byte
	deploymentID int64
	audience     string // the target service: a header signed for one is never sent to another
}

// credentialKey is the cache key of a credential: scheme and value as authentication
// reads them ("" for none).
func credentialKey(scheme, value string) [sha256.Size]byte {
	if value == "" {
		return [sha256.Size]byte{}
	}
	var buf [1 << 10]byte // a credential usually fits: no allocation
	b := append(buf[:0], scheme...)
	b = append(b, ' ')
	return sha256.Sum256(append(b, value...))
}

type signedIdentity struct {
	fp     fingerprint
	header string
}

// fingerprint is everything of a principal that the signed header carries.
type fingerprint struct {
	credential, keyID, keyKind, scope string
	account                           identity.Account
	user                              identity.User
	hasUser                           bool
	deployment                        identity.Deployment
	embedSID                          string
	audience                          string
	clientAddr                        string
}

func fingerprintOf(p *identity.Principal) fingerprint {
	fp := fingerprint{credential: p.Credential, keyID: p.KeyID, keyKind: p.KeyKind, account: p.Account, audience: p.Audience, clientAddr: p.ClientAddr}
	if len(p.KeyScope) > 0 {
		var b strings.Builder
		for _, id := range p.KeyScope {
			b.WriteString(strconv.FormatInt(id, 10))
			b.WriteByte(',')
		}
		fp.scope = b.String()
	}
	if p.User != nil {
		fp.user, fp.hasUser = *p.User, true
	}
	if p.Deployment != nil {
		fp.deployment = *p.Deployment
	}
	if p.Embed != nil {
		fp.embedSID = p.Embed.SessionID
	}
	return fp
}

func newSignedIdentities(now func() time.Time) *signedIdentities {
	return &signedIdentities{cache: auth.NewCache[signedKey, signedIdentity](100_000, now), now: now}
}

// header returns the signed header for p, presented with the credential of that key.
func (s *signedIdentities) header(signer *identity.Signer, credential [sha256.Size]byte, p *identity.Principal) (string, error) {
	var deploymentID int64
	if p.Deployment != nil {
		deploymentID = p.Deployment.ID
	}
	key := signedKey{credential: credential, deploymentID: deploymentID, audience: p.Audience}
	fp := fingerprintOf(p)
	if e, ok := s.cache.Get(key); ok && e.fp == fp {
		return e.header, nil
	}
	h, err := signer.Sign(p)
	if err != nil {
		return "", err
	}
	// Reused for half the header's lifetime, so a service always receives one with at
	// least DefaultTTL/2 to go.
	s.cache.Put(key, signedIdentity{fp: fp, header: h}, s.now().Add(identity.DefaultTTL/2))
	return h, nil
}
