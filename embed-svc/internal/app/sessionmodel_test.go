package app_test

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// The sequential model of embed sessions that the linearizability test holds the API's
// histories to, one external user per partition (every operation names one user: its
// mints, the sessions minted for it, its revocations and its delete). The rules are the
// contract's (../shared/spec/api.md and the README's session control and tenant users):
//
//   - generate-session makes a new pending session of the user in its tenant, records
//     the user in the tenant, and is refused 409 external_user_deleting only while a
//     delete of the user is under way (after it has finished a mint makes a new user):
//     the delete wins over mints racing it, and no session of such a mint survives,
//     though the mint may have written the user (made it again, recorded it in its
//     tenant) before it lost;
//   - a session id exchanges at most once, only while pending: 200 makes it active, every
//     other exchange is 401;
//   - revoke by session id (204) ends the session, pending or active;
//   - a revocation of the user's sessions in a tenant ({"externalId","tenant"}) ends
//     every session of the user in the tenant that was pending or active when it began
//     and none minted after it began; it answers how many it ended;
//   - DELETE of the user (in a tenant the user had a session in, else 404) marks it, ends
//     every session of the user in any tenant, then removes it; while it is under way
//     mints are refused and the user's tokens no longer describe a session;
//   - an active session's token reads the session (GET /api/v1/embed/session, 200); a
//     revoked one's is refused (401).
//
// A definite 4xx the model does not name changes nothing. A 5xx or no answer may or may
// not have applied (the model steps both ways: it is nondeterministic). The bulk
// operations are not atomic: each is two or three steps that the checker places in the
// operation's interval, so a session minted while a revocation runs may fall either side
// of it, never both. A count is at most the sessions the operation found live, and at
// least those of them no other bulk operation under way could have ended instead.

type opKind int

const (
	opMint      opKind = iota
	opMintWrite        // a refused mint's write of the user, which may have come before the refusal
	opExchange
	opRead
	opRevoke
	opRevokeUserBegin // the revocation's read of the user's sessions in the tenant
	opRevokeUserEnd   // ... and its revocation of those it read
	opDeleteMark      // the delete's mark of the user
	opDeleteRevoke    // ... its revocation of the user's sessions
	opDeleteRemove    // ... and the user's removal
)

var opNames = map[opKind]string{
	opMint: "mint", opMintWrite: "mint.write", opExchange: "exchange", opRead: "read", opRevoke: "revoke",
	opRevokeUserBegin: "revoke-user.begin", opRevokeUserEnd: "revoke-user.end",
	opDeleteMark: "delete.mark", opDeleteRevoke: "delete.revoke", opDeleteRemove: "delete.remove",
}

// linInput is one operation's input: its user (the partition), the tenant (an index)
// of mints, user revocations and deletes, the session (an index) of exchanges, reads and
// revokes, and the id of the HTTP call the steps of a bulk operation share.
type linInput struct {
	kind   opKind
	user   string
	tenant int
	sess   int
	call   int
}

// outcome classifies an answer.
type outcome int

const (
	outOK      outcome = iota // the operation's success status
	outRefused                // the refusal the model names: exchange/read 401, mint 409 external_user_deleting, delete 404
	outOther                  // any other definite 4xx: changed nothing
	outUnknown                // 5xx or no answer: may or may not have applied
)

var outcomeNames = map[outcome]string{outOK: "ok", outRefused: "refused", outOther: "other-4xx", outUnknown: "unknown"}

// linOutput is what the call answered: its outcome, the status, the minted session's
// index, a bulk revocation's count and a delete's "deleted".
type linOutput struct {
	outcome outcome
	status  int
	sess    int
	n       int
	deleted bool
}

type sessState byte

const (
	sPending sessState = iota
	sActive
	sRevoked
	// sPhantom: the session of a mint that lost to a delete, which no client holds and no
	// exchange can use; a revocation may or may not count it.
	sPhantom
)

func (s sessState) String() string { return [...]string{"pending", "active", "revoked", "phantom"}[s] }

type modelSession struct {
	tenant int
	state  sessState
}

// bulkOp is a user revocation or a delete under way: the sessions a revocation read
// when it began (nil for a delete), and a delete's stage.
type bulkOp struct {
	snapshot []int
	del      bool
	revoked  bool // a delete that has revoked the user's sessions
}

