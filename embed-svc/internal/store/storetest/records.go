package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// recordCases are the contract of embed.SessionRecordStore.
var recordCases = map[string]func(*testing.T, Durable){
	"a-record-is-read-by-sid-in-any-account":     recordBySID,
	"records-list-newest-first-filtered-by-page": recordsListed,
	"purged-records-go":                          recordsByState,
	"revocable-records-come-in-batches":          revocableBatches,
	"a-record-keeps-what-the-session-shows":      recordContent,
}

// recordContent: a record keeps the session's profile and securityContext (as sent,
// byte for byte); reading it by sid returns them, a listing leaves them out.
func recordContent(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	sc := json.RawMessage(`{"region": "north", "ids": [1, 2.50]}`)
	r := record(acc, at(0), func(r *embed.SessionRecord) {
		r.Profile = &embed.SessionProfile{Email: ptr("a@example.com"), Picture: ptr("https://cdn.example.com/a.png")}
		r.SecurityContext = sc
	})
	insert(t, s, r)
	got, err := s.SessionRecordBySID(ctx, r.SID)
	if err != nil || !reflect.DeepEqual(got.Profile, r.Profile) || string(got.SecurityContext) != string(sc) {
		t.Fatalf("by sid: profile %+v securityContext %s (%v)", got.Profile, got.SecurityContext, err)
	}
	listed, err := s.ListSessionRecords(ctx, acc, "", embed.SessionCursor{}, at(0), 10)
	if err != nil || len(listed) != 1 || listed[0].Profile != nil || listed[0].SecurityContext != nil {
		t.Fatalf("a listing reads the record's content: %+v %v", listed, err)
	}
}

// HexID is n random bytes in hex: a fresh id.
func HexID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// record is a session record of acc created at created, live for a day.
func record(acc int64, created time.Time, mod func(*embed.SessionRecord)) embed.SessionRecord {
	ext := "ext-" + HexID(4)
	r := embed.SessionRecord{ID: HexID(16), AccountID: acc, SID: HexID(32), Tenant: "north-tenant", DeploymentID: 7, Branch: "main",
		User:      embed.SessionRecordUser{Kind: "external", ID: 1, ExternalID: &ext},
		CreatedAt: created, PendingUntil: created.Add(embed.SessionIDTTL), ExpiresAt: created.Add(embed.TokenLifetime)}
	if mod != nil {
		mod(&r)
	}
	return r
}

