package idempotency

import (
	"time"

	"github.com/analyticsco/platform/libs/config"
)

// Settings are the idempotency settings of a service, embedded in its config.
type Settings struct {
	TTL            time.Duration   `env:"IDEMPOTENCY_TTL" default:"24h" help:"how long an Idempotency-Key's answer is replayed (generate-session: its session id's lifetime)"`
	Lease          time.Duration   `env:"IDEMPOTENCY_LEASE" default:"1m" help:"how long a running request holds its Idempotency-Key without renewing it; a claim of a process that died is free again after it"`
	MaxRecords     int64           `env:"IDEMPOTENCY_MAX_RECORDS_PER_ACCOUNT" default:"100000" help:"most Idempotency-Key records an account creates within IDEMPOTENCY_TTL (429 idempotency_limit past it)"`
	MaxBytes       config.ByteSize `env:"IDEMPOTENCY_MAX_BYTES_PER_ACCOUNT" default:"256MiB" help:"most bytes of stored answers an account holds within IDEMPOTENCY_TTL (429 idempotency_limit past it)"`
	MaxAnswerBytes config.ByteSize `env:"IDEMPOTENCY_MAX_ANSWER_BYTES" default:"256KiB" help:"largest answer body an Idempotency-Key record keeps; a larger answer is replayed with its status and headers only"`
}

// withDefaults fills the zero fields with the defaults of the tags.
func (s Settings) withDefaults() Settings {
	if s.TTL <= 0 {
		s.TTL = 24 * time.Hour
	}
	if s.Lease <= 0 {
		s.Lease = time.Minute
	}
	if s.MaxRecords <= 0 {
		s.MaxRecords = 100000
	}
	if s.MaxBytes <= 0 {
		s.MaxBytes = 256 << 20
	}
	if s.MaxAnswerBytes <= 0 {
		s.MaxAnswerBytes = 256 << 10
	}
	return s
}
