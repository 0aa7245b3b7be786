package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Each deployment's jobs are indexed in pages of the KV bucket, so a listing reads about
// a page per page it answers instead of every key of the deployment: the head
// (jobidx.<dep>.head) holds the page being filled and its number; a full head is sealed
// into jobidx.<dep>.<n> (never changed again) and a new head starts. Pages expire with
// the bucket's TTL like the jobs they name (a listing skips the ids whose job is gone).

type indexHead struct {
	Page int      `json:"page"`
	IDs  []string `json:"ids"`
}

func indexHeadKey(deploymentID int64) string { return fmt.Sprintf("jobidx.%d.head", deploymentID) }
func indexPageKey(deploymentID int64, n int) string {
	return fmt.Sprintf("jobidx.%d.%d", deploymentID, n)
}

// indexJob adds id to the deployment's index. It is safe to repeat: an id the head
// already holds is not added twice.
func (q *Queue) indexJob(ctx context.Context, deploymentID int64, id string) error {
	return casUpdate(ctx, q, q.kv, indexHeadKey(deploymentID), func(head *indexHead) error {
		if slices.Contains(head.IDs, id) {
			return errSkip
		}
		if len(head.IDs) >= q.limits.IndexPage {
			// Sealed first: a seal repeated by a racing writer puts the same page.
			b, _ := json.Marshal(head.IDs)
			if err := q.do(ctx, func(ctx context.Context) error {
				_, err := q.kv.Put(ctx, indexPageKey(deploymentID, head.Page), b)
				return err
			}); err != nil {
				return unavailable(err)
			}
			*head = indexHead{Page: head.Page + 1}
		}
		head.IDs = append(head.IDs, id)
		return nil
	})
}

// indexPage reads page n of the index (the head when it is n), newest first; ok is
// false when it is gone (expired) or never was.
func (q *Queue) indexPage(ctx context.Context, deploymentID int64, n int, head indexHead) (ids []string, ok bool, err error) {
	if n == head.Page {
		ids = slices.Clone(head.IDs)
	} else {
		e, err := q.getEntry(ctx, q.kv, indexPageKey(deploymentID, n))
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, unavailable(err)
		}
		if err := json.Unmarshal(e.Value(), &ids); err != nil {
			return nil, false, err
		}
	}
	// Ids are time-ordered: within a page, newest first whatever order they were added.
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids, true, nil
}

// JobPage lists up to first job ids of the deployment, newest first, after the cursor
// "<page>:<id>".
func (q *Queue) JobPage(ctx context.Context, deploymentID int64, after string, first int) ([]string, string, bool, error) {
	var head indexHead
	e, err := q.getEntry(ctx, q.kv, indexHeadKey(deploymentID))
	switch {
	case errors.Is(err, natsjs.ErrKeyNotFound):
		if after != "" {
			return nil, "", false, dbtsync.ErrBadCursor
		}
		return nil, "", false, nil
	case err != nil:
		return nil, "", false, unavailable(err)
	}
	_ = json.Unmarshal(e.Value(), &head)
	page, afterID := head.Page, ""
	if after != "" {
		p, id, ok := strings.Cut(after, ":")
		n, err := strconv.Atoi(p)
		if !ok || err != nil || n < 0 || n > head.Page || !dbtsync.ValidJobID(id) {
			return nil, "", false, dbtsync.ErrBadCursor
		}
		page, afterID = n, id
	}
	var out []string
	end := ""
	for ; page >= 0; page-- {
		ids, ok, err := q.indexPage(ctx, deploymentID, page, head)
		if err != nil {
			return nil, "", false, err
		}
		if !ok {
			break // expired: older pages are gone too
		}
		if afterID != "" {
			i := slices.Index(ids, afterID)
			if i < 0 {
				return nil, "", false, dbtsync.ErrBadCursor
			}
			ids, afterID = ids[i+1:], ""
		}
		for _, id := range ids {
			if len(out) == first {
				return out, end, true, nil
			}
			out = append(out, id)
			end = strconv.Itoa(page) + ":" + id
		}
	}
	return out, end, false, nil
}
