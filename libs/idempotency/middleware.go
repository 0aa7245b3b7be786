package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/sealbox"
)

// KeptHeaders are the response headers a record keeps and a replay sends again.
var KeptHeaders = []string{"Content-Type", "Location", "ETag", "Cache-Control"}

// Options configure a Middleware.
type Options struct {
	Store    Store
	Settings Settings
	Logger   *slog.Logger
	// Exclude lists "METHOD /pattern" routes that take no key: POSTs idempotent by
	// nature, whose header is ignored.
	Exclude []string
	// TTL gives a route's own replay window ("METHOD /pattern"), shorter than Settings.TTL.
	TTL map[string]time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Sealer, when set, seals every kept answer body before the store sees it, bound to
	// its request's fingerprint, and opens it on a replay: answers carry secrets (a
	// created API key, a session id, a data token) that must not rest in the clear.
	Sealer Sealer
}

// Sealer seals and opens kept answer bodies (a *sealbox.Box).
type Sealer interface {
	Seal(plain, ad []byte) []byte
	Open(sealed, ad []byte) ([]byte, error)
}

// NewSealer is the Sealer of a 32-byte key (identity.Signer.SealKey).
func NewSealer(key []byte) (Sealer, error) {
	return sealbox.Parse("idempotency seal key", base64.StdEncoding.EncodeToString(key))
}

// Middleware deduplicates the POSTs of a service by their Idempotency-Key.
type Middleware struct {
	o Options
}

// New returns the middleware.
func New(o Options) *Middleware {
	o.Settings = o.Settings.withDefaults()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Middleware{o: o}
}

// Wrap is the httpx.HandleOptions hook: it wraps h when the route takes a key (a POST
// not in Exclude) and returns h itself otherwise.
func (m *Middleware) Wrap(method, pattern string, h http.Handler) http.Handler {
	route := method + " " + pattern
	if m == nil || method != http.MethodPost {
		return h
	}
	for _, x := range m.o.Exclude {
		if x == route {
			return h
		}
	}
	ttl := m.o.Settings.TTL
	if d, ok := m.o.TTL[route]; ok && d > 0 && d < ttl {
		ttl = d
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, h, ttl) })
}

// Routes filters routes ("METHOD /pattern") to those that take a key.
func (m *Middleware) Routes(routes []string) []string {
	var out []string
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt, " ")
		if method != http.MethodPost {
			continue
		}
		excluded := false
		for _, x := range m.o.Exclude {
			excluded = excluded || x == rt
		}
		if !excluded {
			out = append(out, rt)
		}
	}
	return out
}

// ScopeOf names the account and the credential of the request's principal: the API key
// id, the user id of a bearer token, the embed session id.
func ScopeOf(p *identity.Principal) (account, credential string, ok bool) {
	if p == nil {
		return "", "", false
	}
	account = strconv.FormatInt(p.Account.ID, 10)
	switch {
	case p.Credential == identity.CredentialAPIKey && p.KeyID != "":
		return account, "key:" + p.KeyID, true
	case p.Credential == identity.CredentialBearer && p.User != nil:
		return account, "user:" + strconv.FormatInt(p.User.ID, 10), true
	case p.Credential == identity.CredentialEmbed && p.Embed != nil && p.Embed.SessionID != "":
		return account, "embed:" + p.Embed.SessionID, true
	}
	return "", "", false
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, h http.Handler, ttl time.Duration) {
	values := r.Header.Values(Header)
	if len(values) == 0 {
		h.ServeHTTP(w, r)
		return
	}
	if len(values) > 1 {
		errs.WriteBody(w, http.StatusBadRequest, errs.CodeIdempotencyKeyInvalid, "send one Idempotency-Key header, not "+strconv.Itoa(len(values)))
		return
	}
	key, err := ParseKey(values[0])
	if err != nil {
		errs.WriteBody(w, http.StatusBadRequest, errs.CodeIdempotencyKeyInvalid, "Idempotency-Key: "+strings.TrimPrefix(err.Error(), ErrInvalidKey.Error()+": "))
		return
	}
	account, credential, ok := ScopeOf(identity.FromContext(r.Context()))
	if !ok {
		h.ServeHTTP(w, r) // no credential to scope a key to: the route's own checks answer
		return
	}
	ctx := r.Context()
	sc := Scope{Account: account, Credential: credential, Key: key}
	s := m.o.Settings
	now := m.o.Now()
	claim, rec, err := m.o.Store.Claim(ctx, sc, now, now.Add(s.Lease), now.Add(ttl))
	if err != nil {
		errs.Write(ctx, w, m.o.Logger, err)
		return
	}
	fp := newFingerprint(r)
	if rec != nil {
		m.answerRecord(w, r, fp, rec, now)
		return
	}
	u, err := m.o.Store.Use(ctx, account, now, s.TTL, 1, 0)
	if err != nil {
		m.release(claim)
		errs.Write(ctx, w, m.o.Logger, err)
		return
	}
	if u.Records > s.MaxRecords || u.Bytes >= int64(s.MaxBytes) {
		m.release(claim)
		_, _ = m.o.Store.Use(context.WithoutCancel(ctx), account, now, s.TTL, -1, 0)
		w.Header().Set("Retry-After", "3600")
		msg := fmt.Sprintf("the account holds %d Idempotency-Key records within %s; at most %d are kept", u.Records-1, s.TTL, s.MaxRecords)
		if u.Records <= s.MaxRecords {
			msg = fmt.Sprintf("the account's Idempotency-Key answers hold %d bytes within %s; at most %d bytes are kept", u.Bytes, s.TTL, int64(s.MaxBytes))
		}
		errs.WriteBody(w, http.StatusTooManyRequests, errs.CodeIdempotencyLimit, msg)
		return
	}

	stop := m.renew(ctx, claim)
	body := r.Body
	if body == nil {
		body = http.NoBody
	}
	hashed := &hashingReader{r: body, h: fp.h}
	r.Body = hashed
	rw := &recorder{ResponseWriter: w, max: int(s.MaxAnswerBytes)}
	completed := false
	defer func() {
		stop()
		if !completed {
			m.release(claim) // a panic: nothing worth replaying is known
		}
	}()
	h.ServeHTTP(rw, r)
	// The fingerprint is of the whole body: what the handler left unread is read now.
	_, drainErr := io.Copy(io.Discard, hashed)
	completed = true
	status := rw.statusCode()
	if drainErr != nil || status >= 500 || status == http.StatusTooManyRequests {
		// Not done, or not known to be: the key is free for a retry that acts.
		m.release(claim)
		return
	}
	a := Answer{Status: status, Header: map[string]string{}}
	for _, k := range KeptHeaders {
		if v := rw.Header().Get(k); v != "" {
			a.Header[k] = v
		}
	}
	if rw.overflow {
		a.Omitted = true
	} else {
		a.Body = rw.body.Bytes()
		if m.o.Sealer != nil && len(a.Body) > 0 {
			a.Body = m.o.Sealer.Seal(a.Body, fp.sum())
		}
	}
	bg := context.WithoutCancel(ctx)
	if err := m.o.Store.Complete(bg, claim, fp.sum(), a); err != nil {
		m.o.Logger.Warn("idempotency answer not stored", "err", err, "key_scope", credential)
		return
	}
	if n := int64(len(a.Body)); n > 0 {
		_, _ = m.o.Store.Use(bg, account, now, s.TTL, 0, n)
	}
}

