package workspace

import "context"

// findTargetsByKey finds, for the source workbook and reports that carry a key and
// have no linked target, the live item of the target that holds that key.
func (s *service) findTargetsByKey(ctx context.Context, pl *promotionPlan) error { return nil }

// promotedKey gives a target item created by a promotion its source's key.
func promotedKey(src, it *Item) {}

// insertKeyError is the answer to an insert refused because its key is a live item's.
func insertKeyError(it *Item, err error) error { return nil }
