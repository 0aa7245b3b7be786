package app_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// linMode is the proxy's mode for the linearizability test: MongoDB's visibility, where
// a write of many documents is applied one document at a time, other commands between.
const linMode = wireproxy.Interleave

// linTimeout bounds the checker's search, per history.
const linTimeout = 10 * time.Second

// workload is one bounded history: its seed, how many clients make how many calls each,
// on how many external users in how many embed tenants, and the percentage of each call
// (the rest are deletes): mints, exchanges, reads, revokes by session id, revocations of
// a user's sessions in a tenant. A user's calls are one partition of the check, whose
// cost grows steeply with its length: about 50 calls each at most.
type workload struct {
	seed                                     uint64
	clients, calls                           int
	users, tenants                           int
	mint, exchange, read, revoke, revokeUser int
}

func (w workload) String() string {
	return fmt.Sprintf("seed-%d-users-%d-tenants-%d", w.seed, w.users, w.tenants)
}

var linWorkloads = []workload{
	// Everything on a few users.
	{seed: 1, clients: 6, calls: 24, users: 3, tenants: 2, mint: 30, exchange: 25, read: 15, revoke: 10, revokeUser: 12},
	{seed: 2, clients: 6, calls: 24, users: 3, tenants: 2, mint: 30, exchange: 25, read: 15, revoke: 10, revokeUser: 12},
	{seed: 3, clients: 6, calls: 16, users: 2, tenants: 2, mint: 30, exchange: 25, read: 15, revoke: 10, revokeUser: 12},
	// Mints racing revocations and deletes of one user.
	{seed: 4, clients: 5, calls: 8, users: 1, tenants: 1, mint: 40, exchange: 25, read: 5, revoke: 5, revokeUser: 20},
	{seed: 5, clients: 5, calls: 8, users: 1, tenants: 2, mint: 40, exchange: 20, read: 10, revoke: 0, revokeUser: 15},
}

// Concurrent clients mint, exchange, read, revoke (a session, a user's sessions in a
// tenant) and delete external users through the gateway, on the real stores with the
// proxy letting other commands run inside multi-document writes; every history is
// checked for linearizability against the contract's model (sessionmodel_test.go). A
// history that no order of its calls explains fails the test and is written out as
// porcupine's visualization.
func TestSessionHistoriesAreLinearizable(t *testing.T) {
	start := time.Now()
	e := newEnvOn(t, devstack.MongoForTestSerializing(t, linMode))
	t.Logf("stack up in %v (proxy mode %v)", time.Since(start).Round(time.Millisecond), linMode)
	for _, w := range linWorkloads {
		t.Run(w.String(), func(t *testing.T) {
			began := time.Now()
			h := recordHistory(e, w)
			recorded := time.Since(began)
			checkHistory(t, h, w)
			t.Logf("%d calls (%d operations) recorded in %v, checked in %v; %s", h.calls, len(h.ops),
				recorded.Round(time.Millisecond), (time.Since(began) - recorded).Round(time.Millisecond), h.summary())
		})
	}
}

// history is what the clients of one seed recorded.
type history struct {
	mu       sync.Mutex
	ops      []porcupine.Operation
	calls    int
	outcomes map[string]int // "kind outcome" -> count
	odd      []oddAnswer    // answers the model does not name: 5xx, no answer, other 4xx
}

type oddAnswer struct {
	what string
	apitest.Response
}

func (h *history) summary() string {
	keys := slices.Sorted(maps.Keys(h.outcomes))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, h.outcomes[k])
	}
	return strings.Join(parts, ", ")
}

// pool holds what the clients have learnt of one user: its sessions' ids and the tokens
// of the exchanged ones, by model index.
type pool struct {
	mu       sync.Mutex
	sessions []pooled
	tokens   []pooled
}

type pooled struct {
	idx int
	val string
}

// recent picks one of the last few of list (contention on the newest sessions).
func recent(rng *rand.Rand, list []pooled) (pooled, bool) {
	if len(list) == 0 {
		return pooled{}, false
	}
	from := max(0, len(list)-3)
	return list[from+rng.IntN(len(list)-from)], true
}

