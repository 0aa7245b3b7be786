package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// apiClient sends the set-up requests of the operations table and the soak
// (untimed): folders, items, minted and exchanged sessions.
type apiClient struct {
	base string
	http *http.Client
}

func newAPIClient(base string) *apiClient {
	c := loadClient(32)
	// Set-up is untimed: a slow engine (SQLite holding 50,000 items) may take long.
	c.Timeout = 2 * time.Minute
	return &apiClient{base: base, http: c}
}

// do sends a JSON request and decodes a JSON answer into out; a status other
// than want is an error with the answer. A 503 (a structural change lost a race
// on the deployment's tree too often) is retried a few times.
func (c *apiClient) do(ctx context.Context, method, path, auth string, body any, want int, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(raw))
		if err != nil {
			return err
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusServiceUnavailable && attempt < 5 {
			continue
		}
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: %s, want %d: %s", method, path, resp.Status, want, strings.TrimSpace(string(got)))
		}
		if out != nil {
			return json.Unmarshal(got, out)
		}
		return nil
	}
}

// parallel runs f(0..n-1) on at most workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

type idResponse struct {
	ID int64 `json:"id"`
}

func (c *apiClient) createFolder(ctx context.Context, bearer string, dep int64, name string, parent int64) (int64, error) {
	body := map[string]any{"name": name}
	if parent != 0 {
		body["parentId"] = parent
	}
	var out idResponse
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/deployments/%d/folders", dep), "Bearer "+bearer, body, http.StatusOK, &out)
	return out.ID, err
}

// createItem creates a workbook or report ("workbooks", "reports") in folder.
func (c *apiClient) createItem(ctx context.Context, bearer string, dep int64, kind, name string, folder int64) (int64, error) {
	var out idResponse
	err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/deployments/%d/%s", dep, kind), "Bearer "+bearer,
		map[string]any{"name": name, "folderId": folder}, http.StatusOK, &out)
	return out.ID, err
}

// mint mints a session for a known external user (the pool of ids is small, so
// every user exists after the first lap: the case the round-trip budget is for).
func (c *apiClient) mint(ctx context.Context, apiKey string, dep int64, externalID string) (string, error) {
	var out struct {
		SessionID string `json:"sessionId"`
	}
	err := c.do(ctx, http.MethodPost, "/api/v1/embed/generate-session", "Api-Key "+apiKey,
		map[string]any{"deploymentId": dep, "externalId": externalID}, http.StatusOK, &out)
	return out.SessionID, err
}

func (c *apiClient) exchange(ctx context.Context, sessionID string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	err := c.do(ctx, http.MethodPost, "/api/v1/embed/session/exchange", "", map[string]string{"sessionId": sessionID}, http.StatusOK, &out)
	return out.Token, err
}

// sessionPool is a queue of single-use session ids that targeters consume; an
// empty pool ends the run (vegeta.ErrNoTargets).
type sessionPool struct {
	mu  sync.Mutex
	ids []string
	// taken, first and last describe the consumption since the last fill, to
	// size the next one from the rate actually reached.
	taken       int
	first, last time.Time
}

func (p *sessionPool) take() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ids) == 0 {
		return "", false
	}
	now := time.Now()
	if p.taken == 0 {
		p.first = now
	}
	p.taken++
	p.last = now
	id := p.ids[len(p.ids)-1]
	p.ids = p.ids[:len(p.ids)-1]
	return id, true
}

// fill tops the pool up for a run of d: the last run's rate times d with a
// margin, at least 200 and at most limit; produce, called concurrently, makes one id.
func (p *sessionPool) fill(ctx context.Context, d time.Duration, limit int, produce func(ctx context.Context, i int) (string, error)) error {
	p.mu.Lock()
	var rate float64
	if span := p.last.Sub(p.first); p.taken > 1 && span > 0 {
		rate = float64(p.taken) / span.Seconds()
	}
	p.taken = 0
	have := len(p.ids)
	p.mu.Unlock()
	want := min(max(int(rate*d.Seconds()*1.5), 200), limit)
	n := want - have
	if n <= 0 {
		return nil
	}
	fresh := make([]string, n)
	err := parallel(ctx, n, 32, func(ctx context.Context, i int) error {
		id, err := produce(ctx, i)
		fresh[i] = id
		return err
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ids = append(p.ids, fresh...)
	p.mu.Unlock()
	return nil
}
