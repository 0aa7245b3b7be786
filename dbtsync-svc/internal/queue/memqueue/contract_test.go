package memqueue_test

import (
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/memqueue"
	"github.com/analyticsco/platform/dbtsync-svc/internal/queue/queuetest"
)

// TestQueueContract: the in-memory fake keeps the contract the JetStream adapter keeps.
func TestQueueContract(t *testing.T) {
	queuetest.Run(t, func(*testing.T) queuetest.Queue {
		return memqueue.NewWithLimits(memqueue.Limits{MaxQueued: queuetest.MaxQueued, MaxRunning: queuetest.MaxRunning})
	})
}
