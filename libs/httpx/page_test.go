package httpx

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/errs"
)

type testKey struct {
	At time.Time `json:"t"`
	ID string    `json:"i"`
}

func TestCursorRoundTripsTheListKey(t *testing.T) {
	k := testKey{At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), ID: "abc"}
	got, err := DecodeCursor[testKey](EncodeCursor(k))
	if err != nil || !got.At.Equal(k.At) || got.ID != k.ID {
		t.Fatalf("round trip of %+v = %+v, %v", k, got, err)
	}
	n, err := DecodeCursor[int64](EncodeCursor(int64(42)))
	if err != nil || n != 42 {
		t.Fatalf("round trip of 42 = %d, %v", n, err)
	}
}

func TestCursorRejectsWhatItDidNotIssue(t *testing.T) {
	good := EncodeCursor(testKey{ID: "abc"})
	b64 := base64.RawURLEncoding.EncodeToString
	for name, s := range map[string]string{
		"empty":          "",
		"not base64url":  "!!!",
		"padded":         good + "=",
		"tampered":       good[:len(good)-2] + "zz",
		"not JSON":       b64([]byte("abc")),
		"null":           b64([]byte("null")),
		"wrong type":     b64([]byte(`"abc"`)),
		"unknown field":  b64([]byte(`{"i":"a","x":1}`)),
		"trailing data":  b64([]byte(`{"i":"a"}{}`)),
		"truncated JSON": b64([]byte(`{"i":"a"`)),
		"over the bound": b64([]byte(`{"i":"` + strings.Repeat("a", MaxCursorBytes) + `"}`)),
	} {
		if _, err := DecodeCursor[testKey](s); !errors.Is(err, ErrBadCursor) {
			t.Errorf("%s: DecodeCursor(%q) = %v, want ErrBadCursor", name, s, err)
		}
	}
}

func TestPaginateGoesOnAfterTheCursorsItem(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e"}
	id := func(s string) string { return s }
	var seen []string
	var after *string
	for pages := 0; ; pages++ {
		if pages > len(items) {
			t.Fatalf("paging did not end: %v", seen)
		}
		p, err := Paginate(items, id, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, p.Items...)
		if !p.PageInfo.HasNextPage {
			break
		}
		if after, err = AfterCursor[string](*p.PageInfo.EndCursor); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != len(items) || seen[0] != "a" || seen[4] != "e" {
		t.Fatalf("pages gave %v, want %v", seen, items)
	}
	gone := "zz"
	if _, err := Paginate(items, id, &gone, 2); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("a key no item has = %v, want ErrBadCursor", err)
	}
	empty, err := Paginate([]string{}, id, nil, 2)
	if err != nil || empty.Items == nil || empty.PageInfo.EndCursor != nil || empty.PageInfo.HasNextPage {
		t.Fatalf("an empty list's page = %+v, %v; want items [] and endCursor null", empty, err)
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(EncodeCursor(testKey{ID: "abc"}))
	f.Add("")
	f.Add("bnVsbA")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := DecodeCursor[testKey](s)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("DecodeCursor(%q) = %v, want ErrBadCursor", s, err)
			}
			return
		}
		back, err := DecodeCursor[testKey](EncodeCursor(k))
		if err != nil || back.ID != k.ID || !back.At.Equal(k.At) {
			t.Fatalf("a decoded key %+v does not round trip: %+v, %v", k, back, err)
		}
	})
}

func TestBadCursorAnswersTheOneBadRequest(t *testing.T) {
	_, err := DecodeCursor[string]("!!!")
	status, code, message, ok := errs.Answer(fmt.Errorf("list jobs: %w", err))
	want := errs.BodyOf(BadCursor())
	if !ok || status != http.StatusBadRequest || code != want.Code || message != want.Message {
		t.Fatalf("a bad cursor answers %d %s %q, want 400 %s %q", status, code, message, want.Code, want.Message)
	}
}
