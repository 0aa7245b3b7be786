package e2e_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestWebhookReceiverJudgesSignatures checks the proof's receiver on deliveries signed
// here: one signed with both secrets of a rotation verifies with each, one signed with
// another secret with neither, and the npm library accepts what the Go library does.
func TestWebhookReceiverJudgesSignatures(t *testing.T) {
	secret := func() string {
		var k [32]byte
		_, _ = rand.Read(k[:])
		return "whsec_" + base64.StdEncoding.EncodeToString(k[:])
	}
	oldS, newS, other := secret(), secret(), secret()
	rc := newReceiver(t, nil)
	rc.setSecrets(oldS, newS)
	body := []byte(`{"type":"workspace.folder.create","timestamp":"2026-01-02T03:04:05.000Z","sequence":1,"data":{"id":"evt"}}`)
	send := func(id string, secrets ...string) received {
		t.Helper()
		ts := time.Now()
		var sigs []byte
		for _, s := range secrets {
			wh, err := standardwebhooks.NewWebhook(s)
			if err != nil {
				t.Fatal(err)
			}
			sig, err := wh.Sign(id, ts, body)
			if err != nil {
				t.Fatal(err)
			}
			if len(sigs) > 0 {
				sigs = append(sigs, ' ')
			}
			sigs = append(sigs, sig...)
		}
		req, _ := http.NewRequest("POST", rc.srv.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "check")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", string(sigs))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return rc.await(t, id, 5*time.Second)
	}
	if g := send("msg_both", oldS, newS); len(g.verifiedBy) != 2 {
		t.Errorf("signed with both secrets: verified by %v, want both", g.verifiedBy)
	} else {
		verifyWithNpm(t, newS, g)
		verifyWithNpm(t, oldS, g)
		if npmVerify(t, other, g) == nil {
			t.Errorf("the npm library accepts a delivery signed with other secrets")
		}
	}
	if g := send("msg_other", other); len(g.verifiedBy) != 0 {
		t.Errorf("signed with another secret: verified by %v, want none", g.verifiedBy)
	}
}
