package httpx

import (
	"encoding/json"
	"time"
)

// TimeLayout is how every API answer writes a timestamp: RFC 3339 in UTC with exactly
// three fractional digits ("2026-11-25T04:30:00.120Z"), the same in every service.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a timestamp of an API answer: a time.Time (its methods are promoted) that
// encodes as TimeLayout and decodes any RFC 3339 time.
type Time struct{ time.Time }

// At wraps t.
func At(t time.Time) Time { return Time{t} }

// AtPtr wraps *t (nil stays nil).
func AtPtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	return &Time{*t}
}

// MarshalJSON writes t in TimeLayout.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 time, with or without fractional seconds.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}
