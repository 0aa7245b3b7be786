package httpx

import (
	"errors"
	"net/http"
	"strconv"
)

// Pagination: one contract for every list of every service. `first` is 1 to MaxPage
// (DefaultPage when absent or empty); `after` is the opaque cursor of a previous page's
// pageInfo.endCursor (the first page when absent or empty). A bad `first` and a cursor
// the list cannot read are 400 with the same words everywhere.
const (
	DefaultPage = 50
	MaxPage     = 200
)

// Page is a list request's `first` and raw `after`.
type Page struct {
	First int
	After string
}

// ParsePage reads `first` and `after` from the query of r.
func ParsePage(r *http.Request) (Page, error) {
	q := r.URL.Query()
	p := Page{First: DefaultPage, After: q.Get("after")}
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
func BadFirst(raw string) *Error {
	return Errorf(http.StatusBadRequest, "first must be an integer from 1 to %d, not %q", MaxPage, raw)
}

// ErrBadCursor is what a store or a queue returns for an `after` it did not issue; a
// service answers it with BadCursor.
var ErrBadCursor = errors.New("after is not a cursor returned by this list")

// BadCursor is the error of an `after` the list cannot read: the one wording of every
// list.
func BadCursor() *Error {
	return Errorf(http.StatusBadRequest, "%s", ErrBadCursor.Error())
}