// userState is one external user's state. It is never changed in place: each step
// returns a new one.
type userState struct {
	exists   bool
	tenants  uint64 // bit i: the user has had a session in tenant i since it was made
	sessions map[int]modelSession
	bulk     map[int]bulkOp // by HTTP call
}

func (s userState) clone() userState {
	return userState{exists: s.exists, tenants: s.tenants, sessions: maps.Clone(s.sessions), bulk: maps.Clone(s.bulk)}
}

func (s userState) deleting() bool {
	for _, b := range s.bulk {
		if b.del {
			return true
		}
	}
	return false
}

func (s userState) inTenant(t int) bool { return s.exists && s.tenants&(1<<t) != 0 }

// contested reports whether a bulk operation under way other than call could end
// session k as well.
func (s userState) contested(call, k int) bool {
	for c, b := range s.bulk {
		if c == call {
			continue
		}
		if b.del && !b.revoked || slices.Contains(b.snapshot, k) {
			return true
		}
	}
	return false
}

// mustCount is how many of sessions, those still live now, call ends for certain (no
// other bulk operation under way could end them instead).
func (s userState) mustCount(call int, sessions []int) int {
	n := 0
	for _, k := range sessions {
		if st := s.sessions[k].state; st != sRevoked && st != sPhantom && !s.contested(call, k) {
			n++
		}
	}
	return n
}

func (s userState) revokeAll(keys []int) userState {
	next := s.clone()
	for _, k := range keys {
		ms := next.sessions[k]
		if ms.state == sPhantom {
			delete(next.sessions, k) // gone as if it had never been: states merge
			continue
		}
		ms.state = sRevoked
		next.sessions[k] = ms
	}
	return next
}

