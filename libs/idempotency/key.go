// Package idempotency lets a client retry a non-idempotent POST safely: the same
// Idempotency-Key (draft-ietf-httpapi-idempotency-key-header) with the same request
// answers the first answer again without acting. Records live in a Store (MongoDB in
// each service's own database), scoped to the account and the credential that sent them.
package idempotency

import (
	"errors"
	"fmt"
	"strings"
)

// Header is the request header that names the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks an answer that is a replay of the key's first answer.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLength is the longest key accepted, in characters.
const MaxKeyLength = 255

// ErrInvalidKey is the error of a key that is not 1 to MaxKeyLength visible ASCII
// characters, bare or as a structured-field string.
var ErrInvalidKey = errors.New("invalid idempotency key")

// ParseKey reads a header value: a structured-field string ("..." with \" and \\
// escapes) or a bare token, whose content is 1 to 255 visible ASCII characters
// (0x21-0x7E). Surrounding spaces are ignored, as HTTP field values allow.
func ParseKey(value string) (string, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return "", fmt.Errorf("%w: it is empty; send 1 to %d visible ASCII characters", ErrInvalidKey, MaxKeyLength)
	}
	key := v
	if v[0] == '"' {
		var b strings.Builder
		closed := false
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '\\':
				i++
				if i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", fmt.Errorf(`%w: a quoted key escapes only \" and \\`, ErrInvalidKey)
				}
				b.WriteByte(v[i])
			case c == '"':
				if i != len(v)-1 {
					return "", fmt.Errorf("%w: characters after the closing quote", ErrInvalidKey)
				}
				closed = true
			default:
				b.WriteByte(c)
			}
			if b.Len() > MaxKeyLength {
				break
			}
		}
		if !closed && b.Len() <= MaxKeyLength {
			return "", fmt.Errorf("%w: a quoted key without its closing quote", ErrInvalidKey)
		}
		key = b.String()
		if key == "" {
			return "", fmt.Errorf("%w: it is empty; send 1 to %d visible ASCII characters", ErrInvalidKey, MaxKeyLength)
		}
	}
	if len(key) > MaxKeyLength {
		return "", fmt.Errorf("%w: longer than %d characters", ErrInvalidKey, MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("%w: character %d is not visible ASCII (0x21-0x7E)", ErrInvalidKey, i+1)
		}
	}
	return key, nil
}