func insert(t *testing.T, s Durable, rs ...embed.SessionRecord) {
	t.Helper()
	for _, r := range rs {
		if err := s.InsertSessionRecord(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func recordIDs(rs []embed.SessionRecord) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func recordBySID(t *testing.T, s Durable) {
	ctx := context.Background()
	r := record(Account(), at(0), nil)
	insert(t, s, r)
	got, err := s.SessionRecordBySID(ctx, r.SID)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("by sid:\n%+v\nwant\n%+v (%v)", got, r, err)
	}
	if err := s.InsertSessionRecord(ctx, record(Account(), at(0), func(x *embed.SessionRecord) { x.SID = r.SID })); !errors.Is(err, embed.ErrDuplicate) {
		t.Fatalf("a second record with the sid: %v", err)
	}
	if _, err := s.SessionRecordBySID(ctx, HexID(32)); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("an unknown sid: %v", err)
	}
}

func recordsListed(t *testing.T, s Durable) {
	ctx, acc, now := context.Background(), Account(), at(0)
	var rs []embed.SessionRecord
	for i := range 5 {
		rs = append(rs, record(acc, now.Add(time.Duration(i-10)*time.Second), func(r *embed.SessionRecord) {
			if i%2 == 1 {
				r.Tenant, r.DeploymentID = "south-tenant", 8
			}
		}))
	}
	admin := "acme-admin"
	internal := record(acc, now.Add(-time.Second), func(r *embed.SessionRecord) {
		r.User = embed.SessionRecordUser{Kind: "internal", ID: 9, Username: &admin}
	})
	insert(t, s, append(rs, internal, record(Account(), now, nil))...)
	list := func(id string, after embed.SessionCursor, limit int) []string {
		t.Helper()
		got, err := s.ListSessionRecords(ctx, acc, id, after, now, limit)
		if err != nil {
			t.Fatal(err)
		}
		return recordIDs(got)
	}
	newest := []string{internal.ID, rs[4].ID, rs[3].ID, rs[2].ID, rs[1].ID, rs[0].ID}
	if got := list("", embed.SessionCursor{}, 10); !reflect.DeepEqual(got, newest) {
		t.Fatalf("newest first: %v, want %v", got, newest)
	}
	page := list("", embed.SessionCursor{}, 2)
	after := embed.SessionCursor{CreatedAt: rs[4].CreatedAt, ID: rs[4].ID}
	if got := list("", after, 2); !reflect.DeepEqual(page, newest[:2]) || !reflect.DeepEqual(got, newest[2:4]) {
		t.Fatalf("pages %v then %v", page, got)
	}
	if got := list(rs[1].ID, embed.SessionCursor{}, 10); !reflect.DeepEqual(got, []string{rs[1].ID}) {
		t.Fatalf("by id: %v", got)
	}
	// A bulk revoke's selectors are the store's to apply (the listing filters the records
	// it reads itself).
	for name, c := range map[string]struct {
		q    embed.SessionQuery
		want []string
	}{
		"tenant":      {embed.SessionQuery{Tenant: "south-tenant"}, []string{rs[3].ID, rs[1].ID}},
		"deployment":  {embed.SessionQuery{DeploymentID: 7}, []string{internal.ID, rs[4].ID, rs[2].ID, rs[0].ID}},
		"deployments": {embed.SessionQuery{Deployments: []int64{8, 99}}, []string{rs[3].ID, rs[1].ID}},
		"external":    {embed.SessionQuery{ExternalID: *rs[2].User.ExternalID}, []string{rs[2].ID}},
		"internal":    {embed.SessionQuery{InternalID: admin}, []string{internal.ID}},
		"id":          {embed.SessionQuery{ID: rs[1].ID}, []string{rs[1].ID}},
		"none":        {embed.SessionQuery{ExternalID: admin}, []string{}},
	} {
		got := []string{}
		if err := s.EachRevocable(ctx, acc, c.q, now, 100, func(batch []embed.SessionRecord) error {
			got = append(got, recordIDs(batch)...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("revocable by %s: %v, want %v", name, got, want)
		}
	}
}

func recordsByState(t *testing.T, s Durable) {
	ctx, acc, now := context.Background(), Account(), at(0)
	pending := record(acc, now.Add(-time.Minute), nil)
	exchangedLong := record(acc, now.Add(-time.Hour), nil)
	expired := record(acc, now.Add(-25*time.Hour), nil)
	purged := record(acc, now.Add(-embed.TokenLifetime-embed.DefaultSessionRetention-time.Hour), nil)
	insert(t, s, pending, exchangedLong, expired, purged)
	got, err := s.ListSessionRecords(ctx, acc, "", embed.SessionCursor{}, now, 10)
	if want := []string{pending.ID, exchangedLong.ID, expired.ID}; err != nil || !reflect.DeepEqual(recordIDs(got), want) {
		t.Errorf("listed %v, want %v without the purged one (%v)", recordIDs(got), want, err)
	}
}

func revocableBatches(t *testing.T, s Durable) {
	ctx, acc, now := context.Background(), Account(), at(0)
	var want []string
	for i := range 7 {
		r := record(acc, now.Add(-time.Duration(i)*time.Minute), nil)
		want = append(want, r.ID)
		insert(t, s, r)
	}
	insert(t, s, record(acc, now.Add(-30*time.Hour), nil), record(acc, now, func(r *embed.SessionRecord) { r.Tenant = "south-tenant" }))
	var sizes []int
	var got []string
	err := s.EachRevocable(ctx, acc, embed.SessionQuery{Tenant: "north-tenant", State: embed.StatePending}, now, 3, func(batch []embed.SessionRecord) error {
		sizes = append(sizes, len(batch))
		for _, r := range batch {
			if r.SID == "" || r.AccountID != acc {
				t.Errorf("a batch's record lacks its sid or account: %+v", r)
			}
			got = append(got, r.ID)
		}
		return nil
	})
	slices.Sort(got)
	slices.Sort(want)
	if err != nil || !reflect.DeepEqual(sizes, []int{3, 3, 1}) || !reflect.DeepEqual(got, want) {
		t.Fatalf("batches %v of %v, want [3 3 1] of the 7 unexpired north records (%v)", sizes, got, err)
	}
	stop := errors.New("stop")
	if err := s.EachRevocable(ctx, acc, embed.SessionQuery{}, now, 3, func([]embed.SessionRecord) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn's error: %v", err)
	}
}