func recordHistory(e *env, w workload) *history {
	acme := e.acme()
	dep := acme.Deployments[0].ID
	key := apiKey(acme.APIKeys["admin"])
	api := apitest.New(e.gw.URL)
	users := make([]string, w.users)
	pools := make([]*pool, w.users)
	for i := range users {
		users[i] = fmt.Sprintf("lin-%d-%s", w.seed, strings.ToLower(uid("u")))
		pools[i] = &pool{}
	}
	tenants := make([]string, w.tenants)
	for i := range tenants {
		tenants[i] = tname("lin")
	}
	h := &history{outcomes: map[string]int{}}
	base := time.Now()
	now := func() int64 { return time.Since(base).Nanoseconds() }
	var nextSess, nextCall int
	var idMu sync.Mutex
	newCall := func() int {
		idMu.Lock()
		defer idMu.Unlock()
		nextCall++
		return nextCall
	}
	newSess := func() int {
		idMu.Lock()
		defer idMu.Unlock()
		nextSess++
		return nextSess
	}
	// add records one call's operations (a bulk call's steps share its interval); an
	// unknown outcome's return is fixed to the end of the history below.
	add := func(client int, what string, call, ret int64, r apitest.Response, o linOutput, steps ...linInput) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls++
		h.outcomes[what+" "+outcomeNames[o.outcome]]++
		if o.outcome == outUnknown || o.outcome == outOther {
			h.odd = append(h.odd, oddAnswer{what: what, Response: r})
		}
		if o.outcome == outUnknown {
			ret = -1
		}
		for _, in := range steps {
			h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: o, Return: ret})
		}
	}

	parallel(w.clients, func(client int) {
		rng := rand.New(rand.NewPCG(w.seed, uint64(client)))
		for range w.calls {
			u := rng.IntN(w.users)
			ten := rng.IntN(w.tenants)
			p := pools[u]
			p.mu.Lock()
			sess, haveSess := recent(rng, p.sessions)
			tok, haveTok := recent(rng, p.tokens)
			p.mu.Unlock()
			id := newCall()
			in := linInput{user: users[u], tenant: ten, call: id}
			roll := rng.IntN(100)
			switch {
			case roll < w.mint || !haveSess:
				in.kind, in.sess = opMint, -id // an unknown mint's session: no call names it
				call := now()
				r := api.Do("POST", "/api/v1/embed/generate-session", key,
					map[string]any{"deploymentId": dep, "externalId": users[u], "embedTenantName": tenants[ten]})
				ret := now()
				o := linOutput{outcome: classify(r, 200, 409, "external_user_deleting"), status: r.Status}
				if o.outcome == outOK {
					var body struct {
						SessionID string `json:"sessionId"`
					}
					if json.Unmarshal(r.Body, &body) != nil || body.SessionID == "" {
						o.outcome = outOther
					} else {
						o.sess = newSess()
						p.mu.Lock()
						p.sessions = append(p.sessions, pooled{o.sess, body.SessionID})
						p.mu.Unlock()
					}
				}
				steps := []linInput{in}
				if o.outcome == outRefused {
					write := in
					write.kind = opMintWrite
					steps = append(steps, write)
				}
				add(client, "mint", call, ret, r, o, steps...)
			case roll < w.mint+w.exchange:
				// Half the exchanges are three at once of the same id, as a viewer's
				// retries or a replayed id would send them.
				n := 1 + 2*rng.IntN(2)
				parallel(n, func(j int) {
					in := in
					if j > 0 {
						in.call = newCall()
					}
					in.kind, in.sess = opExchange, sess.idx
					call := now()
					r := api.Do("POST", "/api/v1/embed/session/exchange", "", map[string]any{"sessionId": sess.val})
					ret := now()
					o := linOutput{outcome: classify(r, 200, 401, "session_id_invalid"), status: r.Status}
					if o.outcome == outOK {
						var body tokenResp
						if json.Unmarshal(r.Body, &body) != nil || body.Token == "" {
							o.outcome = outOther
						} else {
							p.mu.Lock()
							p.tokens = append(p.tokens, pooled{sess.idx, body.Token})
							p.mu.Unlock()
						}
					}
					add(client+j*w.clients, "exchange", call, ret, r, o, in)
				})
			case roll < w.mint+w.exchange+w.read && haveTok:
				in.kind, in.sess = opRead, tok.idx
				call := now()
				r := api.Do("GET", "/api/v1/embed/session", bearer(tok.val), nil)
				ret := now()
				o := linOutput{outcome: classify(r, 200, 401, ""), status: r.Status}
				add(client, "read", call, ret, r, o, in)
			case roll < w.mint+w.exchange+w.read+w.revoke:
				in.kind, in.sess = opRevoke, sess.idx
				call := now()
				r := api.Do("POST", "/api/v1/embed/session/revoke", key, map[string]any{"sessionId": sess.val})
				ret := now()
				o := linOutput{outcome: classify(r, 204, 0, ""), status: r.Status}
				add(client, "revoke", call, ret, r, o, in)
			case roll < w.mint+w.exchange+w.read+w.revoke+w.revokeUser:
				call := now()
				r := api.Do("POST", "/api/v1/embed/sessions/revoke", key, map[string]any{"externalId": users[u], "tenant": tenants[ten]})
				ret := now()
				o := linOutput{outcome: classify(r, 200, 0, ""), status: r.Status}
				if o.outcome == outOK {
					var body struct {
						Revoked *int `json:"revoked"`
					}
					if json.Unmarshal(r.Body, &body) != nil || body.Revoked == nil {
						o.outcome = outOther
					} else {
						o.n = *body.Revoked
					}
				}
				begin, end := in, in
				begin.kind, end.kind = opRevokeUserBegin, opRevokeUserEnd
				add(client, "revoke-user", call, ret, r, o, begin, end)
			default:
				call := now()
				r := api.Do("DELETE", "/api/v1/embed-tenants/"+tenants[ten]+"/users/"+url.PathEscape(users[u]), key, nil)
				ret := now()
				o := linOutput{outcome: classify(r, 200, 404, ""), status: r.Status}
				if o.outcome == outOK {
					var body struct {
						Deleted         *bool `json:"deleted"`
						SessionsRevoked *int  `json:"sessionsRevoked"`
					}
					if json.Unmarshal(r.Body, &body) != nil || body.Deleted == nil || body.SessionsRevoked == nil {
						o.outcome = outOther
					} else {
						o.deleted, o.n = *body.Deleted, *body.SessionsRevoked
					}
				}
				mark, revoke, remove := in, in, in
				mark.kind, revoke.kind, remove.kind = opDeleteMark, opDeleteRevoke, opDeleteRemove
				add(client, "delete", call, ret, r, o, mark, revoke, remove)
			}
		}
	})
	// An unknown outcome may take effect at any time after its call: it returns after
	// every other operation.
	end := now() + 1
	for i := range h.ops {
		if h.ops[i].Return < 0 {
			h.ops[i].Return = end
		}
	}
	return h
}

