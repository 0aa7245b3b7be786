package idempotency_test

import (
	"testing"

	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/idempotency/idemtest"
)

func TestMemoryKeepsTheStoreContract(t *testing.T) {
	idemtest.RunStoreContract(t, idempotency.NewMemory())
}
