package embed_test

import (
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

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
