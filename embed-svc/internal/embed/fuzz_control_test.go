package embed

import (
	"testing"
	"time"
)

// FuzzDecodeListSessions: any query of the session list decodes (and the service then
// validates it) to a 4xx or a query within bounds; never a panic.
func FuzzDecodeListSessions(f *testing.F) {
	for _, s := range []string{"", "first=20", "first=0", "state=active", "state=gone", "deploymentId=3", "deploymentId=-1",
		"after=" + EncodeSessionCursor(SessionCursor{CreatedAt: time.Unix(1700000000, 5), ID: "0123456789abcdef0123456789abcdef"}),
		"after=%ff", "after=MTIzOm5vcGU", "tenant=A%20B", "externalId=x&internalId=y", "id=zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		req, err := serveDecoder(t, "GET /api/v1/embed/sessions", "GET", "/api/v1/embed/sessions", query, nil, decodeListSessions)
		clientError(t, query, err)
		if err != nil {
			return
		}
		q := req.(listSessionsRequest).Query
		if q.DeploymentID < 0 || (!q.After.IsZero() && !validPublicID(q.After.ID)) {
			t.Fatalf("query %q decoded to %+v", query, q)
		}
	})
}

// FuzzDecodeRevokeSessions: any bulk-revoke body is a 4xx or a request; never a panic.
func FuzzDecodeRevokeSessions(f *testing.F) {
	for _, s := range []string{`{"id":"0123456789abcdef0123456789abcdef"}`, `{"externalId":"a","tenant":"acme-north"}`, `{"internalId":"x"}`,
		`{"tenant":"t"}`, `{"deploymentId":1}`, `{}`, `{"deploymentId":"1"}`, `{"sessionIds":[]}`, `[`, `{"id":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := serveDecoder(t, "POST /api/v1/embed/sessions/revoke", "POST", "/api/v1/embed/sessions/revoke", "", body, decodeRevokeSessions)
		clientError(t, string(body), err)
	})
}

// FuzzDecodePutSettings: any settings body is a 4xx or settings; never a panic.
func FuzzDecodePutSettings(f *testing.F) {
	for _, s := range []string{`{}`, `{"allowAi":true,"locale":"fr","timezone":"Europe/Paris"}`, `{"allowAi":"yes"}`, `{"bogus":1}`, `null`, `{"locale":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := serveDecoder(t, "PUT /api/v1/embed/settings", "PUT", "/api/v1/embed/settings", "", body, decodePutSettings)
		clientError(t, string(body), err)
	})
}

// FuzzDecodeSessionCursor: DecodeSessionCursor round-trips what it accepts.
func FuzzDecodeSessionCursor(f *testing.F) {
	f.Add(EncodeSessionCursor(SessionCursor{CreatedAt: time.Unix(1, 2), ID: "0123456789abcdef0123456789abcdef"}))
	f.Add("")
	f.Add("Zm9vOmJhcg")
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := DecodeSessionCursor(s)
		if !ok {
			return
		}
		back, ok := DecodeSessionCursor(EncodeSessionCursor(c))
		if !ok || !back.CreatedAt.Equal(c.CreatedAt) || back.ID != c.ID {
			t.Fatalf("cursor %q does not round-trip: %+v %+v", s, c, back)
		}
	})
}
