package natsx

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// InboxPrefix is the inbox prefix of NATS user user's connections: the replies to its
// requests, JetStream API answers and pull deliveries included, arrive on subjects under
// it (InboxPrefix(user)+".>"), and that is the only inbox the user may subscribe to. Each
// user having its own, no process can subscribe to another's replies.
func InboxPrefix(user string) string { return "_INBOX_" + user }

// UserInbox is the nats.CustomInboxPrefix option for a connection to servers (NATS_URL:
// one URL or a comma-separated list) as the user the first URL names: InboxPrefix of
// that user. The core connection and every JetStream context made on it (jetstream.New
// takes the connection's prefix for its replies and pull deliveries) use it. nil, nil
// when the URL names no user (a server without users, where no inbox is reserved). A
// user name that cannot start a subject (a wildcard, a space) is an error.
func UserInbox(servers string) (nats.Option, error) {
	first, _, _ := strings.Cut(servers, ",")
	first = strings.TrimSpace(first)
	if !strings.Contains(first, "://") {
		first = "nats://" + first
	}
	u, err := url.Parse(first)
	if err != nil {
		return nil, fmt.Errorf("the server URL: %w", err)
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, nil
	}
	name := u.User.Username()
	if strings.ContainsAny(name, "*> \t\r\n") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("the NATS user name %q cannot name an inbox subject", name)
	}
	return nats.CustomInboxPrefix(InboxPrefix(name)), nil
}
