package httpx

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/analyticsco/platform/libs/errs"
)

// Pagination: one contract for every list of every service. `first` is 1 to MaxPage
// (DefaultPage when absent or empty); `after` is the opaque cursor of a previous page's
// pageInfo.endCursor (the first page when absent or empty). A bad `first` and a cursor
// the list cannot read are 400 with the same words everywhere.
const (
	DefaultPage = 50
	MaxPage     = 200
)

// PageQuery is a list request's `first` and raw `after`.
type PageQuery struct {
	First int
	After string
}

// ParsePage reads `first` and `after` from the query of r.
func ParsePage(r *http.Request) (PageQuery, error) {
	q := r.URL.Query()
	p := PageQuery{First: DefaultPage, After: q.Get("after")}
	if raw := q.Get("first"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > MaxPage {
			return p, BadFirst(raw)
		}
		p.First = n
	}
	return p, nil
}

// BadFirst is the error of a `first` that is not an integer from 1 to MaxPage.
func BadFirst(raw string) *errs.Error {
	return errs.Invalidf("first must be an integer from 1 to %d, not %q", MaxPage, raw)
}

// ErrBadCursor is what DecodeCursor, a store or a queue returns for an `after` the list
// did not issue: BadCursor's error, so a list returns it as it is.
var ErrBadCursor error = BadCursor()

// BadCursor is the error of an `after` the list cannot read: the one wording of every
// list.
func BadCursor() *errs.Error {
	return errs.Invalidf("after is not a cursor returned by this list")
}

// PageInfo is the cursor state of a page: `endCursor` is null on an empty page.
type PageInfo struct {
	HasNextPage bool    `json:"hasNextPage"`
	EndCursor   *string `json:"endCursor"`
}

// Page is one page of any list, as every list answers it.
type Page[T any] struct {
	Items    []T      `json:"items"`
	PageInfo PageInfo `json:"pageInfo"`
}

// PageOf is the page of items (at most `first`, in list order), more saying whether the
// list goes on after them; its end cursor is EncodeCursor of its last item's key.
func PageOf[T, K any](items []T, more bool, key func(T) K) Page[T] {
	if n := len(items); n > 0 {
		k := key(items[n-1])
		return PageEndingAt(items, more, &k)
	}
	return PageEndingAt[T, K](items, more, nil)
}

// PageEndingAt is the page of items whose end cursor is EncodeCursor of end (nil: no
// cursor), for a list whose page can end past its last item (at the last one it
// examined).
func PageEndingAt[T, K any](items []T, more bool, end *K) Page[T] {
	out := Page[T]{Items: items, PageInfo: PageInfo{HasNextPage: more}}
	if out.Items == nil {
		out.Items = []T{}
	}
	if end != nil {
		c := EncodeCursor(*end)
		out.PageInfo.EndCursor = &c
	}
	return out
}

// Paginate pages items (the whole list, in list order) after the item whose key is
// after (nil: the first page); a key no item has is ErrBadCursor.
func Paginate[T any, K comparable](items []T, key func(T) K, after *K, first int) (Page[T], error) {
	start := 0
	if after != nil {
		start = -1
		for i, it := range items {
			if key(it) == *after {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return Page[T]{}, ErrBadCursor
		}
	}
	end := min(start+first, len(items))
	return PageOf(items[start:end], end < len(items), key), nil
}

// MaxCursorBytes bounds a cursor a client sends back: every list's key encodes far below
// it, so a longer `after` is refused before it is decoded.
const MaxCursorBytes = 4096

// EncodeCursor is the one cursor encoding of every list: base64url (unpadded) of the JSON
// of the list's own key type, the item a page ended at.
func EncodeCursor[K any](k K) string {
	b, err := json.Marshal(k)
	if err != nil {
		panic("httpx: a cursor key that JSON cannot encode: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a cursor EncodeCursor[K] made. Anything else (empty, not base64url,
// null, not the JSON of a K, with unknown fields or trailing data) is ErrBadCursor; the list
// still checks that the key is one it could have issued.
func DecodeCursor[K any](s string) (K, error) {
	var k K
	if len(s) > MaxCursorBytes {
		return k, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return k, ErrBadCursor
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k); err != nil {
		var zero K
		return zero, ErrBadCursor
	}
	if _, err := dec.Token(); err == nil {
		var zero K
		return zero, ErrBadCursor
	}
	return k, nil
}

// AfterCursor decodes a list request's `after`: nil for the first page, ErrBadCursor for a
// cursor that is not a K.
func AfterCursor[K any](after string) (*K, error) {
	if after == "" {
		return nil, nil
	}
	k, err := DecodeCursor[K](after)
	if err != nil {
		return nil, err
	}
	return &k, nil
}