func (s userState) live(tenant int) []int {
	var out []int
	for k, ms := range s.sessions {
		if ms.state != sRevoked && (tenant < 0 || ms.tenant == tenant) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func stepUser(st userState, in linInput, out linOutput) []userState {
	none := []userState{}
	same := []userState{st}
	if out.outcome == outOther {
		return same
	}
	unknown := out.outcome == outUnknown
	written := func() userState {
		next := st.clone()
		next.exists = true
		next.tenants |= 1 << in.tenant
		return next
	}
	switch in.kind {
	case opMint:
		made := func(k int) userState {
			next := written()
			next.sessions[k] = modelSession{tenant: in.tenant, state: sPending}
			return next
		}
		switch {
		case unknown && st.deleting():
			return []userState{st, written()}
		case unknown: // in.sess: a session no other call can name
			return []userState{st, written(), made(in.sess)}
		case out.outcome == outRefused:
			if st.deleting() {
				return same
			}
			return none
		}
		if _, dup := st.sessions[out.sess]; dup || st.deleting() {
			return none
		}
		return []userState{made(out.sess)}
	case opMintWrite:
		// A mint refused because a delete won may have written the user first (made it
		// again, or recorded it in the mint's tenant), and, once the delete has begun, its
		// session, which it or the delete revokes before the mint answers.
		if !st.deleting() {
			return []userState{st, written()}
		}
		phantom := written()
		phantom.sessions[in.sess] = modelSession{tenant: in.tenant, state: sPhantom}
		return []userState{st, written(), phantom}
	case opExchange:
		ms, ok := st.sessions[in.sess]
		if !ok {
			return none
		}
		exchanged := func() userState {
			next := st.clone()
			ms.state = sActive
			next.sessions[in.sess] = ms
			return next
		}
		switch {
		case unknown && ms.state == sPending:
			return []userState{st, exchanged()}
		case unknown:
			return same
		case out.outcome == outRefused:
			if ms.state != sPending {
				return same
			}
			return none
		}
		if ms.state != sPending {
			return none
		}
		return []userState{exchanged()}
	case opRead:
		ms, ok := st.sessions[in.sess]
		switch {
		case !ok:
			return none
		case unknown:
			return same
		case out.outcome == outRefused:
			if ms.state == sRevoked || st.deleting() {
				return same
			}
			return none
		}
		if ms.state == sActive && !st.deleting() {
			return same
		}
		return none
	case opRevoke:
		if _, ok := st.sessions[in.sess]; !ok {
			return none
		}
		if unknown {
			return []userState{st, st.revokeAll([]int{in.sess})}
		}
		return []userState{st.revokeAll([]int{in.sess})}
	case opRevokeUserBegin:
		next := st.clone()
		next.bulk[in.call] = bulkOp{snapshot: st.live(in.tenant)}
		return []userState{next}
	case opRevokeUserEnd:
		b, ok := st.bulk[in.call]
		if !ok || b.del {
			return none
		}
		if !unknown && (out.n < st.mustCount(in.call, b.snapshot) || out.n > len(b.snapshot)) {
			return none
		}
		ended := st.revokeAll(b.snapshot)
		delete(ended.bulk, in.call)
		if unknown {
			kept := st.clone()
			delete(kept.bulk, in.call)
			return []userState{kept, ended}
		}
		return []userState{ended}
	case opDeleteMark:
		if out.outcome == outRefused { // 404: the user is not in the tenant
			if st.inTenant(in.tenant) {
				return none
			}
			return same
		}
		if !st.inTenant(in.tenant) {
			if unknown {
				return same
			}
			return none
		}
		next := st.clone()
		next.bulk[in.call] = bulkOp{del: true}
		if unknown {
			return []userState{st, next}
		}
		return []userState{next}
	case opDeleteRevoke:
		if out.outcome == outRefused {
			return same
		}
		b, ok := st.bulk[in.call]
		if !ok {
			if unknown {
				return same // it failed before its mark
			}
			return none
		}
		if !b.del || b.revoked {
			return none
		}
		live := st.live(-1)
		if !unknown && (out.n < st.mustCount(in.call, live) || out.n > len(live)) {
			return none
		}
		next := st.revokeAll(live)
		b.revoked = true
		next.bulk[in.call] = b
		if unknown {
			return []userState{st, next}
		}
		return []userState{next}
	case opDeleteRemove:
		if out.outcome == outRefused {
			return same
		}
		b, ok := st.bulk[in.call]
		if !ok {
			if unknown {
				return same
			}
			return none
		}
		if !b.revoked {
			if unknown {
				return same // it failed before its revocation: the user stays marked
			}
			return none
		}
		if !unknown && out.deleted != st.exists {
			return none
		}
		next := st.clone()
		next.exists, next.tenants = false, 0
		delete(next.bulk, in.call)
		if unknown {
			return []userState{st, next} // the user stays marked, or is gone
		}
		return []userState{next}
	}
	return none
}

func equalUsers(a, b userState) bool {
	if a.exists != b.exists || a.tenants != b.tenants || !maps.Equal(a.sessions, b.sessions) || len(a.bulk) != len(b.bulk) {
		return false
	}
	for c, x := range a.bulk {
		y, ok := b.bulk[c]
		if !ok || x.del != y.del || x.revoked != y.revoked || !slices.Equal(x.snapshot, y.snapshot) {
			return false
		}
	}
	return true
}

func (s userState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exists=%v tenants=%b", s.exists, s.tenants)
	for _, k := range slices.Sorted(maps.Keys(s.sessions)) {
		ms := s.sessions[k]
		fmt.Fprintf(&b, " s%d(t%d)=%s", k, ms.tenant, ms.state)
	}
	for _, c := range slices.Sorted(maps.Keys(s.bulk)) {
		op := s.bulk[c]
		switch {
		case op.del && op.revoked:
			fmt.Fprintf(&b, " call%d:delete(revoked)", c)
		case op.del:
			fmt.Fprintf(&b, " call%d:delete(marked)", c)
		default:
			fmt.Fprintf(&b, " call%d:revoke-user%v", c, op.snapshot)
		}
	}
	return b.String()
}

func describeOp(in linInput, out linOutput) string {
	var arg string
	switch in.kind {
	case opMint, opMintWrite:
		arg = fmt.Sprintf("t%d", in.tenant)
		if out.outcome == outOK {
			arg += fmt.Sprintf(" -> s%d", out.sess)
		}
	case opExchange, opRead, opRevoke:
		arg = fmt.Sprintf("s%d", in.sess)
	case opRevokeUserBegin, opRevokeUserEnd:
		arg = fmt.Sprintf("t%d n=%d", in.tenant, out.n)
	case opDeleteMark, opDeleteRevoke, opDeleteRemove:
		arg = fmt.Sprintf("t%d n=%d deleted=%v", in.tenant, out.n, out.deleted)
	}
	return fmt.Sprintf("call%d %s(%s %s) = %d %s", in.call, opNames[in.kind], in.user, arg, out.status, outcomeNames[out.outcome])
}

// sessionModel is the model for porcupine, partitioned by external user.
func sessionModel() porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byUser := map[string][]porcupine.Operation{}
			for _, op := range history {
				u := op.Input.(linInput).user
				byUser[u] = append(byUser[u], op)
			}
			out := make([][]porcupine.Operation, 0, len(byUser))
			for _, u := range slices.Sorted(maps.Keys(byUser)) {
				out = append(out, byUser[u])
			}
			return out
		},
		Init: func() []any {
			return []any{userState{sessions: map[int]modelSession{}, bulk: map[int]bulkOp{}}}
		},
		Step: func(state, input, output any) []any {
			next := stepUser(state.(userState), input.(linInput), output.(linOutput))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal: func(a, b any) bool { return equalUsers(a.(userState), b.(userState)) },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			_, _ = h.Write([]byte(state.(userState).String()))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string { return describeOp(input.(linInput), output.(linOutput)) },
		DescribeState:     func(state any) string { return state.(userState).String() },
	}
	return m.ToModel()
}

