package webhooks

import (
	"regexp"
	"slices"
	"strings"

	"github.com/analyticsco/platform/libs/audit"
)

// MaxPatternBytes bounds an event pattern: an action longer than the audit trail's
// longest filter can match nothing.
const MaxPatternBytes = 64

// patternRe is the audit trail's action grammar (GET /api/v1/audit's action filter):
// dot-separated lower-case words, optionally ending in ".*" for every action under them.
var patternRe = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?$`)

// PatternAll matches every action.
const PatternAll = "*"

// ValidPattern reports whether p is an event pattern: "*", an action
// ("embed.session.revoke"), or a prefix ending in ".*" ("workspace.*").
func ValidPattern(p string) bool {
	if p == PatternAll {
		return true
	}
	return len(p) <= MaxPatternBytes && patternRe.MatchString(p)
}

// matchPattern reports whether action matches the pattern p: "*" matches all, "x.y.*"
// every action that starts with "x.y." (not "x.y" itself), anything else exactly.
func matchPattern(p, action string) bool {
	switch {
	case p == PatternAll:
		return true
	case strings.HasSuffix(p, ".*"):
		return strings.HasPrefix(action, p[:len(p)-1])
	default:
		return p == action
	}
}

// Match reports whether ev goes to s: s is enabled and of ev's account, one of its
// patterns matches ev's action, ev is of one of its deployments when it names some (an
// account-level event, of no deployment, then never matches), and ev succeeded unless s
// includes refused operations.
func Match(s Subscription, ev audit.Event) bool {
	if !s.Enabled || s.AccountID != ev.AccountID {
		return false
	}
	if s.DeploymentIDs != nil && (ev.DeploymentID == 0 || !slices.Contains(s.DeploymentIDs, ev.DeploymentID)) {
		return false
	}
	if ev.Outcome.Result != "" && ev.Outcome.Result != audit.Success && !s.IncludeRefused {
		return false
	}
	return slices.ContainsFunc(s.Events, func(p string) bool { return matchPattern(p, ev.Action) })
}
