// Package revocation is embed-svc's published Redis key scheme for ending embed tokens
// before they expire, and the check every reader makes. embed-svc writes the markers;
// the gateway checks them on every embed-token request, uncached, so a revocation is
// seen by every replica on the very next request.
//
//	embed:revoked:<sid>      a revoked session (sid: the token's sid claim); its value is
//	                         the revocation time in Unix milliseconds; it lives at least as
//	                         long as the session's token
//	embed:revoked-key:<kid>  a withdrawn signing key (`embed-svc revoke-key`): every token
//	                         it signed is refused while the marker lives (a token lifetime
//	                         plus an hour)
package revocation

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// The key prefixes.
const (
	SessionPrefix    = "embed:revoked:"
	SigningKeyPrefix = "embed:revoked-key:"
)

// SessionKey is the marker of a revoked session.
func SessionKey(sid string) string { return SessionPrefix + sid }

// SigningKeyKey is the marker of a withdrawn signing key.
func SigningKeyKey(kid string) string { return SigningKeyPrefix + kid }

// Revoked reports whether a token of session sid, signed by the key kid ("" when the
// token names none), is revoked: one EXISTS over both markers, one round trip.
func Revoked(ctx context.Context, rdb redis.Cmdable, sid, kid string) (bool, error) {
	marks := []string{SessionKey(sid)}
	if kid != "" {
		marks = append(marks, SigningKeyKey(kid))
	}
	n, err := rdb.Exists(ctx, marks...).Result()
	return n > 0, err
}
