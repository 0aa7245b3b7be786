package app_test

import (
	"fmt"
	"strings"
	"testing"
)

// A listing reads only the page (projected documents in database-sorted
// batches, then the page's items in full), never every child with its meta.
func TestListReadsOnlyThePage(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin, ai := e.bearer("acme", "admin"), e.bearer("acme", "aiBiUser")
	meta := map[string]any{"blob": strings.Repeat("m", 100<<10)}

	t.Run("list-page-of-1-reads-one-full-item", func(t *testing.T) {
		folder := e.mkFolder(t, dep, admin, "big", 0)
		for i := 0; i < 30; i++ {
			r := e.do(t, "POST", depPath(dep, "/workbooks"), admin, map[string]any{"name": fmt.Sprintf("wb-%02d", i), "folderId": folder, "meta": meta})
			if r.Status != 200 {
				t.Fatalf("create: %d %s", r.Status, r.Body)
			}
		}
		e.counter.Reset()
		r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workspace?folderId=%d&first=1", folder)), admin, nil)
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		items := r.Object(t)["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["name"] != "wb-00" {
			t.Fatalf("want the first workbook, got %s", r.Body[:200])
		}
		// 30 children carry 3 MiB of meta; the page needs one of them in full.
		if got := e.counter.ReplyBytes(); got > 400<<10 {
			t.Fatalf("a page of 1 read %d bytes from the database; want at most one item's meta (~100 KiB) plus projections", got)
		}
	})

	t.Run("list-pages-cover-every-child-once-in-order", func(t *testing.T) {
		folder := e.mkFolder(t, dep, admin, "order", 0)
		var want []string
		for i := 0; i < 4; i++ {
			want = append(want, fmt.Sprintf("f-%d", i))
			e.mkFolder(t, dep, admin, fmt.Sprintf("f-%d", i), folder)
		}
		for i := 0; i < 9; i++ {
			kind := "workbooks"
			if i%3 == 0 {
				kind = "reports"
			}
			want = append(want, fmt.Sprintf("i-%d", i))
			e.mkItem(t, dep, admin, kind, fmt.Sprintf("i-%d", i), folder)
		}
		var got []string
		after := ""
		for pages := 0; pages < 20; pages++ {
			r := e.do(t, "GET", depPath(dep, fmt.Sprintf("/workspace?folderId=%d&first=3%s", folder, after)), admin, nil)
			if r.Status != 200 {
				t.Fatalf("list: %d %s", r.Status, r.Body)
			}
			m := r.Object(t)
			for _, it := range m["items"].([]any) {
				got = append(got, it.(map[string]any)["name"].(string))
			}
			pi := m["pageInfo"].(map[string]any)
			if pi["hasNextPage"] != true {
				break
			}
			after = "&after=" + pi["endCursor"].(string)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("pages gave %v, want %v (folders first, then by position, name, id)", got, want)
		}
	})

	t.Run("list-skips-invisible-children-across-batches", func(t *testing.T) {
		dep := e.dep("acme", 1)
		// More private admin folders than one database batch (100), all invisible to ai.
		for i := 0; i < 110; i++ {
			e.mkFolder(t, dep, admin, fmt.Sprintf("private-%03d", i), 0)
		}
		mine := e.mkItem(t, dep, ai, "workbooks", "mine", 0)
		r := e.do(t, "GET", depPath(dep, "/workspace?first=5"), ai, nil)
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		m := r.Object(t)
		items := m["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["id"] != float64(mine) {
			t.Fatalf("want only the caller's workbook %d, got %s", mine, r.Body)
		}
		if m["pageInfo"].(map[string]any)["hasNextPage"] != false {
			t.Fatalf("hasNextPage should be false: %s", r.Body)
		}
	})
}
