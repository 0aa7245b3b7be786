package neighbour

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// The operations of the neighbour's workload, in the order of a lap (OpSync apart).
const (
	OpFolderGet = "folder GET"
	OpList      = "list page of 20"
	OpMint      = "generate-session"
	OpExchange  = "exchange"
	OpBulkMove  = "bulk move of 20"
	// OpSync is a dbt sync of the manifest: from the request to the job's end (the job
	// record's createdAt to finishedAt).
	OpSync = "dbt sync (jaffle_shop)"
)

// Ops lists the operations in print order.
var Ops = []string{OpFolderGet, OpList, OpMint, OpExchange, OpBulkMove, OpSync}

// Sample is one operation of the neighbour's.
type Sample struct {
	Op        string
	Status    int
	Code      string // the error body's code
	Took      time.Duration
	RequestID string // the gateway's X-Request-Id
	// Err says how the answer differs from what the workload expects (nil: it is it).
	Err error
	// JobID is OpSync's job.
	JobID string
}

// File is a file of a synced branch.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Lap runs the neighbour's workload once, one request after another, as one user would:
// a folder GET and a listing of folder A, a mint and the exchange of its id, a bulk move
// of its 20 workbooks from A to B and one back (so every lap reads the same).
func (r *Run) Lap(ctx context.Context) []Sample {
	admin := bearer(r.neighbour, "admin")
	var out []Sample
	run := func(op, method, path, authz string, body any, status int, check func([]byte) error) []byte {
		a := r.nc.do(ctx, method, path, authz, body)
		s := Sample{Op: op, Status: a.Status, Code: a.code, Took: a.took, RequestID: a.requestID, Err: a.Err}
		if s.Err == nil && a.Status != status {
			s.Err = fmt.Errorf("%s %s: want %d, got %s", method, path, status, a)
		}
		if s.Err == nil && check != nil {
			s.Err = check(a.Body)
		}
		out = append(out, s)
		return a.Body
	}
	run(OpFolderGet, "GET", depPath(r.dep, fmt.Sprintf("/folders/%d", r.a)), admin, nil, 200, nil)
	run(OpList, "GET", depPath(r.dep, fmt.Sprintf("/workspace?folderId=%d&first=20", r.a)), admin, nil, 200, wantItems(len(r.items)))
	var minted struct{ SessionID string }
	body := run(OpMint, "POST", "/api/v1/embed/generate-session", "Api-Key "+r.neighbour.APIKeys["admin"],
		map[string]any{"deploymentId": r.dep, "externalId": fmt.Sprintf("neighbour-%d", r.laps%10)}, 200, nil)
	r.laps++
	if json.Unmarshal(body, &minted) == nil && minted.SessionID != "" {
		run(OpExchange, "POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": minted.SessionID}, 200, nil)
	}
	for _, to := range []int64{r.b, r.a} {
		run(OpBulkMove, "POST", depPath(r.dep, "/workspace/bulk-move"), admin, map[string]any{"folderId": to, "items": r.items}, 200, wantMoved(len(r.items)))
	}
	return out
}

// Sync syncs the neighbour's manifest into branch and waits for the job's end (within
// ctx), then lists the branch's files. The sample's Took is the job's time from its
// creation to its end.
func (r *Run) Sync(ctx context.Context, branch string) (Sample, []File) {
	admin := bearer(r.neighbour, "admin")
	s := Sample{Op: OpSync}
	a := r.nc.do(ctx, "POST", depPath(r.dep, "/dbt-sync"), admin, map[string]any{"source": "manifest", "branchName": branch, "manifest": r.manifest})
	s.Status, s.Code, s.RequestID, s.Err = a.Status, a.code, a.requestID, a.Err
	var accepted struct{ SyncJobID string }
	if s.Err == nil && (a.Status != 202 || json.Unmarshal(a.Body, &accepted) != nil) {
		s.Err = fmt.Errorf("start the sync: %s", a)
	}
	if s.Err != nil {
		return s, nil
	}
	s.JobID = accepted.SyncJobID
	job, err := waitJob(ctx, r.nc, r.dep, admin, s.JobID)
	if err != nil {
		s.Err = err
		return s, nil
	}
	s.Took = job.FinishedAt.Sub(job.CreatedAt)
	if job.Status != "succeeded" {
		s.Err = fmt.Errorf("job %s ended %s: %s %s", s.JobID, job.Status, job.ErrorCode, job.Error)
		return s, nil
	}
	var files struct{ Files []File }
	path := fmt.Sprintf("/build/api/v1/deployments/%d/branches/%s/files", r.dep, url.PathEscape(branch))
	if err := r.nc.want(ctx, "GET", path, admin, nil, 200, &files); err != nil {
		s.Err = err
	}
	return s, files.Files
}

