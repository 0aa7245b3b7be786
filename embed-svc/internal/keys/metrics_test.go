package keys_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/analyticsco/platform/embed-svc/internal/keys"
)

// The keyring's gauges follow a rotation: the signing key's age grows with time, a
// rotated-in key is pending for the publish delay, then signs (age from its activation)
// while the old one is retired.
func TestKeyringMetricsFollowRotation(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	kr, err := keys.New(signingKeys(t), keys.Options{
		EncryptionKey: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32)),
		PublishDelay:  time.Hour, Now: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := kr.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	kr.RegisterMetrics(reg)
	type want struct {
		age                       time.Duration
		pending, signing, retired float64
	}
	check := func(step string, w want) {
		t.Helper()
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				name := mf.GetName()
				for _, l := range m.GetLabel() {
					name += "/" + l.GetValue()
				}
				got[name] = m.GetGauge().GetValue()
			}
		}
		for name, v := range map[string]float64{"embed_svc_signing_key_age_seconds": w.age.Seconds(),
			"embed_svc_signing_keys/pending": w.pending, "embed_svc_signing_keys/signing": w.signing, "embed_svc_signing_keys/retired": w.retired} {
			if got[name] != v {
				t.Errorf("%s: %s = %v, want %v (all: %v)", step, name, got[name], v, got)
			}
		}
	}
	check("fresh", want{0, 0, 1, 0})
	advance(48 * time.Hour)
	check("two days later", want{48 * time.Hour, 0, 1, 0})
	if _, err := kr.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	check("rotated", want{48 * time.Hour, 1, 1, 0})
	advance(2 * time.Hour)
	check("after the publish delay", want{time.Hour, 0, 1, 1})
	if n := testutil.CollectAndCount(reg, "embed_svc_signing_keys"); n != 3 {
		t.Errorf("embed_svc_signing_keys series: %d, want 3", n)
	}
}
