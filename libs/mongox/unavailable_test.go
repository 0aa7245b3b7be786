package mongox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/analyticsco/platform/libs/mongox"
)

func TestUnavailable(t *testing.T) {
	cleared := errors.New("connection pool for 127.0.0.1:40489 was cleared because another operation failed with: connection(127.0.0.1:40489[-3]) incomplete read of message header: EOF")
	for _, err := range []error{context.DeadlineExceeded, mongox.ErrUnavailable, fmt.Errorf("find: %w", cleared), cleared} {
		if !mongox.Unavailable(err) {
			t.Errorf("%v: want unavailable", err)
		}
	}
	for _, err := range []error{nil, errors.New("E11000 duplicate key"), errors.New("bad query")} {
		if mongox.Unavailable(err) {
			t.Errorf("%v: want not unavailable", err)
		}
	}
}
