package embed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// The transport's decoders, fuzzed through the service's own handler (routes, body limit,
// error encoder) in front of a recorder: whatever a client sends is answered with a 4xx
// and the error body, or reaches the service decoded within bounds; never a panic or a
// 5xx.

// recorder is an embed.Service that keeps what the transport decoded and answers
// nothing; only the methods the fuzz targets reach are implemented.
type recorder struct {
	embed.Service
	got any
}

func (r *recorder) GenerateSession(_ context.Context, _ *identity.Principal, req embed.GenerateSessionRequest) (string, error) {
	r.got = req
	return "id", nil
}

func (r *recorder) AddGroupMembers(_ context.Context, _ *identity.Principal, _, _ string, in embed.GroupMembersInput) (embed.GroupMembersAdded, error) {
	r.got = in
	return embed.GroupMembersAdded{}, nil
}

func (r *recorder) DryRunSession(_ context.Context, _ *identity.Principal, req embed.GenerateSessionRequest) (embed.DryRun, error) {
	r.got = req
	return embed.DryRun{DryRun: true}, nil
}

func (r *recorder) ExchangeSession(_ context.Context, id string) (embed.SessionToken, error) {
	r.got = id
	return embed.SessionToken{}, nil
}

func (r *recorder) RevokeSession(_ context.Context, _ *identity.Principal, id string) error {
	r.got = id
	return nil
}

func (r *recorder) ListSessions(_ context.Context, _ *identity.Principal, q embed.SessionQuery) (httpx.Page[embed.SessionView], error) {
	r.got = q
	return httpx.Page[embed.SessionView]{}, nil
}

func (r *recorder) RevokeSessions(_ context.Context, _ *identity.Principal, req embed.RevokeSessionsRequest) (embed.RevokedSessions, error) {
	r.got = req
	return embed.RevokedSessions{}, nil
}

func (r *recorder) PutAccountSettings(_ context.Context, _ *identity.Principal, in embed.AccountSettings) (embed.AccountSettingsView, error) {
	r.got = in
	return embed.AccountSettingsView{}, nil
}

func (r *recorder) CreateDefinition(_ context.Context, _ *identity.Principal, _ string, in embed.DefinitionInput) (embed.Definition, error) {
	r.got = in
	return embed.Definition{}, nil
}

func (r *recorder) ListDefinitions(_ context.Context, _ *identity.Principal, q embed.ListQuery) (httpx.Page[embed.Definition], error) {
	r.got = q
	return httpx.Page[embed.Definition]{}, nil
}

// serve sends one request through the embed API's handler, with an admin's principal
// as the gateway signs it, and returns what the service received (nil when the
// transport refused it, with a 4xx and the error body, which it checks).
func serve(t *testing.T, method, path, rawQuery string, body []byte) any {
	t.Helper()
	rec := &recorder{}
	h := httpx.NewRouter()
	embed.RegisterRoutes(h, embed.MakeEndpoints(rec), slog.New(slog.NewJSONHandler(io.Discard, nil)), nil, nil)
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.URL.RawQuery = rawQuery // set directly: a hostile query need not survive a request line
	r.Header.Set("Content-Type", "application/json")
	p := &identity.Principal{Account: identity.Account{ID: 1}, User: &identity.User{ID: 1, Role: identity.RoleAdmin}, Credential: identity.CredentialAPIKey}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r.WithContext(identity.NewContext(context.Background(), p)))
	switch {
	case w.Code >= 200 && w.Code < 300 && rec.got != nil:
		return rec.got
	case w.Code >= 400 && w.Code < 500:
		var e errs.Body
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Status != w.Code || e.Code == "" || e.Message == "" {
			t.Fatalf("%s %s?%s %q: %d with body %s", method, path, rawQuery, body, w.Code, w.Body)
		}
		return nil
	}
	t.Fatalf("%s %s?%s %q: %d %s, want a 2xx that reached the service or a 4xx", method, path, rawQuery, body, w.Code, w.Body)
	return nil
}

// FuzzDecodeGenerateSessionRequest: a generate-session body decodes strictly and then
// passes or fails the rules that need no stored state with a 400, never anything else.
func FuzzDecodeGenerateSessionRequest(f *testing.F) {
	for _, seed := range []string{
		`{"deploymentId": 1, "externalId": " Alice@Example.com "}`,
		`{"deploymentId": 1, "internalId": "acme-admin", "groups": []}`,
		`{"deploymentId": 1, "externalId": "a", "userAttributes": [{"name": "region", "value": ["eu", "us"]}, {"name": "quota", "value": null}]}`,
		`{"deploymentId": 1, "externalId": "a", "creatorMode": true, "embedTenantName": "acme-partners", "groupDefinitions": [{"name": "g"}], "userAttributeDefinitions": [{"name": "n", "type": "number_array"}]}`,
		`{"deploymentId": 1, "externalId": "a", "settings": {"allowAi": "yes"}}`,
		`{"deploymentId": 1, "externalId": "a", "settings": {"showHeader": false}}`,
		`{"deploymentId": 1, "externalId": "a", "userProfile": {"picture": "javascript:alert(1)"}}`,
		`{"deploymentId": "1"}`, `{"deploymentId": 1e400}`, `[]`, `null`, `{`, `{"deploymentId": 1}{}`,
		`{"deploymentId": 1, "externalId": "a", "securityContext": [1]}`,
		`{"deploymentId": 1, "externalId": "a", "userAttributes": [{"name": "x", "value": {"a": 1}}]}`,
		`{"deploymentId": -5, "externalId": "a", "branchName": ""}`,
		`{"deploymentId": 1, "externalId": "a", "dryRun": true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := serve(t, "POST", "/api/v1/embed/generate-session", "", body)
		if got == nil {
			return
		}
		if err := embed.ValidateGenerateSession(got.(embed.GenerateSessionRequest)); err != nil {
			if e, ok := errs.As(err); !ok || errs.Status(e.Kind) != 400 || e.Message == "" {
				t.Fatalf("body %q: validation error %v is not a 400", body, err)
			}
		}
	})
}

// FuzzDecodeSessionIDRequest: the body of exchange and revoke decodes to a non-empty
// session id or fails with a 4xx.
func FuzzDecodeSessionIDRequest(f *testing.F) {
	for _, s := range []string{`{"sessionId":"es_abc"}`, `{"sessionId":""}`, `{"sessionId":null}`, `{}`, `{"sessionId":1}`,
		`{"sessionId":"a","x":1}`, `{"sessionId":"a"}{}`, `[]`, `null`, `{`, "\"\xff\"", `{"sessionId":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/api/v1/embed/session/exchange", "/api/v1/embed/session/revoke"} {
			if got := serve(t, "POST", path, "", body); got != nil && got.(string) == "" {
				t.Fatalf("%s %q: accepted an empty session id", path, body)
			}
		}
	})
}

// FuzzDecodeCreateDefinition: POST /api/v1/groups and /api/v1/user-attributes decode and
// validate to a definition or a 4xx.
func FuzzDecodeCreateDefinition(f *testing.F) {
	for _, s := range []string{`{"name":"finance"}`, `{"name":"region","type":"string","displayName":"Region","defaultValue":"eu","description":"d"}`,
		`{"name":"q","type":"number_array"}`, `{"name":""}`, `{"name":"g","type":"string"}`, `{"type":"date"}`, `{"name":1}`,
		`{"name":"a","extra":true}`, `{"name":"a"} []`, `[]`, `null`, `{`, `{"name":"` + string(bytes.Repeat([]byte("n"), 300)) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range []struct{ path, kind string }{{"/api/v1/groups", embed.KindGroup}, {"/api/v1/user-attributes", embed.KindAttribute}} {
			got := serve(t, "POST", c.path, "", body)
			if got == nil {
				continue
			}
			if err := embed.ValidateDefinition(c.kind, got.(embed.DefinitionInput), "body"); err != nil {
				if e, ok := errs.As(err); !ok || errs.Status(e.Kind) != 400 || e.Message == "" {
					t.Fatalf("%s %q: validation error %v is not a 400", c.path, body, err)
				}
			}
		}
	})
}

// FuzzDecodeListDefinitions: any first/after query of the catalog lists decodes to a page
// size within 1..MaxPageSize or fails with a 4xx.
func FuzzDecodeListDefinitions(f *testing.F) {
	for _, s := range []string{"", "first=1", "first=200", "first=201", "first=0", "first=-1", "first= 5 ", "first=1e2",
		"after=abc", "after=%ff", "first=99999999999999999999", "first=5&first=6", "after="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		for _, path := range []string{"/api/v1/groups", "/api/v1/embed-tenants/acme-north/user-attributes"} {
			if got := serve(t, "GET", path, query, nil); got != nil {
				if q := got.(embed.ListQuery); q.First < 1 || q.First > embed.MaxPageSize {
					t.Fatalf("%s?%s: accepted first=%d", path, query, q.First)
				}
			}
		}
	})
}

// FuzzDecodeListSessions: any query of the session list decodes to a query within bounds
// (the service validates the rest) or a 4xx.
func FuzzDecodeListSessions(f *testing.F) {
	for _, s := range []string{"", "first=20", "first=0", "state=active", "state=gone", "deploymentId=3", "deploymentId=-1",
		"after=" + httpx.EncodeCursor(embed.SessionCursor{CreatedAt: time.Unix(1700000000, 5), ID: "0123456789abcdef0123456789abcdef"}),
		"after=%ff", "after=MTIzOm5vcGU", "tenant=A%20B", "externalId=x&internalId=y", "id=zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		got := serve(t, "GET", "/api/v1/embed/sessions", query, nil)
		if got == nil {
			return
		}
		q := got.(embed.SessionQuery)
		if q.DeploymentID < 0 || q.First < 1 || q.First > embed.MaxPageSize {
			t.Fatalf("query %q decoded to %+v", query, q)
		}
		if !q.After.IsZero() {
			if _, err := embed.DecodeSessionCursor(httpx.EncodeCursor(q.After)); err != nil {
				t.Fatalf("query %q decoded to a cursor the list cannot issue: %+v", query, q.After)
			}
		}
	})
}

// FuzzDecodeRevokeSessions: any bulk-revoke body is a 4xx or a request.
func FuzzDecodeRevokeSessions(f *testing.F) {
	for _, s := range []string{`{"id":"0123456789abcdef0123456789abcdef"}`, `{"externalId":"a","tenant":"acme-north"}`, `{"internalId":"x"}`,
		`{"tenant":"t"}`, `{"deploymentId":1}`, `{}`, `{"deploymentId":"1"}`, `{"sessionIds":[]}`, `[`, `{"id":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		serve(t, "POST", "/api/v1/embed/sessions/revoke", "", body)
	})
}

// FuzzDecodePutSettings: any settings body is a 4xx or settings.
func FuzzDecodePutSettings(f *testing.F) {
	for _, s := range []string{`{}`, `{"allowAi":true,"locale":"fr","timezone":"Europe/Paris"}`, `{"allowAi":"yes"}`, `{"bogus":1}`, `null`, `{"locale":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		serve(t, "PUT", "/api/v1/embed/settings", "", body)
	})
}

// FuzzDecodeSessionCursor: DecodeSessionCursor round-trips what it accepts and refuses
// the rest with ErrBadCursor.
func FuzzDecodeSessionCursor(f *testing.F) {
	f.Add(httpx.EncodeCursor(embed.SessionCursor{CreatedAt: time.Unix(1, 2), ID: "0123456789abcdef0123456789abcdef"}))
	f.Add("")
	f.Add("Zm9vOmJhcg")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := embed.DecodeSessionCursor(s)
		if err != nil {
			if !errors.Is(err, httpx.ErrBadCursor) {
				t.Fatalf("cursor %q: %v, want ErrBadCursor", s, err)
			}
			return
		}
		back, err := embed.DecodeSessionCursor(httpx.EncodeCursor(c))
		if err != nil || !back.CreatedAt.Equal(c.CreatedAt) || back.ID != c.ID {
			t.Fatalf("cursor %q does not round-trip: %+v %+v", s, c, back)
		}
	})
}

// FuzzDecodeAddMembers: a membership POST on either catalog decodes strictly to
// {"externalIds": [...]} or is a 4xx, and the ids then pass or fail their rules (1 to
// 100, not empty, bounded, no repeat) with a 400, never anything else.
func FuzzDecodeAddMembers(f *testing.F) {
	for _, s := range []string{`{"externalIds":["a","b"]}`, `{"externalIds":[]}`, `{"externalIds":[" A ","a"]}`, `{"externalIds":[""]}`,
		`{"externalIds":"a"}`, `{"externalIds":[1]}`, `{"externalIds":null}`, `{}`, `{"externalIds":["a"],"x":1}`, `[]`, `null`, `{`,
		`{"externalIds":["` + string(bytes.Repeat([]byte("n"), 300)) + `"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/api/v1/groups/g1/users", "/api/v1/embed-tenants/acme-corp/groups/g1/users"} {
			got := serve(t, "POST", path, "", body)
			if got == nil {
				continue
			}
			ids, err := embed.NormalizeMembers(got.(embed.GroupMembersInput))
			if err != nil {
				if e, ok := errs.As(err); !ok || errs.Status(e.Kind) != 400 || e.Message == "" {
					t.Fatalf("%s %q: validation error %v is not a 400", path, body, err)
				}
				continue
			}
			if len(ids) == 0 || len(ids) > embed.MaxMembersPerRequest {
				t.Fatalf("%s %q: %d ids passed", path, body, len(ids))
			}
		}
	})
}
