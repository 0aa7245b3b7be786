package natsx

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// A connection's inbox prefix is its NATS user's own: from the first URL of a list,
// with or without a scheme; none without a user; an error for a name no subject can
// start with.
func TestUserInboxIsTheURLsUsersOwn(t *testing.T) {
	for _, c := range []struct {
		url, want, err string
	}{
		{"nats://dbtsync-worker:pw@127.0.0.1:4222", "_INBOX_dbtsync-worker", ""},
		{"nats://embed-svc:pw@n1:4222,nats://embed-svc:pw@n2:4222", "_INBOX_embed-svc", ""},
		{"gateway:pw@127.0.0.1:4222", "_INBOX_gateway", ""},
		{"nats://127.0.0.1:4222", "", ""},
		{"nats://a*b:pw@127.0.0.1:4222", "", "cannot name an inbox subject"},
		{"nats://a%3Eb:pw@127.0.0.1:4222", "", "cannot name an inbox subject"},
		{"nats://a%20b:pw@127.0.0.1:4222", "", "cannot name an inbox subject"},
	} {
		opt, err := UserInbox(c.url)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.url, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		var o nats.Options
		if opt != nil {
			if err := opt(&o); err != nil {
				t.Errorf("%s: the option: %v", c.url, err)
			}
		}
		if o.InboxPrefix != c.want {
			t.Errorf("%s: inbox prefix %q, want %q", c.url, o.InboxPrefix, c.want)
		}
	}
}
