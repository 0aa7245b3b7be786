package dbtsync

import (
	"cmp"
	"slices"
)

// QueueKey names one deployment's queue of sync jobs: the job feed keeps a queue per
// deployment, grouped by account, and hands its jobs out fairly (FairScheduler).
type QueueKey struct {
	Account    int64
	Deployment int64
}

// FairScheduler decides which queue a worker's free slot serves next: the accounts with
// queued jobs in turn, starting after the one served last, and within an account its
// deployments in turn. So an account that fills its deployments' queues takes one slot
// in turn with every other account waiting, not every slot until its queues drain (a
// FIFO's order), and a deployment never waits behind more than one job of each other
// account. A queue whose deployment has reached its running jobs' limit yields nothing
// and the next one is tried. It is not safe for concurrent use; each consumer has its
// own.
type FairScheduler struct {
	lastAccount int64
	served      bool
	lastDep     map[int64]int64 // per account, the deployment served last
}

// Order returns queues in the order a free slot should try them.
func (s *FairScheduler) Order(queues []QueueKey) []QueueKey {
	byAccount := map[int64][]QueueKey{}
	var accounts []int64
	for _, q := range queues {
		if _, ok := byAccount[q.Account]; !ok {
			accounts = append(accounts, q.Account)
		}
		byAccount[q.Account] = append(byAccount[q.Account], q)
	}
	slices.Sort(accounts)
	if s.served {
		accounts = rotateAfter(accounts, s.lastAccount, func(a int64) int64 { return a })
	}
	out := make([]QueueKey, 0, len(queues))
	for _, a := range accounts {
		deps := byAccount[a]
		slices.SortFunc(deps, func(x, y QueueKey) int { return cmp.Compare(x.Deployment, y.Deployment) })
		if last, ok := s.lastDep[a]; ok {
			deps = rotateAfter(deps, last, func(q QueueKey) int64 { return q.Deployment })
		}
		out = append(out, deps...)
	}
	// Forget the accounts that have nothing queued: the map stays as small as the queue.
	for a := range s.lastDep {
		if _, ok := byAccount[a]; !ok {
			delete(s.lastDep, a)
		}
	}
	return out
}

// Served records that a job of q was handed out.
func (s *FairScheduler) Served(q QueueKey) {
	if s.lastDep == nil {
		s.lastDep = map[int64]int64{}
	}
	s.lastAccount, s.served = q.Account, true
	s.lastDep[q.Account] = q.Deployment
}

// rotateAfter returns sorted (ascending by key) rotated to start at the first element
// whose key is greater than last.
func rotateAfter[T any](sorted []T, last int64, key func(T) int64) []T {
	i, _ := slices.BinarySearchFunc(sorted, last, func(e T, t int64) int { return cmp.Compare(key(e), t) })
	for i < len(sorted) && key(sorted[i]) <= last {
		i++
	}
	return append(slices.Clone(sorted[i:]), sorted[:i]...)
}
