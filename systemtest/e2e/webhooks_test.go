package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// The webhook settings of the proof: a short retry period and attempt timeout so that
// retries, failures and timeouts happen within the test. The stack's embed-svc lets the
// deliverer dial loopback (WEBHOOK_ALLOWED_HOSTS, devstack's local-stack setting).
var webhookEnv = []string{
	"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0",
	"RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0",
	"WEBHOOK_RETRY_PERIOD=12s", "WEBHOOK_ATTEMPT_TIMEOUT=2s",
}

// received is one request a receiver got, with which of its secrets verified it.
type received struct {
	id, timestamp, signature string
	body                     []byte
	env                      struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Sequence  int64           `json:"sequence"`
		Data      json.RawMessage `json:"data"`
	}
	verifiedBy []int // indexes into the receiver's secrets, in order
	at         time.Time
}

// receiver is a webhook endpoint on loopback that verifies every request with the
// Standard Webhooks library against each secret it was given, then answers as told.
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	sec []string
	got []received
	// answer writes the reply (nil: 204).
	answer func(w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{t: t, answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) setSecrets(s ...string) {
	rc.mu.Lock()
	rc.sec = append([]string(nil), s...)
	rc.mu.Unlock()
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	g := received{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"),
		signature: r.Header.Get("webhook-signature"), body: body, at: time.Now()}
	_ = json.Unmarshal(body, &g.env)
	rc.mu.Lock()
	for i, s := range rc.sec {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			rc.t.Errorf("secret %q: %v", s, err)
			continue
		}
		if wh.Verify(body, r.Header) == nil {
			g.verifiedBy = append(g.verifiedBy, i)
		}
	}
	if r.Header.Get("User-Agent") == "" {
		rc.t.Errorf("delivery %s has no User-Agent", g.id)
	}
	if r.Header.Get("Content-Type") != "application/json" {
		rc.t.Errorf("delivery %s: Content-Type %q", g.id, r.Header.Get("Content-Type"))
	}
	rc.got = append(rc.got, g)
	rc.mu.Unlock()
	if rc.answer != nil {
		rc.answer(w, r)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// await waits until a request with webhook-id id arrived, and returns the first.
func (rc *receiver) await(t *testing.T, id string, within time.Duration) received {
	t.Helper()
	var found received
	eventually(t, within, "a delivery of "+id, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, g := range rc.got {
			if g.id == id {
				found = g
				return true
			}
		}
		return false
	})
	return found
}

func (rc *receiver) count(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, g := range rc.got {
		if g.id == id {
			n++
		}
	}
	return n
}

// subscription is the answer of POST /api/v1/webhooks.
type subscription struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	Events         []string `json:"events"`
	Enabled        bool     `json:"enabled"`
	Secret         string   `json:"secret"`
	DisabledReason *string  `json:"disabledReason"`
}

type webhookDelivery struct {
	ID          string `json:"id"`
	EventID     string `json:"eventId"`
	Type        string `json:"type"`
	Sequence    int64  `json:"sequence"`
	Status      string `json:"status"`
	Attempts    int    `json:"attempts"`
	LastAttempt *struct {
		Status    int    `json:"status"`
		LatencyMs int64  `json:"latencyMs"`
		Error     string `json:"error"`
		Excerpt   string `json:"excerpt"`
	} `json:"lastAttempt"`
}

func (p *platform) subscribe(t *testing.T, authz, to string, events ...string) subscription {
	t.Helper()
	var s subscription
	p.call(t, "POST", "/api/v1/webhooks", authz, map[string]any{"url": to, "events": events}).want(t, 201).decode(t, &s)
	if !strings.HasPrefix(s.Secret, "whsec_") || s.ID == "" || !s.Enabled {
		t.Fatalf("subscription %+v", s)
	}
	// Its receiver closes with the subtest: the account's later deliveries go on without it.
	t.Cleanup(func() { p.call(t, "DELETE", "/api/v1/webhooks/"+s.ID, authz, nil).want(t, 204) })
	return s
}

func (p *platform) deliveries(t *testing.T, authz, sub string) []webhookDelivery {
	t.Helper()
	var pg struct {
		Items []webhookDelivery `json:"items"`
	}
	p.call(t, "GET", "/api/v1/webhooks/"+sub+"/deliveries?first=100", authz, nil).want(t, 200).decode(t, &pg)
	return pg.Items
}

