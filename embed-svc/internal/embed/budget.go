package embed

import (
	"encoding/json"
	"fmt"

	"github.com/analyticsco/platform/libs/errs"
)

// What one user and one session may take of the stores every tenant shares: a user's
// stored attribute values are bounded in total (EMBED_MAX_USER_ATTRIBUTE_BYTES), and a
// session in Redis is bounded by its fields' own caps (MaxSessionBytes).

// ValueBytes is the size of an attribute value as the stores keep it: its JSON decoded
// and encoded again (`1e2` is `100`, spaces go), as every store reads it back.
func ValueBytes(raw json.RawMessage) int64 {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return int64(len(raw))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return int64(len(raw))
	}
	return int64(len(out))
}

// attributeBytesAfter is u's AttributeBytes once upd is applied; u holds upd.Scope's
// values (the values upd overwrites or clears).
func attributeBytesAfter(u ExternalUser, upd UserUpdate) int64 {
	n := u.AttributeBytes
	stored := u.Attributes[upd.Scope]
	for id, v := range upd.SetAttributes {
		if old, ok := stored[id]; ok {
			n -= ValueBytes(old.Value)
		}
		n += ValueBytes(v.Value)
	}
	for _, id := range upd.ClearAttributes {
		if old, ok := stored[id]; ok {
			n -= ValueBytes(old.Value)
		}
	}
	return n
}

// checkUserAttributes refuses an update that grows a user's stored values from before
// to after bytes past the limit: 413 naming it. A user already over it (stored before
// the limit existed, or under a higher one) may still mint and clear values.
func (l Limits) checkUserAttributes(externalID string, before, after int64) error {
	if after > int64(l.UserAttributeBytes) && after > before {
		return errs.TooLargef("user %q would store %d bytes of attribute values, over the limit of %d bytes; clear values (null) or send smaller ones",
			externalID, after, l.UserAttributeBytes)
	}
	return nil
}

// MaxSessionBytes bounds a session as Redis keeps it (its JSON, without the account
// prefix of a few bytes). Every field is bounded: the ids (sid 64, rid 32 characters),
// the deployment and account ids, the tenant (36 characters of a-z0-9-), the branch,
// the external id and the internal username (255 bytes each, at most 6 bytes each once
// JSON-escaped: 1,530), the settings (nine booleans, a locale and a time zone of at most
// maxSettingNameLen bytes), the role, the mint time and the resources (at most
// token.MaxResourceDashboards public ids of 16 base64url characters). The profile and the
// securityContext are in the session's record, the memberships and values on the user.
// TestMaximalSessionFitsItsCap builds the largest session the caps allow.
const MaxSessionBytes = 8 << 10

// EncodeSession is a session as the session stores keep it (JSON). A session over
// MaxSessionBytes is a bug of the caps above: it is refused (a 500 that says so in the
// log), never stored.
func EncodeSession(s Session) ([]byte, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxSessionBytes {
		return nil, fmt.Errorf("embed session of %d bytes over MaxSessionBytes (%d): a field is not bounded", len(raw), MaxSessionBytes)
	}
	return raw, nil
}
