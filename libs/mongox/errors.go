package mongox

import (
	"context"
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/analyticsco/platform/libs/errs"
)

// IsDuplicateKey reports a unique-index violation.
func IsDuplicateKey(err error) bool { return mongo.IsDuplicateKeyError(err) }

// OnlyDuplicateKeys reports whether err is a bulk insert's error in which every failed
// write was a duplicate key: an idempotent insert of documents that are already there.
// A write concern error beside them is not: the writes that did apply may not last.
func OnlyDuplicateKeys(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 && we.Code != 11001 && we.Code != 12582 {
			return false
		}
	}
	return true
}

// ErrUnavailable wraps errors that mean the database could not be reached: it is
// errs.ErrUnavailable, so errs.Write answers it 503.
var ErrUnavailable = errs.ErrUnavailable

// unavailableCodes are MongoDB's error codes that say the server could not do the work
// now, not that the command was wrong: a replica set without a writable primary (during
// an election, a stepdown or a shutdown), a host or the network failing, a server-side
// time limit, or a write that was applied but not replicated in time (a write concern's
// wtimeout). The same command may succeed once a primary is back.
var unavailableCodes = map[int]string{
	6:     "HostUnreachable",
	7:     "HostNotFound",
	50:    "MaxTimeMSExpired",
	64:    "WriteConcernFailed",
	89:    "NetworkTimeout",
	91:    "ShutdownInProgress",
	189:   "PrimarySteppedDown",
	262:   "ExceededTimeLimit",
	9001:  "SocketException",
	10107: "NotWritablePrimary",
	11600: "InterruptedAtShutdown",
	11602: "InterruptedDueToReplStateChange",
	13435: "NotPrimaryNoSecondaryOk",
	13436: "NotPrimaryOrSecondary",
}

// unavailableLabels are the labels the server (or the driver) puts on an error that a
// retry may clear: a write the driver would retry, a transaction to run again.
var unavailableLabels = []string{"RetryableWriteError", "TransientTransactionError"}

// Unavailable reports whether err means the database could not do the work now (a
// timeout, a network error, no server selectable, no writable primary, a write concern
// not met in time), as opposed to a bad command: errors a caller answers 503 so that
// the client retries. It looks through every error err wraps (%w, errors.Join), and
// into a write's exception: its write errors and its write concern error.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || mongo.IsTimeout(err) || mongo.IsNetworkError(err) {
		return true
	}
	var sse topology.ServerSelectionError
	if errors.As(err, &sse) || errors.Is(err, mongo.ErrClientDisconnected) {
		return true
	}
	// A connection pool cleared after a failed operation (the server went away) is the
	// driver's retryable pool error: the database is unreachable, not the request wrong.
	var pool driver.RetryablePoolError
	if errors.As(err, &pool) && pool.Retryable() {
		return true
	}
	if anyError(err, serverUnavailable) {
		return true
	}
	// The driver does not always keep that error's type when it wraps it for the caller;
	// its message is fixed by the driver (x/mongo/driver/topology/pool.go).
	msg := err.Error()
	return strings.Contains(msg, "connection pool for ") && strings.Contains(msg, " was cleared because another operation failed")
}

// serverUnavailable reports whether e itself (not what it wraps) carries one of the
// unavailable codes or labels.
func serverUnavailable(e error) bool {
	if c, ok := e.(interface{ ErrorCodes() []int }); ok {
		for _, code := range c.ErrorCodes() {
			if _, ok := unavailableCodes[code]; ok {
				return true
			}
		}
	}
	if l, ok := e.(mongo.LabeledError); ok {
		for _, label := range unavailableLabels {
			if l.HasErrorLabel(label) {
				return true
			}
		}
	}
	return false
}

// anyError reports whether f holds for err or any error it wraps, through both
// Unwrap() error and Unwrap() []error (errors.Join), so that one error of several
// joined is found wherever it is.
func anyError(err error, f func(error) bool) bool {
	if err == nil {
		return false
	}
	if f(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return anyError(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if anyError(e, f) {
				return true
			}
		}
	}
	return false
}

// TTLRefusal is why the database refused to create a TTL index.
type TTLRefusal int

const (
	// TTLRefusedOther is any other refusal (or none): return the error.
	TTLRefusedOther TTLRefusal = iota
	// TTLOptionsChanged: an index of that name or those keys already exists with other
	// options (MongoDB's IndexOptionsConflict 85 or IndexKeySpecsConflict 86), as when
	// the expiry changed since it was made. collMod changes it in place.
	TTLOptionsChanged
	// TTLNotSupported: the database has no TTL indexes (FerretDB v1 answers
	// expireAfterSeconds with NotImplemented, 238); the caller deletes expired
	// documents itself.
	TTLNotSupported
)

// ClassifyTTLRefusal says why err refused a TTL index (a createIndexes with
// expireAfterSeconds), by the server's error code first: MongoDB's conflict message
// quotes the requested index, expireAfterSeconds included, so the text alone cannot
// tell a changed expiry from a database without TTL indexes. Only an error without
// a code (which no server answers) is read by its text, FerretDB's.
func ClassifyTTLRefusal(err error) TTLRefusal {
	if err == nil {
		return TTLRefusedOther
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		switch {
		case se.HasErrorCode(85) || se.HasErrorCode(86):
			return TTLOptionsChanged
		case se.HasErrorCode(238):
			return TTLNotSupported
		}
		return TTLRefusedOther
	}
	msg := err.Error()
	if strings.Contains(msg, "expireAfterSeconds") && strings.Contains(msg, "not implemented") {
		return TTLNotSupported
	}
	return TTLRefusedOther
}
