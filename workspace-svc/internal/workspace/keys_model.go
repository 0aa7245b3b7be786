package workspace

import (
	"context"
	"errors"
	"regexp"

	"github.com/analyticsco/platform/libs/errs"
)

// KeyPattern is the grammar of an item's key: 1 to MaxKeyLength lower-case ASCII
// letters, digits, '_', '.' and '-', starting and ending with a letter or a digit. It
// has no '/', so a key is one path segment (PUT .../by-key/{key}) as it is.
const KeyPattern = `^[a-z0-9]([a-z0-9_.-]{0,126}[a-z0-9])?$`

// MaxKeyLength is the longest key.
const MaxKeyLength = 128

var keyRE = regexp.MustCompile(KeyPattern)

// ValidKey says why k is not a key, or nil when it is one.
func ValidKey(k string) error {
	switch {
	case k == "":
		return errs.Invalidf("key must not be empty").WithCode(errs.CodeInvalidKey)
	case len(k) > MaxKeyLength:
		return errs.Invalidf("key is %d characters long; at most %d are allowed", len(k), MaxKeyLength).WithCode(errs.CodeInvalidKey)
	case !keyRE.MatchString(k):
		return errs.Invalidf("key %q does not match %s: lower-case letters, digits, '_', '.' and '-', starting and ending with a letter or a digit",
			k, KeyPattern).WithCode(errs.CodeInvalidKey)
	}
	return nil
}

// MaxKeysPerRead is how many keys one ItemsByKey call may ask for.
const MaxKeysPerRead = 100

// ErrKeyTaken is a write that would give a live item a key that a live item of the same
// deployment and type holds: nothing of the write is stored.
var ErrKeyTaken = errors.New("the key is held by another live item of the type")

// KeyStore finds items by key.
type KeyStore interface {
	// ItemsByKey returns the live items of type typ among keys (at most
	// MaxKeysPerRead), by key, with the large parts that parts names.
	ItemsByKey(ctx context.Context, dep int64, typ ItemType, keys []string, parts Parts) (map[string]*Item, error)
}
