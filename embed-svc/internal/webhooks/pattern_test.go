package webhooks

import (
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/audit"
)

func TestValidPattern(t *testing.T) {
	for _, p := range []string{"*", "embed.session.revoke", "workspace.*", "workspace.folder.*", "dbt_sync.run.finish", "a"} {
		if !ValidPattern(p) {
			t.Errorf("ValidPattern(%q) = false, want true", p)
		}
	}
	for _, p := range []string{"", ".*", "*.x", "workspace.", "workspace..folder", "Workspace.folder", "workspace.*.create",
		"workspace.**", "workspace*", " workspace", "9x", "x.9", "x-y", strings.Repeat("a", MaxPatternBytes+1), "**"} {
		if ValidPattern(p) {
			t.Errorf("ValidPattern(%q) = true, want false", p)
		}
	}
	if !ValidPattern(strings.Repeat("a", MaxPatternBytes)) {
		t.Error("a pattern of MaxPatternBytes is refused")
	}
}

func TestMatch(t *testing.T) {
	ok := audit.Succeeded(200)
	refused := audit.Failed(403, "forbidden")
	ev := func(dep int64, action string, out audit.Outcome) audit.Event {
		return audit.Event{AccountID: 7, DeploymentID: dep, Action: action, Outcome: out}
	}
	all := Subscription{AccountID: 7, Enabled: true, Events: []string{"*"}}
	deps := Subscription{AccountID: 7, Enabled: true, Events: []string{"workspace.folder.*", "embed.session.revoke"}, DeploymentIDs: []int64{3, 4}}
	cases := []struct {
		name string
		s    Subscription
		ev   audit.Event
		want bool
	}{
		{"star matches an account-level event", all, ev(0, "account.member.add", ok), true},
		{"star matches a deployment's event", all, ev(9, "workspace.folder.create", ok), true},
		{"disabled never matches", func() Subscription { s := all; s.Enabled = false; return s }(), ev(0, "x", ok), false},
		{"other account never matches", all, audit.Event{AccountID: 8, Action: "x", Outcome: ok}, false},
		{"refused skipped by default", all, ev(0, "x", refused), false},
		{"refused included when asked", func() Subscription { s := all; s.IncludeRefused = true; return s }(), ev(0, "x", refused), true},
		{"no outcome result counts as success", all, audit.Event{AccountID: 7, Action: "x"}, true},
		{"prefix matches below it", deps, ev(3, "workspace.folder.create", ok), true},
		{"prefix does not match its own stem", deps, ev(3, "workspace.folder", ok), false},
		{"prefix does not match a longer word", deps, ev(3, "workspace.folderx.create", ok), false},
		{"exact action", deps, ev(4, "embed.session.revoke", ok), true},
		{"exact action only", deps, ev(4, "embed.session.revoke_all", ok), false},
		{"other deployment", deps, ev(5, "embed.session.revoke", ok), false},
		{"account-level event never matches a deployment filter", deps, ev(0, "embed.session.revoke", ok), false},
		{"empty deployment list matches nothing", func() Subscription { s := all; s.DeploymentIDs = []int64{}; return s }(), ev(3, "x", ok), false},
		{"no patterns match nothing", Subscription{AccountID: 7, Enabled: true}, ev(0, "x", ok), false},
	}
	for _, c := range cases {
		if got := Match(c.s, c.ev); got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
}
