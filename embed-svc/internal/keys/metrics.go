package keys

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	keyAgeDesc = prometheus.NewDesc("embed_svc_signing_key_age_seconds",
		"Time since the key that signs embed tokens now started signing: a rotation is due when it passes the rotation period.", nil, nil)
	keysPublishedDesc = prometheus.NewDesc("embed_svc_signing_keys",
		"Signing keys in the keyring by state: pending (published, not signing yet), signing, retired (published until their tokens expire).", []string{"state"}, nil)
)

// RegisterMetrics exports the keyring's state on reg, read at scrape time from the keys
// this replica holds (reloaded from the database when older than the refresh period, so
// a rotation by `embed-svc rotate-keys` shows within it).
func (k *Keyring) RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(keyringCollector{k})
}

type keyringCollector struct{ k *Keyring }

func (c keyringCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keyAgeDesc
	ch <- keysPublishedDesc
}

func (c keyringCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	keys, err := c.k.current(ctx)
	if err != nil {
		return // no keys loaded at all: nothing true to say
	}
	now := c.k.o.Now()
	sk, ok := signingKey(keys, now)
	if ok {
		ch <- prometheus.MustNewConstMetric(keyAgeDesc, prometheus.GaugeValue, now.Sub(sk.ActivateAt).Seconds())
	}
	var pending, retired float64
	for _, ky := range keys {
		switch {
		case ky.ActivateAt.After(now):
			pending++
		case !ok || ky.ID != sk.ID:
			retired++
		}
	}
	signing := 0.0
	if ok {
		signing = 1
	}
	ch <- prometheus.MustNewConstMetric(keysPublishedDesc, prometheus.GaugeValue, pending, "pending")
	ch <- prometheus.MustNewConstMetric(keysPublishedDesc, prometheus.GaugeValue, signing, "signing")
	ch <- prometheus.MustNewConstMetric(keysPublishedDesc, prometheus.GaugeValue, retired, "retired")
}