// job is the part of a sync job the run reads.
type job struct {
	ID         string     `json:"syncJobId"`
	Status     string     `json:"status"`
	ErrorCode  string     `json:"errorCode"`
	Error      string     `json:"error"`
	CreatedAt  time.Time  `json:"createdAt"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt time.Time  `json:"finishedAt"`
}

func (j job) ended() bool {
	return slices.Contains([]string{"succeeded", "failed", "canceled"}, j.Status)
}

// waitJob polls a job until it ends or ctx ends.
func waitJob(ctx context.Context, c *client, dep int64, authz, id string) (job, error) {
	for {
		var j job
		if err := c.want(ctx, "GET", depPath(dep, "/dbt-sync/"+id), authz, nil, 200, &j); err != nil {
			return j, err
		}
		if j.ended() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("job %s still %s: %w", id, j.Status, ctx.Err())
		case <-time.After(100 * time.Millisecond): // polling interval
		}
	}
}

// FloodJobs are the flooder's jobs that have ended, by id: their status, error code and
// run time (started to finished; 0 for a job that never started).
type FloodJobs map[string]FloodJob

// FloodJob is one ended job of the flooder's.
type FloodJob struct {
	Deployment int64
	Status     string
	ErrorCode  string
	Ran        time.Duration
}

// Drain waits (within ctx) until no job of the flooder's deployments is queued or
// running, so what follows runs on a quiet platform, and returns the jobs that ended. A
// listing answered 503 or 504 (the store busy with the flood's aftermath) is asked again.
func (r *Run) Drain(ctx context.Context) (FloodJobs, error) {
	dev := bearer(r.flooder, "developer")
	for {
		ended, busy := FloodJobs{}, 0
		for _, dep := range []int64{r.bombDep, r.uploadDep} {
			var page struct{ Items []job }
			a := r.fc.do(ctx, "GET", depPath(dep, "/dbt-sync?first=100"), dev, nil)
			if a.Err == nil && (a.Status == 503 || a.Status == 504) {
				busy++ // the flooder's own read, answered late: asked again
				continue
			}
			if a.Err != nil || a.Status != 200 || json.Unmarshal(a.Body, &page) != nil {
				return nil, fmt.Errorf("the flooder's jobs: %s", a)
			}
			for _, j := range page.Items {
				if !j.ended() {
					busy++
					continue
				}
				fj := FloodJob{Deployment: dep, Status: j.Status, ErrorCode: j.ErrorCode}
				if j.StartedAt != nil {
					fj.Ran = j.FinishedAt.Sub(*j.StartedAt)
				}
				ended[j.ID] = fj
			}
		}
		if busy == 0 {
			return ended, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the flooder's %d jobs did not end: %w", busy, ctx.Err())
		case <-time.After(200 * time.Millisecond): // polling interval
		}
	}
}

// wantItems checks a listing answers n items.
func wantItems(n int) func([]byte) error {
	return func(body []byte) error {
		var out struct{ Items []json.RawMessage }
		if err := json.Unmarshal(body, &out); err != nil || len(out.Items) != n {
			return fmt.Errorf("listing: want %d items, got %.300s", n, body)
		}
		return nil
	}
}

// wantMoved checks a bulk move moved all of its n items.
func wantMoved(n int) func([]byte) error {
	return func(body []byte) error {
		var out struct{ Moved, Failed []json.RawMessage }
		if err := json.Unmarshal(body, &out); err != nil || len(out.Moved) != n || len(out.Failed) != 0 {
			return fmt.Errorf("bulk move: want %d moved, none failed, got %.300s", n, body)
		}
		return nil
	}
}