// awaitDelivery polls a subscription's deliveries until the one of eventID satisfies ok.
func (p *platform) awaitDelivery(t *testing.T, authz, sub, eventID string, within time.Duration, what string, ok func(webhookDelivery) bool) webhookDelivery {
	t.Helper()
	var found webhookDelivery
	eventually(t, within, "delivery of "+eventID+" "+what, func() bool {
		for _, d := range p.deliveries(t, authz, sub) {
			if d.EventID == eventID && ok(d) {
				found = d
				return true
			}
		}
		return false
	})
	return found
}

// wantSigned checks that g verified with the subscription's secret and carries ev as data.
func wantSigned(t *testing.T, g received, ev auditEvent) {
	t.Helper()
	if len(g.verifiedBy) == 0 {
		t.Errorf("delivery %s does not verify with the subscription's secret (signature %q)", g.id, g.signature)
	}
	if g.id != ev.ID || g.env.Type != ev.Action {
		t.Errorf("delivery id %q type %q, want the event's id %q and action %q", g.id, g.env.Type, ev.ID, ev.Action)
	}
	var data auditEvent
	if err := json.Unmarshal(g.env.Data, &data); err != nil {
		t.Fatalf("data %s: %v", g.env.Data, err)
	}
	if data.ID != ev.ID || data.Action != ev.Action || data.Time != ev.Time || data.AccountID != ev.AccountID || data.Target != ev.Target {
		t.Errorf("data %+v, want the audit event %+v", data, ev)
	}
	if g.env.Sequence <= 0 {
		t.Errorf("sequence %d", g.env.Sequence)
	}
}

// standardwebhooksNpmVersion is the npm Standard Webhooks library that gives a second
// opinion on a delivery's signature.
const standardwebhooksNpmVersion = "1.1.1"

// verifyWithNpm verifies g with the npm Standard Webhooks library (pinned, installed
// outside the repository) and secret.
func verifyWithNpm(t *testing.T, secret string, g received) {
	t.Helper()
	if err := npmVerify(t, secret, g); err != nil {
		t.Errorf("npm standardwebhooks@%s refuses delivery %s: %v", standardwebhooksNpmVersion, g.id, err)
	}
}

