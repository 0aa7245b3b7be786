package webhooks_test

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
)

func secret(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, webhooks.SecretBytes)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// A delivery signed here verifies with the Standard Webhooks library, under the current
// secret and, during a rotation's overlap, under the previous one; a changed body, id or
// timestamp, or another secret, does not.
func TestSignaturesVerifyWithTheStandardWebhooksLibrary(t *testing.T) {
	cur, prev := secret(t), secret(t)
	body := []byte(`{"type":"workspace.folder.create","timestamp":"2026-12-02T10:00:00Z","sequence":1,"data":{"id":"01J"}}`)
	now := time.Now()
	h := http.Header{}
	webhooks.SetHeaders(h, "01JEVENT", now, body, cur, prev)
	for name, s := range map[string][]byte{"current": cur, "previous": prev} {
		wh, err := standardwebhooks.NewWebhook(webhooks.EncodeSecret(s))
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("%s secret: %v", name, err)
		}
		if err := wh.Verify(bytes.Replace(body, []byte(`"sequence":1`), []byte(`"sequence":2`), 1), h); err == nil {
			t.Errorf("%s secret: a changed body verifies", name)
		}
	}
	other, err := standardwebhooks.NewWebhook(webhooks.EncodeSecret(secret(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Verify(body, h); err == nil {
		t.Error("another secret verifies")
	}
	old := http.Header{}
	webhooks.SetHeaders(old, "01JEVENT", now.Add(-time.Hour), body, cur)
	wh, _ := standardwebhooks.NewWebhook(webhooks.EncodeSecret(cur))
	if err := wh.Verify(body, old); err == nil {
		t.Error("an hour-old timestamp verifies")
	}
	if raw, err := webhooks.DecodeSecret(webhooks.EncodeSecret(cur)); err != nil || !bytes.Equal(raw, cur) {
		t.Errorf("secret round trip: %v", err)
	}
}
