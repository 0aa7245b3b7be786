package webhookstore_test

import (
	"context"
	"testing"
)

// A second start (another replica, a restart) finds the indexes there and creates none:
// FerretDB v1 drops the connection of a create of an existing index.
func TestEnsureIndexesAgainOnAStartedStore(t *testing.T) {
	s, _ := storeDB(t)
	for range 2 {
		if err := s.EnsureIndexes(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