// npmVerify is the npm library's verdict on g with secret.
func npmVerify(t *testing.T, secret string, g received) error {
	t.Helper()
	modules := devstack.NpmPackage(t, "standardwebhooks", standardwebhooksNpmVersion, "the webhook signature's second opinion")
	dir := t.TempDir()
	msg, _ := json.Marshal(map[string]any{"secret": secret, "body": string(g.body), "headers": map[string]string{
		"webhook-id": g.id, "webhook-timestamp": g.timestamp, "webhook-signature": g.signature}})
	if err := os.WriteFile(filepath.Join(dir, "delivery.json"), msg, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `const { Webhook } = require("standardwebhooks");
const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
new Webhook(d.secret).verify(d.body, d.headers);`
	cmd := exec.Command("node", "-e", script, filepath.Join(dir, "delivery.json"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// TestWebhooks proves the webhooks through the gateway of a running stack: signed
// deliveries of three services' events, retries and failure, redelivery, ping, hostile
// receivers bounded without delaying another account, and the secret rotation overlap.
func TestWebhooks(t *testing.T) {
	p := startPlatformWith(t, stacktest.Options{Env: webhookEnv})
	admin := bearer(p.acme.Users["admin"])

	t.Run("three-services-events-are-delivered-signed", func(t *testing.T) {
		rc := newReceiver(t, nil)
		s := p.subscribe(t, admin, rc.srv.URL+"/hook", "workspace.folder.create", "embed.session.revoke", "dbtsync.sync.*")
		rc.setSecrets(s.Secret)

		f := p.createFolder(t, p.acme.Users["admin"], p.unique("hooked"), 0)
		ev := p.awaitEvent(t, "workspace.folder.create", id64(f.ID))
		g := rc.await(t, ev.ID, 30*time.Second)
		wantSigned(t, g, ev)
		verifyWithNpm(t, s.Secret, g)
		seqs := []int64{g.env.Sequence}

		body := p.external(nil)
		sid := p.mintID(t, body)
		pub := p.sessionPublicID(t, body["externalId"].(string))
		p.call(t, "POST", revokePath, admin, map[string]any{"sessionId": sid}).want(t, 204)
		ev = p.awaitEvent(t, "embed.session.revoke", pub)
		g = rc.await(t, ev.ID, 30*time.Second)
		wantSigned(t, g, ev)
		seqs = append(seqs, g.env.Sequence)

		a := p.startSync(t, map[string]any{"source": "manifest", "manifest": manifest(t), "branchName": p.unique("hooked")})
		if job := p.waitJob(t, a.SyncJobID); job["status"] != "succeeded" {
			t.Fatalf("sync job %v", job)
		}
		ev = p.awaitEvent(t, "dbtsync.sync.finish", a.SyncJobID)
		g = rc.await(t, ev.ID, 30*time.Second)
		wantSigned(t, g, ev)
		// The sync's start is delivered too (dbtsync.sync.*): the finish comes later.
		if seqs = append(seqs, g.env.Sequence); !(seqs[0] < seqs[1] && seqs[1] < seqs[2]) {
			t.Errorf("sequences %v of events one after the other, want increasing", seqs)
		}
		d := p.awaitDelivery(t, admin, s.ID, ev.ID, 20*time.Second, "succeeded", func(d webhookDelivery) bool { return d.Status == "succeeded" })
		if d.Attempts != 1 || d.Type != "dbtsync.sync.finish" {
			t.Errorf("delivery %+v", d)
		}
	})

	t.Run("failing-receiver-gets-retries-then-failed-redeliver-and-ping", func(t *testing.T) {
		var mu sync.Mutex
		status := http.StatusInternalServerError
		rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			st := status
			mu.Unlock()
			w.WriteHeader(st)
			_, _ = io.WriteString(w, "receiver down")
		})
		s := p.subscribe(t, admin, rc.srv.URL, "workspace.folder.*")
		rc.setSecrets(s.Secret)
		f := p.createFolder(t, p.acme.Users["admin"], p.unique("retried"), 0)
		ev := p.awaitEvent(t, "workspace.folder.create", id64(f.ID))
		d := p.awaitDelivery(t, admin, s.ID, ev.ID, 60*time.Second, "failed after its retry period", func(d webhookDelivery) bool { return d.Status == "failed" })
		if d.Attempts < 2 || rc.count(ev.ID) != d.Attempts {
			t.Errorf("delivery %+v after %d requests: want retries, each one a request", d, rc.count(ev.ID))
		}
		if d.LastAttempt == nil || d.LastAttempt.Status != 500 || d.LastAttempt.Excerpt != "receiver down" {
			t.Errorf("last attempt %+v", d.LastAttempt)
		}

		mu.Lock()
		status = http.StatusOK
		mu.Unlock()
		p.call(t, "POST", "/api/v1/webhooks/"+s.ID+"/deliveries/"+d.ID+"/redeliver", admin, nil).want(t, 202)
		after := p.awaitDelivery(t, admin, s.ID, ev.ID, 30*time.Second, "succeeded on redelivery", func(d webhookDelivery) bool { return d.Status == "succeeded" })
		if after.Attempts != d.Attempts+1 || after.ID != d.ID {
			t.Errorf("redelivered %+v, want the same delivery with one more attempt than %d", after, d.Attempts)
		}
		p.call(t, "POST", "/api/v1/webhooks/"+s.ID+"/deliveries/"+d.ID+"/redeliver", admin, nil).want(t, 202)
		p.awaitDelivery(t, admin, s.ID, ev.ID, 30*time.Second, "succeeded again", func(d webhookDelivery) bool { return d.Status == "succeeded" && d.Attempts == after.Attempts+1 })

		var ping webhookDelivery
		p.call(t, "POST", "/api/v1/webhooks/"+s.ID+"/ping", admin, nil).want(t, 202).decode(t, &ping)
		if !strings.HasPrefix(ping.EventID, "ping_") || ping.Type != "webhook.ping" {
			t.Fatalf("ping %+v", ping)
		}
		g := rc.await(t, ping.EventID, 30*time.Second)
		if len(g.verifiedBy) == 0 || g.env.Type != "webhook.ping" || !strings.Contains(string(g.env.Data), s.ID) {
			t.Errorf("ping delivery %+v", g)
		}
	})

	t.Run("hostile-receivers-are-bounded-and-delay-no-other-account", func(t *testing.T) {
		// Closed before the receivers close (cleanups run last first): a held answer ends.
		stop := make(chan struct{})
		slow := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stop:
			case <-time.After(30 * time.Second):
			}
		})
		var hugeMu sync.Mutex
		hugeMax := 0 // the most bytes of one answer the deliverer took
		huge := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(20 * time.Second))
			w.WriteHeader(http.StatusInternalServerError)
			chunk := []byte(strings.Repeat("x", 64<<10))
			sent := 0
			defer func() {
				hugeMu.Lock()
				hugeMax = max(hugeMax, sent)
				hugeMu.Unlock()
			}()
			for range 1 << 10 { // 64 MiB unless the deliverer stops reading
				n, err := w.Write(chunk)
				sent += n
				if err != nil {
					return
				}
			}
		})
		redirect := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://10.0.0.1/internal", http.StatusFound)
		})
		t.Cleanup(func() { close(stop) })
		var hostile []subscription
		for _, rc := range []*receiver{slow, huge, redirect} {
			s := p.subscribe(t, admin, rc.srv.URL, "workspace.folder.create")
			rc.setSecrets(s.Secret)
			hostile = append(hostile, s)
		}
		// Enough events to keep the hostile receivers' attempts in flight.
		var evs []auditEvent
		for range 6 {
			f := p.createFolder(t, p.acme.Users["admin"], p.unique("hostile"), 0)
			evs = append(evs, p.awaitEvent(t, "workspace.folder.create", id64(f.ID)))
		}

		good := newReceiver(t, nil)
		gadmin := bearer(p.globex.Users["admin"])
		gs := p.subscribe(t, gadmin, good.srv.URL, "workspace.folder.create")
		good.setSecrets(gs.Secret)
		start := time.Now()
		var gf item
		p.call(t, "POST", p.ws(p.globex.Deployments[0].ID, "/folders"), gadmin, map[string]any{"name": p.unique("neighbour")}).want(t, 200).decode(t, &gf)
		gev := p.awaitEventsOf(t, gadmin, url.Values{"action": {"workspace.folder.create"}, "targetId": {id64(gf.ID)}}, 1)[0]
		g := good.await(t, gev.ID, 15*time.Second)
		if len(g.verifiedBy) == 0 {
			t.Errorf("globex's delivery does not verify")
		}
		if took := g.at.Sub(start); took > 10*time.Second {
			t.Errorf("globex's delivery took %v beside acme's hostile receivers", took)
		}

		words := []string{"timeout", "status", "redirect"}
		for i, s := range hostile {
			d := p.awaitDelivery(t, admin, s.ID, evs[0].ID, 30*time.Second, "attempted", func(d webhookDelivery) bool { return d.Attempts >= 1 && d.LastAttempt != nil })
			if d.LastAttempt.Error != words[i] || d.Status == "succeeded" {
				t.Errorf("%s receiver: delivery %+v, want error %q", words[i], d, words[i])
			}
			if len(d.LastAttempt.Excerpt) > 256 {
				t.Errorf("%s receiver: excerpt of %d bytes, want at most 256", words[i], len(d.LastAttempt.Excerpt))
			}
			if words[i] == "timeout" && d.LastAttempt.LatencyMs > 5000 {
				t.Errorf("slow receiver's attempt lasted %d ms, past the 2 s attempt timeout", d.LastAttempt.LatencyMs)
			}
		}
		hugeMu.Lock()
		if hugeMax >= 64<<20 {
			t.Errorf("the deliverer read the whole %d-byte answer of the huge receiver", hugeMax)
		}
		hugeMu.Unlock()
		if redirect.count(evs[0].ID) == 0 {
			t.Errorf("redirecting receiver got no request")
		}
	})

	t.Run("rotation-overlap-both-secrets-verify", func(t *testing.T) {
		rc := newReceiver(t, nil)
		s := p.subscribe(t, admin, rc.srv.URL, "workspace.folder.create")
		var rot struct {
			Secret                  string `json:"secret"`
			PreviousSecretExpiresAt string `json:"previousSecretExpiresAt"`
		}
		p.call(t, "POST", "/api/v1/webhooks/"+s.ID+"/secret/rotate", admin, nil).want(t, 200).decode(t, &rot)
		if !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == s.Secret || rot.PreviousSecretExpiresAt == "" {
			t.Fatalf("rotate %+v", rot)
		}
		rc.setSecrets(s.Secret, rot.Secret)
		f := p.createFolder(t, p.acme.Users["admin"], p.unique("rotated"), 0)
		ev := p.awaitEvent(t, "workspace.folder.create", id64(f.ID))
		g := rc.await(t, ev.ID, 30*time.Second)
		if len(g.verifiedBy) != 2 || strings.Count(g.signature, "v1,") != 2 {
			t.Errorf("delivery during the overlap verified by secrets %v (signature %q), want both", g.verifiedBy, g.signature)
		}
	})
}
