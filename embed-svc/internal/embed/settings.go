package embed

import (
	"context"
	"net/http"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// shippedLanguages are the UI languages the embed ships; a locale resolves when its
// base language is one of them.
var shippedLanguages = map[string]bool{"en": true, "de": true, "fr": true, "es": true, "it": true, "pt": true, "nl": true, "ja": true, "ko": true, "zh": true}

// ResolveSettings layers the session's overrides over the account-wide embed settings
// over the built-in defaults, exactly as the spec's table says.
func ResolveSettings(s *SessionSettings, acct AccountSettings) ResolvedSettings {
	if s == nil {
		s = &SessionSettings{}
	}
	pick := func(values ...*bool) bool {
		for _, v := range values {
			if v != nil {
				return *v
			}
		}
		return true // every switch defaults to allowed/shown
	}
	r := ResolvedSettings{
		AllowAI:                     pick(s.AllowAI, acct.AllowAI),
		ShowDashboardChat:           pick(s.ShowDashboardChat, acct.ShowDashboardChat),
		ShowWorkbookChat:            pick(s.ShowWorkbookChat, acct.ShowWorkbookChat),
		ShowAIWidgets:               pick(s.ShowAIWidgets, acct.ShowAIWidgets),
		AllowChatWorkspaceAuthoring: pick(s.AllowChatWorkspaceAuthoring),
		ShowWorkbookShare:           pick(s.ShowWorkbookShare),
		ShowDashboardSettings:       pick(s.ShowDashboardSettings),
		ShowMemberNames:             pick(s.ShowMemberNames),
		ShowGroupByCube:             pick(s.ShowGroupByCube),
	}
	// allowAi is the master switch: it outranks the AI show* keys.
	if !r.AllowAI {
		r.ShowDashboardChat, r.ShowWorkbookChat, r.ShowAIWidgets = false, false, false
	}
	r.Locale = firstUsable(ResolveLocale, s.Locale, acct.Locale)
	r.Timezone = firstUsable(ResolveTimezone, s.Timezone, acct.Timezone)
	return r
}

func firstUsable(resolve func(string) (string, bool), values ...*string) *string {
	for _, v := range values {
		if v == nil {
			continue
		}
		if out, ok := resolve(*v); ok {
			return &out
		}
	}
	return nil
}

// maxSettingNameLen bounds a usable locale or time zone (BCP-47 tags of a language and a
// region are a few characters, IANA names at most about 30): a longer one is not usable
// and falls through, as the spec has unusable values do.
const maxSettingNameLen = 64

// ResolveLocale returns the canonical BCP-47 tag when it resolves to a shipped language.
func ResolveLocale(s string) (string, bool) {
	if len(s) > maxSettingNameLen {
		return "", false
	}
	tag, err := language.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", false
	}
	base, conf := tag.Base()
	if conf == language.No || !shippedLanguages[base.String()] || len(tag.String()) > maxSettingNameLen {
		return "", false
	}
	return tag.String(), true
}

// ResolveTimezone returns an IANA zone name when it is one; bare offsets, "Local" and
// unknown names are not usable.
func ResolveTimezone(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxSettingNameLen || s == "Local" || strings.ContainsAny(s, "+") || strings.HasPrefix(s, "-") || strings.Contains(s, "..") {
		return "", false
	}
	if _, err := time.LoadLocation(s); err != nil {
		return "", false
	}
	return s, true
}

func settingsView(a AccountSettings) AccountSettingsView {
	return AccountSettingsView(a)
}

// GetAccountSettings returns the account-wide layer of the settings cascade.
func (s *service) GetAccountSettings(ctx context.Context, p *identity.Principal) (AccountSettingsView, error) {
	if err := requireAccountAdmin(p); err != nil {
		return AccountSettingsView{}, err
	}
	a, err := s.d.Catalog.AccountSettings(ctx, p.Account.ID)
	if err != nil {
		return AccountSettingsView{}, storeErr(err)
	}
	return settingsView(a), nil
}

// PutAccountSettings replaces the account-wide layer: a key absent or null inherits the
// built-in default. locale must resolve to a shipped language and timezone be an IANA
// zone, as in generate-session; they are stored in canonical form.
func (s *service) PutAccountSettings(ctx context.Context, p *identity.Principal, in AccountSettings) (_ AccountSettingsView, err error) {
	ev := audit.New(p, ActionSettingsUpdate, audit.Target{Type: TargetAccountSettings})
	defer func() { s.record(ctx, &ev, err, http.StatusOK) }()
	if err := requireAccountAdmin(p); err != nil {
		return AccountSettingsView{}, err
	}
	if err := keyReach(p).account("change the account's embed settings"); err != nil {
		return AccountSettingsView{}, err
	}
	if in.Locale != nil {
		l, ok := ResolveLocale(*in.Locale)
		if !ok {
			return AccountSettingsView{}, errs.Invalidf("locale %q is not a BCP-47 tag of a supported language", *in.Locale)
		}
		in.Locale = &l
	}
	if in.Timezone != nil {
		tz, ok := ResolveTimezone(*in.Timezone)
		if !ok {
			return AccountSettingsView{}, errs.Invalidf("timezone %q is not an IANA time zone name", *in.Timezone)
		}
		in.Timezone = &tz
	}
	if err := s.d.Catalog.SetAccountSettings(ctx, p.Account.ID, in); err != nil {
		return AccountSettingsView{}, storeErr(err)
	}
	ev.Details = settingsDetails(in)
	return settingsView(in), nil
}
