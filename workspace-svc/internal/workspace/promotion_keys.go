package workspace

import (
	"context"
	"errors"

	"github.com/analyticsco/platform/libs/errs"
)

// findTargetsByKey finds, for the source workbook and reports that carry a key and have
// no linked target, the live item of the target deployment that holds that key: content
// kept as code converges on the same items whichever way it first got there.
func (s *service) findTargetsByKey(ctx context.Context, pl *promotionPlan) error {
	deploymentID := pl.rt.deploymentID
	if pl.target == nil && pl.src.wb.Key != "" {
		got, err := s.store.ItemsByKey(ctx, deploymentID, TypeWorkbook, []string{pl.src.wb.Key}, AllParts)
		if err != nil {
			return err
		}
		pl.target = got[pl.src.wb.Key]
	}
	var keys []string
	for i, src := range pl.src.reports {
		if pl.tReport[i] == nil && src.Key != "" {
			keys = append(keys, src.Key)
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), MaxKeysPerRead)
		got, err := s.store.ItemsByKey(ctx, deploymentID, TypeReport, keys[:n], PartMeta|PartCalculatedFields)
		if err != nil {
			return err
		}
		for i, src := range pl.src.reports {
			if d := got[src.Key]; pl.tReport[i] == nil && src.Key != "" && d != nil {
				pl.tReport[i] = d
			}
		}
		keys = keys[n:]
	}
	return nil
}

// promotedKey gives a target item created by a promotion its source's key.
func promotedKey(src, it *Item) { it.Key = src.Key }

// insertKeyError is the answer to an insert refused because its key is a live item's
// (nil for any other error).
func insertKeyError(it *Item, err error) error {
	if !errors.Is(err, ErrKeyTaken) {
		return nil
	}
	return errs.New(errs.Conflict, "a %s of deployment %d already holds key %q; promote again to update it", it.Type.lower(), it.DeploymentID, it.Key).WithCode(errs.CodeKeyTaken)
}
