package dbtsync

import (
	"encoding/base64"

	"github.com/analyticsco/platform/libs/httpx"
)

// paginate pages items (in list order) after the item whose key is the cursor; a page's
// end cursor is base64url of its last item's key (the transport decodes it back).
func paginate[T any](items []T, key func(T) string, pg PageRequest) (Page[T], error) {
	start := 0
	if pg.After != "" {
		start = -1
		for i, it := range items {
			if key(it) == pg.After {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return Page[T]{}, httpx.BadCursor()
		}
	}
	end := min(start+pg.First, len(items))
	out := Page[T]{Items: items[start:end]}
	if out.Items == nil {
		out.Items = []T{}
	}
	if end < len(items) {
		out.PageInfo.HasNextPage = true
	}
	if end > start {
		c := base64.RawURLEncoding.EncodeToString([]byte(key(items[end-1])))
		out.PageInfo.EndCursor = &c
	}
	return out, nil
}
