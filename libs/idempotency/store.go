package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Scope names whose key a record is: keys are per account and credential.
type Scope struct {
	Account    string
	Credential string
	Key        string
}

// Answer is a completed request's answer as a record keeps it.
type Answer struct {
	Status  int
	Header  map[string]string // the kept headers (KeptHeaders)
	Body    []byte
	Omitted bool // the body was larger than the bound and is not kept
}

// Record is the state of a key.
type Record struct {
	Running     bool      // the first request still holds the key
	LeaseUntil  time.Time // while Running: when the claim lapses unless renewed
	Fingerprint []byte    // when done: the SHA-256 of the first request
	Answer      Answer    // when done
}

// Claim is a key held by a running request: Token proves it to Complete, Renew and Release.
type Claim struct {
	Scope Scope
	Token string
}

// Usage is what an account's records took within the window.
type Usage struct {
	Records int64
	Bytes   int64
}

// ErrClaimLost is returned by Complete and Renew when the claim is no longer the
// caller's (its lease lapsed and another request took the key).
var ErrClaimLost = errors.New("idempotency claim lost")

// Store keeps the records. Claim is the lock: the first of concurrent claims of a scope
// wins; the others get the record (running or done). A claim whose lease lapsed, or a
// record whose expiry passed, is taken over by the next claim.
type Store interface {
	// Claim holds s for a running request until leaseUntil, the record kept until
	// expires; when s is already held or answered it returns the record instead (nil claim).
	Claim(ctx context.Context, s Scope, now, leaseUntil, expires time.Time) (*Claim, *Record, error)
	// Renew extends a running claim's lease.
	Renew(ctx context.Context, c *Claim, leaseUntil time.Time) error
	// Complete stores the answer of the claim's request and its fingerprint.
	Complete(ctx context.Context, c *Claim, fingerprint []byte, a Answer) error
	// Release frees the key of a request that did nothing worth replaying.
	Release(ctx context.Context, c *Claim) error
	// Use adds records and bytes to account's usage in the window bucket of now (one an
	// hour) and returns its usage over the buckets of the window ending at now.
	Use(ctx context.Context, account string, now time.Time, window time.Duration, records, bytes int64) (Usage, error)
}

// Bucket is the span of one per-account usage counter.
const Bucket = time.Hour

// BucketID names account's usage counter of the bucket holding t.
func BucketID(account string, t time.Time) string {
	return fmt.Sprintf("%s/%d", account, t.Truncate(Bucket).Unix())
}

// NewToken returns a random claim token.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
