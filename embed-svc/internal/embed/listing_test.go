package embed_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// countingRecords counts the session records the store returns to listings.
type countingRecords struct {
	embed.SessionRecordStore
	read atomic.Int64
}

func (c *countingRecords) ListSessionRecords(ctx context.Context, accountID int64, id string, after embed.SessionCursor, now time.Time, limit int) ([]embed.SessionRecord, error) {
	recs, err := c.SessionRecordStore.ListSessionRecords(ctx, accountID, id, after, now, limit)
	c.read.Add(int64(len(recs)))
	return recs, err
}

// countingUsers counts the users the store returns to listings.
type countingUsers struct {
	embed.UserStore
	read atomic.Int64
}

func (c *countingUsers) ListTenantUsers(ctx context.Context, accountID int64, tenant string, afterID int64, limit int) ([]embed.ExternalUser, error) {
	users, err := c.UserStore.ListTenantUsers(ctx, accountID, tenant, afterID, limit)
	c.read.Add(int64(len(users)))
	return users, err
}

// TestFilteredListingsReadAtMostTheScanCap: a filter that matches few of many sessions or
// users makes a page read at most EMBED_MAX_LIST_SCAN of them; the page ends early with
// hasNextPage and a cursor, and following the cursors finds every match.
func TestFilteredListingsReadAtMostTheScanCap(t *testing.T) {
	const scanCap = 40
	ctx := context.Background()
	f := newFixture(t)
	records := &countingRecords{SessionRecordStore: f.store}
	users := &countingUsers{UserStore: f.store}
	f.deps.Records, f.deps.Users = records, users
	f.withLimits(embed.Limits{ListScan: scanCap})
	f.mintIn(t, f.dep, "needle") // the oldest session and the first user
	for i := range 100 {
		f.mintIn(t, f.dep, fmt.Sprintf("hay-%03d", i))
	}
	t.Run("sessions", func(t *testing.T) {
		records.read.Store(0)
		q := embed.SessionQuery{ExternalID: "needle", First: 10}
		var found, pages int
		for {
			page, err := f.svc.ListSessions(ctx, f.adminKey(), q)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			found += len(page.Items)
			if n := records.read.Swap(0); n > scanCap {
				t.Fatalf("a page read %d records, over the cap of %d", n, scanCap)
			}
			if !page.PageInfo.HasNextPage {
				break
			}
			if q.After, _ = embed.DecodeSessionCursor(*page.PageInfo.EndCursor); pages > 10 {
				t.Fatal("the pages do not end")
			}
		}
		if found != 1 || pages != 3 {
			t.Fatalf("found %d in %d pages, want the needle in the third page", found, pages)
		}
	})
	t.Run("tenant-users", func(t *testing.T) {
		users.read.Store(0)
		q := embed.UserQuery{Q: "hay-09", First: 5}
		var found []string
		for pages := 1; ; pages++ {
			page, err := f.svc.ListTenantUsers(ctx, f.adminKey(), "scope-tenant", q)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range page.Items {
				found = append(found, u.ExternalID)
			}
			if n := users.read.Swap(0); n > scanCap {
				t.Fatalf("a page read %d users, over the cap of %d", n, scanCap)
			}
			if !page.PageInfo.HasNextPage || pages > 10 {
				break
			}
			q.After = *page.PageInfo.EndCursor
		}
		if len(found) != 10 || found[0] != "hay-090" || found[9] != "hay-099" {
			t.Fatalf("found %v, want hay-090 to hay-099", found)
		}
	})
}