func (m *Middleware) answerRecord(w http.ResponseWriter, r *http.Request, fp *fingerprint, rec *Record, now time.Time) {
	if rec.Running {
		secs := int(math.Ceil(rec.LeaseUntil.Sub(now).Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(1, min(secs, 5))))
		errs.WriteBody(w, http.StatusConflict, errs.CodeIdempotencyKeyInUse, "the first request with this Idempotency-Key is still running; retry after it answers")
		return
	}
	if r.Body != nil {
		if _, err := io.Copy(fp.h, r.Body); err != nil {
			errs.Write(r.Context(), w, m.o.Logger, err)
			return
		}
	}
	if !bytes.Equal(fp.sum(), rec.Fingerprint) {
		errs.WriteBody(w, http.StatusUnprocessableEntity, errs.CodeIdempotencyKeyReused, "this Idempotency-Key was used with another request (method, path or body); send a new key")
		return
	}
	body, omitted := rec.Answer.Body, rec.Answer.Omitted
	if m.o.Sealer != nil && len(body) > 0 {
		plain, err := m.o.Sealer.Open(body, rec.Fingerprint)
		if err != nil {
			// Sealed under a key this process no longer holds: replayed as an answer
			// too large to keep is, status and headers without the body.
			m.o.Logger.Warn("idempotency answer cannot be opened; replayed without its body", "err", err)
			plain, omitted = nil, true
		}
		body = plain
	}
	for k, v := range rec.Answer.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set(ReplayedHeader, "true")
	if omitted {
		w.Header().Del("Content-Type")
		w.Header().Set("Content-Length", "0")
	}
	w.WriteHeader(rec.Answer.Status)
	_, _ = w.Write(body)
}

func (m *Middleware) release(c *Claim) {
	if err := m.o.Store.Release(context.Background(), c); err != nil {
		m.o.Logger.Warn("idempotency claim not released; it lapses with its lease", "err", err)
	}
}

// renew extends the claim's lease while the request runs, so a long request (a large
// upload) keeps its key; it returns the function that stops it.
func (m *Middleware) renew(ctx context.Context, c *Claim) func() {
	lease := m.o.Settings.Lease
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := m.o.Store.Renew(context.WithoutCancel(ctx), c, m.o.Now().Add(lease)); errors.Is(err, ErrClaimLost) {
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// fingerprint is the SHA-256 of the method, the path and query, and the body.
type fingerprint struct{ h hash.Hash }

func newFingerprint(r *http.Request) *fingerprint {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", r.Method, r.URL.Path, r.URL.RawQuery)
	return &fingerprint{h: h}
}

func (f *fingerprint) sum() []byte { return f.h.Sum(nil) }

// hashingReader hashes what is read through it: the body is streamed, never buffered.
type hashingReader struct {
	r io.ReadCloser
	h hash.Hash
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	return n, err
}

func (hr *hashingReader) Close() error { return hr.r.Close() }

// recorder passes the answer through and keeps its status and up to max body bytes.
type recorder struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	max      int
	overflow bool
}

func (rw *recorder) WriteHeader(code int) {
	if rw.status == 0 {
		rw.status = code
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recorder) Write(p []byte) (int, error) {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	if !rw.overflow {
		if rw.body.Len()+len(p) > rw.max {
			rw.overflow = true
			rw.body = bytes.Buffer{}
		} else {
			rw.body.Write(p)
		}
	}
	return rw.ResponseWriter.Write(p)
}

func (rw *recorder) statusCode() int {
	if rw.status == 0 {
		return http.StatusOK
	}
	return rw.status
}

func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
