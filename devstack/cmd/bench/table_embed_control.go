package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The embed operator rows: a generate-session dry run, a page of the session list, and
// revoking every session of one user (100 sessions) in one call.

func setupDryRun(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	url, hdr, dep := p.Gateway+"/api/v1/embed/generate-session", jsonHeader("Api-Key "+acme.APIKeys["admin"]), acme.Deployments[0].ID
	var n atomic.Int64
	body := func(i int64) []byte {
		return fmt.Appendf(nil, `{"deploymentId":%d,"externalId":"bench-user-%d","dryRun":true}`, dep, i%externalUsers)
	}
	t := opsTarget(p, func(tgt *vegeta.Target) error {
		*tgt = vegeta.Target{Method: http.MethodPost, URL: url, Header: hdr, Body: body(n.Add(1))}
		return nil
	})
	c := newAPIClient(p.Gateway)
	countPerCall(ctx, p, "generate-session dry run (known external user)", 50, nil, func(ctx context.Context, i int) error {
		return c.do(ctx, http.MethodPost, "/api/v1/embed/generate-session", "Api-Key "+acme.APIKeys["admin"], rawJSON(body(int64(i))), http.StatusOK, nil)
	})
	return t, nil
}

func setupListSessions(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	path := "/api/v1/embed/sessions?first=20"
	t := opsTarget(p, vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: p.Gateway + path,
		Header: http.Header{"Authorization": {"Api-Key " + acme.APIKeys["admin"]}}}))
	// FerretDB answers a sorted query by scanning the account's session records (MongoDB
	// uses the index): a few workers, or the serializing proxy's queue times out the
	// rows after it.
	t.Workers = 2
	c := newAPIClient(p.Gateway)
	countPerCall(ctx, p, "list sessions (a page of 20)", 50, nil, func(ctx context.Context, _ int) error {
		return c.do(ctx, http.MethodGet, path, "Api-Key "+acme.APIKeys["admin"], nil, http.StatusOK, nil)
	})
	return t, nil
}

// sessionsPerUser is how many sessions the revoke-by-user row revokes per request.
const sessionsPerUser = 100

// usersPerRound is how many users with sessionsPerUser sessions each are minted
// before a run of the revoke-by-user row (untimed); the run ends when they are used.
const usersPerRound = 5

func setupRevokeByUser(ctx context.Context, env *Env) (*Target, error) {
	p, err := env.Platform(ctx)
	if err != nil {
		return nil, err
	}
	acme := p.Seed.Accounts["acme"]
	key, dep := acme.APIKeys["admin"], acme.Deployments[0].ID
	c := newAPIClient(p.Gateway)
	var seq atomic.Int64
	// mintUser mints sessionsPerUser sessions for a new user and returns its external id.
	mintUser := func(ctx context.Context) (string, error) {
		ext := fmt.Sprintf("bench-revoke-%d-%d", time.Now().UnixNano(), seq.Add(1))
		err := parallel(ctx, sessionsPerUser, 8, func(ctx context.Context, _ int) error {
			_, err := c.mint(ctx, key, dep, ext)
			return err
		})
		return ext, err
	}
	var mu sync.Mutex
	var users []string
	url, hdr := p.Gateway+"/api/v1/embed/sessions/revoke", jsonHeader("Api-Key "+key)
	t := opsTarget(p, func(tgt *vegeta.Target) error {
		mu.Lock()
		defer mu.Unlock()
		if len(users) == 0 {
			return vegeta.ErrNoTargets
		}
		ext := users[len(users)-1]
		users = users[:len(users)-1]
		*tgt = vegeta.Target{Method: http.MethodPost, URL: url, Header: hdr,
			Body: fmt.Appendf(nil, `{"externalId":%q,"tenant":"acme-default"}`, ext)}
		return nil
	})
	t.Workers = 1
	t.Prepare = func(ctx context.Context, _ time.Duration) error {
		fresh := make([]string, usersPerRound)
		for i := range fresh {
			ext, err := mintUser(ctx)
			if err != nil {
				return err
			}
			fresh[i] = ext
		}
		mu.Lock()
		users = append(users, fresh...)
		mu.Unlock()
		return nil
	}
	var counted string
	countPerCall(ctx, p, fmt.Sprintf("revoke by user (%d sessions)", sessionsPerUser), 3, func(ctx context.Context, _ int) error {
		var err error
		counted, err = mintUser(ctx)
		return err
	}, func(ctx context.Context, _ int) error {
		var out struct{ Revoked int }
		if err := c.do(ctx, http.MethodPost, "/api/v1/embed/sessions/revoke", "Api-Key "+key, map[string]any{"externalId": counted, "tenant": "acme-default"}, http.StatusOK, &out); err != nil {
			return err
		}
		if out.Revoked != sessionsPerUser {
			return fmt.Errorf("revoked %d sessions, want %d", out.Revoked, sessionsPerUser)
		}
		return nil
	})
	return t, nil
}

// countPerCall runs call n times serially, each after its untimed, uncounted prepare
// (nil: none), and prints the MongoDB commands and documents read per call (the
// processes' command monitors) and the Redis commands (INFO): the whole platform, so the
// gateway's background poll adds a little.
func countPerCall(ctx context.Context, p platformInfo, label string, n int, prepare, call func(ctx context.Context, i int) error) {
	opt, err := redis.ParseURL(p.Redis)
	if err != nil {
		addCountLine("%s: commands per call: not measured (%v)", label, err)
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	var mongoN, docsN, redisN float64
	for i := range n {
		if prepare != nil {
			if err := prepare(ctx, i); err != nil {
				addCountLine("%s: commands per call: not measured (%v)", label, err)
				return
			}
		}
		m0, d0, errM := platformMongoCounts(ctx, p)
		r0, errR := redisCommands(ctx, rdb)
		if err := call(ctx, i); err != nil {
			addCountLine("%s: commands per call: not measured (%v)", label, err)
			return
		}
		m1, d1, errM1 := platformMongoCounts(ctx, p)
		r1, errR1 := redisCommands(ctx, rdb)
		if err := errors.Join(errM, errR, errM1, errR1); err != nil {
			addCountLine("%s: commands per call: not measured (%v)", label, err)
			return
		}
		mongoN += m1 - m0
		docsN += d1 - d0
		redisN += float64(r1 - r0 - 1) // INFO itself
	}
	f := float64(n)
	addCountLine("%s: %.2f MongoDB commands, %.2f documents read, %.2f Redis commands per call (%d serial calls, whole platform)",
		label, mongoN/f, docsN/f, redisN/f, n)
}
