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
	ItemsByKey(ctx context.Context, deploymentID int64, typ ItemType, keys []string, parts Parts) (map[string]*Item, error)
}

// keyFree answers key_taken when a live item of typ holds key (one read by kslot_1); the
// store decides races, this spares a create that would be refused its writes.
func (s *service) keyFree(ctx context.Context, deploymentID int64, typ ItemType, key string) error {
	if key == "" {
		return nil
	}
	held, err := s.store.ItemsByKey(ctx, deploymentID, typ, []string{key}, 0)
	if err != nil {
		return err
	}
	if held[key] != nil {
		return keyTaken(typ, key)
	}
	return nil
}

// checkVersion answers version_conflict when want is set and d is at another version.
func checkVersion(d *Item, want *int64) error {
	if want != nil && *want != d.Version {
		return versionConflict(d.Type, d.ID, *want, d.Version)
	}
	return nil
}

// keyChange is the ItemUpdate.Key for a requested key k on d: nil when none is asked for
// or d has it already; key_immutable when d has another.
func keyChange(d *Item, k *string) (*string, error) {
	switch {
	case k == nil || *k == d.Key:
		return nil, nil
	case d.Key != "":
		return nil, errs.New(errs.Conflict, "%s %d has the key %q; a key is set once and never changed", d.Type.lower(), d.ID, d.Key).
			WithCode(errs.CodeKeyImmutable)
	}
	return k, nil
}

// updateRefused tells why a conditional update met no item: the version moved on
// (version_conflict) or the item moved or went away.
func (s *service) updateRefused(ctx context.Context, deploymentID int64, typ ItemType, id int64, want *int64) error {
	heads, err := s.store.Items(ctx, deploymentID, []int64{id}, 0)
	if err != nil {
		return err
	}
	if d := heads[id]; d != nil && d.Type == typ && want != nil && d.Version != *want {
		return versionConflict(typ, id, *want, d.Version)
	}
	return errs.Conflictf("%s %d was moved or deleted during the change; retry", typ.lower(), id)
}

// renderKey renders an item's key (null: none).
func renderKey(d *Item) *string {
	if d.Key == "" {
		return nil
	}
	k := d.Key
	return &k
}