// classify reads an answer: ok is the success status; refused, with code when not "",
// the refusal the model names; 5xx and no answer are unknown; any other answer changed
// nothing.
func classify(r apitest.Response, ok, refused int, code string) outcome {
	switch {
	case r.Err != nil || r.Status >= 500:
		return outUnknown
	case r.Status == ok:
		return outOK
	case refused != 0 && r.Status == refused && (code == "" || strings.Contains(string(r.Body), `"code":"`+code+`"`)):
		return outRefused
	}
	return outOther
}

// checkHistory checks h against the model; an illegal history is written out as
// porcupine's visualization (and each user's whose calls no order explains is logged).
func checkHistory(t *testing.T, h *history, w workload) {
	t.Helper()
	// Every request is valid: a 5xx or no answer is a failure of its own (the model
	// still checks what it may have done); another refusal changed nothing.
	for _, odd := range h.odd {
		if odd.Err != nil || odd.Status >= 500 {
			t.Errorf("%v: %s answered %d %s (%v)", w, odd.what, odd.Status, odd.Body, odd.Err)
		} else {
			t.Logf("%v: %s refused %d %s", w, odd.what, odd.Status, odd.Body)
		}
	}
	model := sessionModel()
	res, info := porcupine.CheckOperationsVerbose(model, h.ops, linTimeout)
	if res == porcupine.Ok {
		return
	}
	dir, err := os.MkdirTemp("", "embed-linearizability-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, w.String()+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Errorf("write the visualization: %v", err)
	}
	for _, part := range model.Partition(h.ops) {
		if porcupine.CheckOperationsTimeout(model, part, linTimeout) == porcupine.Ok {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		var b strings.Builder
		for _, op := range part {
			fmt.Fprintf(&b, "\n  [%9.3f ms, %9.3f ms] client %d: %s", float64(op.Call)/1e6, float64(op.Return)/1e6, op.ClientId,
				model.DescribeOperation(op.Input, op.Output))
		}
		t.Logf("%v: user %s, calls by start:%s", w, part[0].Input.(linInput).user, b.String())
	}
	if res == porcupine.Unknown {
		t.Fatalf("%v: the checker could not decide within %v; the history is in %s", w, linTimeout, path)
	}
	t.Fatalf("%v: no order of the calls explains the history (not linearizable); visualization: %s", w, path)
}
