package memstore

import (
	"context"
	"fmt"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// keyHolder is the item of type typ of deployment deploymentID holding key, or nil ("" is no key
// and held by nothing): a live item, or one trashed with a folder, whose key stays held
// while it is in the trash.
func (s *Store) keyHolder(deploymentID int64, typ workspace.ItemType, key string) *record {
	if key == "" {
		return nil
	}
	for _, r := range s.items {
		if (!r.deleted || r.heldInTrash) && r.item.DeploymentID == deploymentID && r.item.Type == typ && r.item.Key == key {
			return r
		}
	}
	return nil
}

// ItemsByKey returns the live items of type typ among keys, by key.
func (s *Store) ItemsByKey(ctx context.Context, deploymentID int64, typ workspace.ItemType, keys []string, parts workspace.Parts) (map[string]*workspace.Item, error) {
	if len(keys) > workspace.MaxKeysPerRead {
		return nil, fmt.Errorf("items by key: %d keys, at most %d per read", len(keys), workspace.MaxKeysPerRead)
	}
	if err := s.begin(ctx, "ItemsByKey"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make(map[string]*workspace.Item, len(keys))
	for _, k := range keys {
		if r := s.keyHolder(deploymentID, typ, k); r != nil && !r.deleted {
			out[k] = withParts(&r.item, parts)
		}
	}
	return out, nil
}
