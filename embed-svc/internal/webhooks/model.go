// Package webhooks delivers the audit trail's events to the receivers an account
// subscribes: subscriptions (POST/GET/PATCH/DELETE /api/v1/webhooks), a dispatcher
// that turns each stored event into deliveries, and a deliverer that sends them signed
// as the Standard Webhooks specification says, retried until they succeed or their
// retry period ends. It runs inside embed-svc beside the audit trail it reads.
package webhooks

import (
	"errors"
	"time"
)

// Subscription is an account's webhook: where its events go and which of them.
type Subscription struct {
	ID        string `bson:"_id"` // "wh_" and a ULID
	AccountID int64  `bson:"account"`
	// DeploymentIDs: nil, every event of the account (account-level ones included);
	// otherwise only events of these deployments. A scoped credential's subscriptions
	// always name deployments, all within its scope.
	DeploymentIDs  []int64  `bson:"deps,omitempty"`
	URL            string   `bson:"url"`
	Events         []string `bson:"events"`  // patterns: an action, or a prefix ending in ".*"
	IncludeRefused bool     `bson:"refused"` // refused operations too (outcome "failure")
	Enabled        bool     `bson:"enabled"`
	Description    string   `bson:"description,omitempty"` // the account's note, at most MaxDescriptionBytes
	// Secret is the signing secret's 32 random bytes, sealed by the embed key box with
	// the subscription's id as associated data. PrevSecret, sealed the same way, stays
	// valid until PrevUntil after a rotation: deliveries carry both signatures.
	Secret     []byte    `bson:"secret"`
	PrevSecret []byte    `bson:"prevSecret,omitempty"`
	PrevUntil  time.Time `bson:"prevUntil,omitempty"`
	// Seq is the last sequence number given to a delivery of this subscription.
	Seq int64 `bson:"seq"`
	// FailingSince is the first failed attempt of the current run of failures (zero
	// after a success). Past WEBHOOK_DISABLE_AFTER the subscription is disabled.
	FailingSince   time.Time `bson:"failingSince,omitempty"`
	DisabledAt     time.Time `bson:"disabledAt,omitempty"`
	DisabledReason string    `bson:"disabledReason,omitempty"` // DisabledFailing
	CreatedAt      time.Time `bson:"createdAt"`
	UpdatedAt      time.Time `bson:"updatedAt"`
	CreatedBy      string    `bson:"createdBy"` // the actor's id, as the audit event names it
}

// DisabledFailing is why a subscription the deliverer disabled is disabled.
const DisabledFailing = "failing"

// Delivery statuses.
const (
	StatusPending   = "pending"   // waiting for its next attempt (or in one)
	StatusSucceeded = "succeeded" // a 2xx answer
	StatusFailed    = "failed"    // its retry period ended, or it could never be sent
)

// Delivery is one event (or ping) for one subscription.
type Delivery struct {
	ID             string `bson:"_id"` // "dlv_" and a ULID
	AccountID      int64  `bson:"account"`
	SubscriptionID string `bson:"sub"`
	// EventID is the webhook-id header: the audit event's id, or "ping_" and a ULID.
	EventID string `bson:"event"`
	Type    string `bson:"type"` // the event's action, or "webhook.ping"
	Seq     int64  `bson:"seq"`  // per subscription, from Subscription.Seq
	// Body is the exact payload sent (Envelope as JSON); each attempt signs it with the
	// attempt's timestamp.
	Body      []byte    `bson:"body"`
	Status    string    `bson:"status"`
	Attempts  int       `bson:"attempts"`
	Due       time.Time `bson:"due"`             // the next attempt, while pending
	Lease     time.Time `bson:"lease,omitempty"` // a deliverer holds it until then
	Expires   time.Time `bson:"expires"`         // past it, a failed attempt fails the delivery
	CreatedAt time.Time `bson:"createdAt"`
	DoneAt    time.Time `bson:"doneAt,omitempty"`
	Last      *Attempt  `bson:"last,omitempty"`
}

// Attempt is what the last attempt of a delivery saw.
type Attempt struct {
	At        time.Time `bson:"at"`
	Status    int       `bson:"status,omitempty"` // the HTTP status; 0 when there was none
	LatencyMS int64     `bson:"latencyMs"`
	Error     string    `bson:"error,omitempty"`   // a stable word: timeout, refused_address, redirect, connection, status
	Excerpt   string    `bson:"excerpt,omitempty"` // the answer's first bytes, at most ExcerptBytes
}

// ExcerptBytes bounds the part of a receiver's answer that is kept.
const ExcerptBytes = 256

// Envelope is a delivery's payload, as the Standard Webhooks specification recommends:
// the event's type and time, the per-subscription sequence number (receivers reorder
// by it: no order is promised), and the audit event's public shape as data.
type Envelope struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Sequence  int64     `json:"sequence"`
	// Merged is true for the summary event of an account's events past its audit
	// budget (action audit.events.merge): the events it counts were not stored one by
	// one, so they are not delivered one by one.
	Merged bool `json:"merged,omitempty"`
	Data   any  `json:"data"`
}

// TypePing is the type of the deliveries POST /api/v1/webhooks/{id}/ping makes.
const TypePing = "webhook.ping"

// Errors of the stores.
var (
	ErrNotFound = errors.New("webhooks: not found")
	ErrLimit    = errors.New("webhooks: the account's limit is reached")
)
