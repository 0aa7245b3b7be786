package dbtsync

import (
	"io"
	"strings"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// The decoders, each with the rules the service applies to what it decoded, for the
// black-box fuzz tests: a body is either refused with a client error or accepted.

func DecodeStartSyncRequest(body io.Reader, manifest io.Writer) (StartSyncInput, error) {
	in, err := decodeStartSyncRequest(body, manifest, convert.ManifestLimits{})
	if err == nil {
		err = in.validate()
	}
	return in, err
}

func DecodeIntegrationRequest(body io.Reader) (IntegrationInput, error) {
	in, err := decodeIntegrationRequest(body)
	if err == nil {
		err = in.validate()
	}
	return in, err
}

var DecodeStagingRequest = decodeStagingRequest

// BodyOf is the start-sync body callback the transport gives StartSync for a request
// body (content type aside): the unit tests drive the service with what a client sends.
func BodyOf(body string) SyncRequestBody {
	return func(manifest io.Writer) (StartSyncInput, error) {
		return decodeStartSyncRequest(strings.NewReader(body), manifest, convert.ManifestLimits{})
	}
}

// MoveCharge is Ledger.move, for the ledger's unit test.
func MoveCharge(l *Ledger, op string, from, to Charge, quota int64, now time.Time) error {
	return l.move(op, from, to, quota, now)
}

// AuditingMiddleware is the auditing decorator NewService applies (Options.Audit), alone.
var AuditingMiddleware = auditingMiddleware
