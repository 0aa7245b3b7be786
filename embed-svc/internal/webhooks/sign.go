package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretBytes is the length of a signing secret.
const SecretBytes = 32

// EncodeSecret is the text form of a secret.
func EncodeSecret(raw []byte) string { return SecretPrefix + base64.StdEncoding.EncodeToString(raw) }

// DecodeSecret reads a secret's text form.
func DecodeSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errors.New("webhooks: a secret starts with " + SecretPrefix)
	}
	return base64.StdEncoding.DecodeString(b64)
}

// Signature is the webhook-signature value of a delivery: "v1," and the base64 of the
// HMAC-SHA256, under each secret, of "<webhook-id>.<webhook-timestamp>.<body>",
// space-separated (the current secret first; the previous one during a rotation's
// overlap), as the Standard Webhooks specification says.
func Signature(id string, at time.Time, body []byte, secrets ...[]byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		mac := hmac.New(sha256.New, s)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// SetHeaders sets the Standard Webhooks headers of a delivery of body sent at at.
func SetHeaders(h http.Header, id string, at time.Time, body []byte, secrets ...[]byte) {
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", Signature(id, at, body, secrets...))
	h.Set("Content-Type", "application/json")
}
