package webhooks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/analyticsco/platform/libs/netguard"
)

// Exclude names whose due deliveries a claim leaves for later: accounts at their bound
// of attempts in flight, and subscriptions at theirs.
type Exclude struct {
	Accounts      []int64
	Subscriptions []string
}

// DeliveryStore is what the deliverer needs of the store.
type DeliveryStore interface {
	// Claim leases up to limit due deliveries, earliest due first, of neither the
	// accounts nor the subscriptions excluded (those at their bound of attempts).
	Claim(ctx context.Context, now time.Time, lease time.Duration, exclude Exclude, limit int) ([]Delivery, error)
	Record(ctx context.Context, d Delivery, a Attempt, status string, next time.Time) (bool, error)
	Release(ctx context.Context, d Delivery, due time.Time) error
	Subscription(ctx context.Context, account int64, id string) (Subscription, error)
	Succeeded(ctx context.Context, account int64, id string) error
	Failed(ctx context.Context, account int64, id string, now time.Time, disableAfter time.Duration) (bool, error)
}

// Defaults of the deliverer's settings (WEBHOOK_*).
const (
	DefaultWorkers        = 32
	DefaultMaxInFlight    = 4
	DefaultAttemptTimeout = 10 * time.Second
	DefaultDisableAfter   = 72 * time.Hour
	DefaultFirstRetry     = 5 * time.Second
	DefaultMaxBackoff     = time.Hour
)

// DelivererOptions configure a Deliverer; zero values take the defaults.
type DelivererOptions struct {
	Store DeliveryStore
	// Open opens a subscription's sealed secret (the subscription's id is its associated
	// data).
	Open func(sealed []byte, subscriptionID string) ([]byte, error)
	// Workers bounds the attempts in flight on this replica, MaxInFlight those of one
	// account, so one account's slow receivers hold at most MaxInFlight of them; one
	// subscription holds at most half of its account's.
	Workers, MaxInFlight int
	// AttemptTimeout bounds one attempt, connection to the last byte read.
	AttemptTimeout time.Duration
	// FirstRetry is the first retry's delay, doubled after each failure up to MaxBackoff,
	// each drawn at random between its half and itself.
	FirstRetry, MaxBackoff time.Duration
	// DisableAfter is how long a subscription's attempts may fail without a success
	// before it is disabled; Disabled is called once when it is.
	DisableAfter time.Duration
	Disabled     func(ctx context.Context, s Subscription)
	// AllowedHosts are the hosts, addresses and prefixes a delivery may reach although
	// they are not public internet addresses (WEBHOOK_ALLOWED_HOSTS: the local stack).
	AllowedHosts []string
	// Poll is how often due deliveries are looked for (500 ms).
	Poll     time.Duration
	Logger   *slog.Logger
	Registry prometheus.Registerer
	Now      func() time.Time
}

// Deliverer sends due deliveries, signed, and records what each attempt saw.
type Deliverer struct {
	o      DelivererOptions
	client *http.Client
	wake   chan struct{}

	mu       sync.Mutex
	inFlight map[int64]int  // by account
	bySub    map[string]int // by subscription: at most half the account's bound each
	total    int

	m delivererMetrics
}

type delivererMetrics struct {
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
	delay    prometheus.Histogram
	ended    *prometheus.CounterVec
}

