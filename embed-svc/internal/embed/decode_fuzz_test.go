package embed_test

import (
	"errors"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/httpx"
)

// FuzzDecodeGenerateSessionRequest: whatever a client sends, decoding and validation
// end in a 4xx client error or a valid request, never a panic or a server error.
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
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := embed.DecodeGenerateSessionRequest(body)
		if err != nil {
			var he *httpx.Error
			if !errors.As(err, &he) || he.Status < 400 || he.Status > 499 {
				t.Fatalf("decode error %v is not a client error", err)
			}
			return
		}
		if err := embed.ValidateGenerateSession(req); err != nil {
			var de *embed.Error
			if !errors.As(err, &de) || embed.StatusOf(de.Kind) != 400 {
				t.Fatalf("validation error %v is not a 400", err)
			}
		}
	})
}

func TestResolveSettingsLayering(t *testing.T) {
	f, tr := false, true
	de, xx, berlin, offset := "de-DE", "xx-YY", "Europe/Berlin", "+02:00"
	tests := []struct {
		name    string
		session *embed.SessionSettings
		account embed.AccountSettings
		want    embed.ResolvedSettings
	}{
		{"defaults-all-on", nil, embed.AccountSettings{}, embed.ResolvedSettings{AllowAI: true, ShowDashboardChat: true, ShowWorkbookChat: true, ShowAIWidgets: true,
			AllowChatWorkspaceAuthoring: true, ShowWorkbookShare: true, ShowDashboardSettings: true, ShowMemberNames: true, ShowGroupByCube: true}},
		{"account-ai-off-inherited-and-outranks-show-keys", nil, embed.AccountSettings{AllowAI: &f}, embed.ResolvedSettings{AllowAI: false,
			AllowChatWorkspaceAuthoring: true, ShowWorkbookShare: true, ShowDashboardSettings: true, ShowMemberNames: true, ShowGroupByCube: true}},
		{"session-pins-over-account", &embed.SessionSettings{AllowAI: &tr, ShowWorkbookShare: &f, Locale: &de}, embed.AccountSettings{AllowAI: &f, ShowAIWidgets: &f, Locale: &xx, Timezone: &berlin},
			embed.ResolvedSettings{AllowAI: true, ShowDashboardChat: true, ShowWorkbookChat: true, ShowAIWidgets: false, AllowChatWorkspaceAuthoring: true,
				ShowWorkbookShare: false, ShowDashboardSettings: true, ShowMemberNames: true, ShowGroupByCube: true, Locale: &de, Timezone: &berlin}},
		{"unusable-locale-and-offset-fall-through", &embed.SessionSettings{Locale: &xx, Timezone: &offset}, embed.AccountSettings{Locale: &de, Timezone: &berlin},
			embed.ResolvedSettings{AllowAI: true, ShowDashboardChat: true, ShowWorkbookChat: true, ShowAIWidgets: true, AllowChatWorkspaceAuthoring: true,
				ShowWorkbookShare: true, ShowDashboardSettings: true, ShowMemberNames: true, ShowGroupByCube: true, Locale: &de, Timezone: &berlin}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := embed.ResolveSettings(tc.session, tc.account)
			if str(got.Locale) != str(tc.want.Locale) || str(got.Timezone) != str(tc.want.Timezone) {
				t.Fatalf("locale/timezone = %q/%q, want %q/%q", str(got.Locale), str(got.Timezone), str(tc.want.Locale), str(tc.want.Timezone))
			}
			got.Locale, got.Timezone, tc.want.Locale, tc.want.Timezone = nil, nil, nil, nil
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