// The model refuses what the contract forbids and accepts what concurrency allows, on
// histories written by hand: each rule's case fails when the rule is taken out.
func TestSessionModel(t *testing.T) {
	const u = "alice"
	type call struct {
		at, ret int64
		in      []linInput
		out     linOutput
	}
	op := func(kind opKind, tenant, sess int) linInput {
		return linInput{kind: kind, user: u, tenant: tenant, sess: sess}
	}
	ok := linOutput{outcome: outOK}
	refused := linOutput{outcome: outRefused}
	unknown := linOutput{outcome: outUnknown}
	minted := func(s int) linOutput { return linOutput{outcome: outOK, sess: s} }
	counted := func(n int) linOutput { return linOutput{outcome: outOK, n: n} }
	deleted := func(n int) linOutput { return linOutput{outcome: outOK, n: n, deleted: true} }
	revokeUser := []linInput{op(opRevokeUserBegin, 0, 0), op(opRevokeUserEnd, 0, 0)}
	del := []linInput{op(opDeleteMark, 0, 0), op(opDeleteRevoke, 0, 0), op(opDeleteRemove, 0, 0)}
	mint1 := call{0, 10, []linInput{op(opMint, 0, 0)}, minted(1)}
	cases := []struct {
		name  string
		calls []call
		legal bool
	}{
		{"an id exchanges once", []call{mint1, {20, 30, []linInput{op(opExchange, 0, 1)}, ok}, {40, 50, []linInput{op(opExchange, 0, 1)}, ok}}, false},
		{"concurrent exchanges: one wins", []call{mint1, {20, 50, []linInput{op(opExchange, 0, 1)}, refused}, {20, 50, []linInput{op(opExchange, 0, 1)}, ok}}, true},
		{"an exchange beside a revoke may win", []call{mint1, {20, 50, []linInput{op(opExchange, 0, 1)}, ok}, {20, 50, []linInput{op(opRevoke, 0, 1)}, ok}}, true},
		{"no exchange after the revoke returned", []call{mint1, {20, 30, []linInput{op(opRevoke, 0, 1)}, ok}, {40, 50, []linInput{op(opExchange, 0, 1)}, ok}}, false},
		{"no read after the revoke returned", []call{mint1, {20, 30, []linInput{op(opExchange, 0, 1)}, ok}, {40, 50, []linInput{op(opRevoke, 0, 1)}, ok},
			{60, 70, []linInput{op(opRead, 0, 1)}, ok}}, false},
		{"a read of an active session", []call{mint1, {20, 30, []linInput{op(opExchange, 0, 1)}, ok}, {40, 50, []linInput{op(opRead, 0, 1)}, ok}}, true},
		{"no exchange after the user's revocation returned", []call{mint1, {20, 30, revokeUser, counted(1)}, {40, 50, []linInput{op(opExchange, 0, 1)}, ok}}, false},
		{"a user's revocation counts what it ended", []call{mint1, {20, 30, revokeUser, counted(0)}}, false},
		{"and no more", []call{mint1, {20, 30, revokeUser, counted(2)}}, false},
		{"a revocation counting a mint beside it ended its session", []call{{0, 50, revokeUser, counted(1)}, {10, 20, []linInput{op(opMint, 0, 0)}, minted(1)},
			{60, 70, []linInput{op(opExchange, 0, 1)}, ok}}, false},
		{"unless the mint lost to a delete", []call{mint1, {12, 18, []linInput{op(opExchange, 0, 1)}, ok}, {20, 50, del, deleted(2)},
			{21, 40, []linInput{op(opMint, 0, -3), op(opMintWrite, 0, -3)}, refused}}, true},
		{"a user's revocation ends the tenant's sessions only", []call{{0, 10, []linInput{op(opMint, 1, 0)}, minted(1)}, {20, 30, revokeUser, counted(0)},
			{40, 50, []linInput{op(opExchange, 1, 1)}, ok}}, true},
		{"a mint beside a user's revocation falls after it", []call{{0, 50, revokeUser, counted(0)}, {10, 20, []linInput{op(opMint, 0, 0)}, minted(1)},
			{60, 70, []linInput{op(opExchange, 0, 1)}, ok}}, true},
		{"a mint beside a user's revocation falls before it", []call{{0, 50, revokeUser, counted(1)}, {10, 20, []linInput{op(opMint, 0, 0)}, minted(1)},
			{60, 70, []linInput{op(opExchange, 0, 1)}, refused}}, true},
		{"a mint is refused as deleting only beside a delete", []call{mint1, {20, 30, []linInput{op(opMint, 0, -2)}, refused}}, false},
		{"a mint beside a delete is refused", []call{mint1, {20, 60, del, deleted(1)}, {30, 40, []linInput{op(opMint, 0, -2)}, refused},
			{70, 80, []linInput{op(opExchange, 0, 1)}, refused}}, true},
		{"two deletes remove one user", []call{mint1, {20, 60, del, deleted(1)}, {25, 70, del, linOutput{outcome: outOK, deleted: true}}}, false},
		{"unless a mint beside them made it again", []call{mint1, {20, 60, del, deleted(1)}, {25, 70, del, linOutput{outcome: outOK, deleted: true}},
			{30, 65, []linInput{op(opMint, 0, -4), op(opMintWrite, 0, -4)}, refused}}, true},
		{"a mint that lost to a delete may have recorded the user in its tenant first", []call{{0, 10, []linInput{op(opMint, 1, 0)}, minted(1)},
			{20, 60, []linInput{op(opMint, 0, -2), op(opMintWrite, 0, -2)}, refused}, {30, 50, del, deleted(1)}}, true},
		{"a delete ends every session of the user", []call{mint1, {12, 14, []linInput{op(opMint, 1, 0)}, minted(2)}, {20, 30, del, deleted(2)},
			{40, 50, []linInput{op(opExchange, 1, 2)}, ok}}, false},
		{"a user with a session in the tenant is found", []call{mint1, {20, 30, del, refused}}, false},
		{"a user without one is not", []call{{0, 10, []linInput{op(opMint, 1, 0)}, minted(1)}, {20, 30, del, refused}}, true},
		{"an unknown exchange may not have applied", []call{mint1, {20, 30, []linInput{op(opExchange, 0, 1)}, unknown}, {40, 50, []linInput{op(opExchange, 0, 1)}, ok}}, true},
		{"nor applied twice", []call{mint1, {20, 30, []linInput{op(opExchange, 0, 1)}, unknown}, {40, 50, []linInput{op(opExchange, 0, 1)}, ok},
			{60, 70, []linInput{op(opExchange, 0, 1)}, ok}}, false},
		{"an unknown mint may have made the user and its session", []call{{0, 10, []linInput{op(opMint, 0, -1)}, unknown}, {20, 30, del, deleted(1)}}, true},
		{"or the user alone", []call{{0, 10, []linInput{op(opMint, 0, -1)}, unknown}, {20, 30, del, deleted(0)}}, true},
		{"or not", []call{{0, 10, []linInput{op(opMint, 0, -1)}, unknown}, {20, 30, del, refused}}, true},
	}
	model := sessionModel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h []porcupine.Operation
			for i, cl := range c.calls {
				ret := cl.ret
				if cl.out.outcome == outUnknown {
					ret = 1 << 40
				}
				for _, in := range cl.in {
					in.call = i + 1
					h = append(h, porcupine.Operation{ClientId: i, Input: in, Call: cl.at, Output: cl.out, Return: ret})
				}
			}
			if got := porcupine.CheckOperations(model, h); got != c.legal {
				t.Fatalf("linearizable = %v, want %v", got, c.legal)
			}
		})
	}
}