// NewDeliverer builds a Deliverer.
func NewDeliverer(o DelivererOptions) *Deliverer {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.FirstRetry <= 0 {
		o.FirstRetry = DefaultFirstRetry
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.DisableAfter <= 0 {
		o.DisableAfter = DefaultDisableAfter
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	guard := netguard.New(o.AllowedHosts)
	tr := &http.Transport{
		DialContext:            guard.DialContext(net.Dialer{Timeout: o.AttemptTimeout}),
		TLSHandshakeTimeout:    o.AttemptTimeout,
		ResponseHeaderTimeout:  o.AttemptTimeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	d := &Deliverer{o: o, wake: make(chan struct{}, 1), inFlight: map[int64]int{}, bySub: map[string]int{},
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	d.m = delivererMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhook_attempts_total", Help: "Webhook delivery attempts, by outcome (success, or the failure's word)."}, []string{"outcome"}),
		latency:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "webhook_attempt_seconds", Help: "Time of one webhook delivery attempt.", Buckets: prometheus.DefBuckets}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "webhook_delivery_delay_seconds", Help: "Time from a delivery's creation to its successful attempt.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 21600, 86400}}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhook_deliveries_ended_total", Help: "Webhook deliveries ended, by status."}, []string{"status"}),
	}
	if o.Registry != nil {
		o.Registry.MustRegister(d.m.attempts, d.m.latency, d.m.delay, d.m.ended)
	}
	return d
}

// Wake makes the deliverer look for due deliveries now (one was just queued).
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight.
func (d *Deliverer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(d.o.Poll)
	defer t.Stop()
	for {
		d.claim(ctx, &wg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// claim takes as many due deliveries as there are free workers, none of an account at
// its bound, and starts an attempt of each.
func (d *Deliverer) claim(ctx context.Context, wg *sync.WaitGroup) {
	d.mu.Lock()
	free := d.o.Workers - d.total
	// Accounts and subscriptions at their bound are left out of the claim, so a dead
	// receiver's due retries, however many, never take the places of others' deliveries.
	var capped Exclude
	for acct, n := range d.inFlight {
		if n >= d.o.MaxInFlight {
			capped.Accounts = append(capped.Accounts, acct)
		}
	}
	for sub, n := range d.bySub {
		if n >= d.subBound() {
			capped.Subscriptions = append(capped.Subscriptions, sub)
		}
	}
	d.mu.Unlock()
	if free <= 0 {
		return
	}
	// The lease outlasts an attempt and its record, so no other replica retries it
	// meanwhile; a replica that stops leaves it due again once the lease runs out.
	due, err := d.o.Store.Claim(ctx, d.o.Now(), 2*d.o.AttemptTimeout+10*time.Second, capped, free)
	if err != nil && ctx.Err() == nil {
		d.o.Logger.WarnContext(ctx, "webhook deliveries not claimed", "err", err)
	}
	for _, dl := range due {
		d.mu.Lock()
		if d.inFlight[dl.AccountID] >= d.o.MaxInFlight || d.bySub[dl.SubscriptionID] >= d.subBound() {
			// Claimed by the same query as the account's (or the subscription's) earlier
			// ones: handed back, due now, for a claim once there is room. One dead
			// receiver of an account thus holds half its bound, not all of it.
			d.mu.Unlock()
			_ = d.o.Store.Release(ctx, dl, d.o.Now())
			continue
		}
		d.inFlight[dl.AccountID]++
		d.bySub[dl.SubscriptionID]++
		d.total++
		d.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer d.done(dl.AccountID, dl.SubscriptionID)
			d.attempt(context.WithoutCancel(ctx), dl)
		}()
	}
}

// subBound is the attempts one subscription may have in flight: half its account's.
func (d *Deliverer) subBound() int { return max(1, d.o.MaxInFlight/2) }

func (d *Deliverer) done(acct int64, sub string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total--
	if d.inFlight[acct]--; d.inFlight[acct] <= 0 {
		delete(d.inFlight, acct)
	}
	if d.bySub[sub]--; d.bySub[sub] <= 0 {
		delete(d.bySub, sub)
	}
	d.Wake()
}

// attempt sends dl once and records the outcome.
func (d *Deliverer) attempt(ctx context.Context, dl Delivery) {
	sub, err := d.o.Store.Subscription(ctx, dl.AccountID, dl.SubscriptionID)
	if errors.Is(err, ErrNotFound) || (err == nil && !sub.Enabled) {
		d.record(ctx, dl, Attempt{At: d.o.Now(), Error: "subscription_disabled"}, StatusFailed, time.Time{})
		return
	}
	if err != nil {
		return // the lease runs out and it is tried again
	}
	secrets, err := d.secrets(sub)
	if err != nil {
		d.o.Logger.ErrorContext(ctx, "webhook secret unreadable", "webhook_id", sub.ID, "err", err)
		d.record(ctx, dl, Attempt{At: d.o.Now(), Error: "secret_unreadable"}, StatusFailed, time.Time{})
		return
	}
	a := d.send(ctx, sub, dl, secrets)
	d.m.attempts.WithLabelValues(outcomeOf(a)).Inc()
	switch {
	case a.Error == "":
		d.m.delay.Observe(max(a.At.Sub(dl.CreatedAt), 0).Seconds())
		_ = d.o.Store.Succeeded(ctx, sub.AccountID, sub.ID)
		d.record(ctx, dl, a, StatusSucceeded, time.Time{})
	default:
		if disabled, err := d.o.Store.Failed(ctx, sub.AccountID, sub.ID, a.At, d.o.DisableAfter); err == nil && disabled && d.o.Disabled != nil {
			d.o.Disabled(ctx, sub)
		}
		next := a.At.Add(d.backoff(dl.Attempts))
		if !next.Before(dl.Expires) {
			d.record(ctx, dl, a, StatusFailed, time.Time{})
			return
		}
		d.record(ctx, dl, a, StatusPending, next)
	}
}

func (d *Deliverer) record(ctx context.Context, dl Delivery, a Attempt, status string, next time.Time) {
	ok, err := d.o.Store.Record(ctx, dl, a, status, next)
	if err != nil {
		d.o.Logger.WarnContext(ctx, "webhook attempt not recorded", "delivery_id", dl.ID, "err", err)
	}
	if ok && status != StatusPending {
		d.m.ended.WithLabelValues(status).Inc()
	}
}

// secrets are the subscription's valid secrets: the current one, and the previous one
// while its rotation's overlap lasts.
func (d *Deliverer) secrets(s Subscription) ([][]byte, error) {
	cur, err := d.o.Open(s.Secret, s.ID)
	if err != nil {
		return nil, err
	}
	out := [][]byte{cur}
	if len(s.PrevSecret) > 0 && d.o.Now().Before(s.PrevUntil) {
		if prev, err := d.o.Open(s.PrevSecret, s.ID); err == nil {
			out = append(out, prev)
		}
	}
	return out, nil
}

// send makes one attempt: signed headers, the attempt's timeout, no redirect followed,
// the answer read up to ExcerptBytes and the rest left unread.
func (d *Deliverer) send(ctx context.Context, s Subscription, dl Delivery, secrets [][]byte) Attempt {
	ctx, cancel := context.WithTimeout(ctx, d.o.AttemptTimeout)
	defer cancel()
	start := d.o.Now()
	a := Attempt{At: start}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(dl.Body))
	if err != nil {
		a.Error = "connection"
		return a
	}
	SetHeaders(req.Header, dl.EventID, start, dl.Body, secrets...)
	req.Header.Set("User-Agent", "analytics-platform-webhooks/1")
	req.Header.Set("webhook-sequence", strconv.FormatInt(dl.Seq, 10))
	resp, err := d.client.Do(req)
	a.LatencyMS = d.o.Now().Sub(start).Milliseconds()
	d.m.latency.Observe(float64(a.LatencyMS) / 1000)
	if err != nil {
		a.Error = errorWord(ctx, err)
		return a
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	b, _ := io.ReadAll(io.LimitReader(resp.Body, ExcerptBytes))
	a.Excerpt = validUTF8(b)
	a.LatencyMS = d.o.Now().Sub(start).Milliseconds()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		a.Error = "redirect"
	default:
		a.Error = "status"
	}
	return a
}

// backoff is the delay after the attempts-th failure (0: the first): FirstRetry
// doubled each time, capped at MaxBackoff, drawn between its half and itself.
func (d *Deliverer) backoff(attempts int) time.Duration {
	b := d.o.FirstRetry
	for i := 0; i < attempts && b < d.o.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, d.o.MaxBackoff)
	return b/2 + rand.N(b/2+1)
}

// errorWord is the stable word of a failed attempt with no answer.
func errorWord(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, netguard.ErrNotPublic):
		return "refused_address"
	case ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	}
	return "connection"
}

func outcomeOf(a Attempt) string {
	if a.Error == "" {
		return "success"
	}
	return a.Error
}

// validUTF8 is b as text: invalid bytes, a rune cut at the end included, replaced.
func validUTF8(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }
