package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/kit"
	"github.com/analyticsco/platform/libs/netguard"
	"github.com/analyticsco/platform/libs/sealbox"
)

// Service is the webhooks API: an account's subscriptions and their deliveries.
type Service interface {
	Create(ctx context.Context, p *identity.Principal, in Input) (Created, error)
	List(ctx context.Context, p *identity.Principal, first int, after string) (httpx.Page[Subscription], error)
	Get(ctx context.Context, p *identity.Principal, id string) (Subscription, error)
	Update(ctx context.Context, p *identity.Principal, id string, patch Patch) (Subscription, error)
	Delete(ctx context.Context, p *identity.Principal, id string) error
	RotateSecret(ctx context.Context, p *identity.Principal, id string) (Rotated, error)
	ListDeliveries(ctx context.Context, p *identity.Principal, id string, q DeliveryQuery) (httpx.Page[Delivery], error)
	Redeliver(ctx context.Context, p *identity.Principal, id, deliveryID string) (Delivery, error)
	Ping(ctx context.Context, p *identity.Principal, id string) (Delivery, error)
}

// Store is what the API keeps subscriptions and reads deliveries in
// (webhookstore.Mongo).
type Store interface {
	CreateSubscription(ctx context.Context, s Subscription, max int) error
	GetSubscription(ctx context.Context, account int64, id string) (Subscription, error)
	ListSubscriptions(ctx context.Context, account int64, afterID string, limit int) ([]Subscription, error)
	UpdateSubscription(ctx context.Context, account int64, id string, readAt time.Time, f Fields, now time.Time) (Subscription, error)
	RotateSecret(ctx context.Context, account int64, id string, prevSealed, sealed []byte, prevUntil, now time.Time) (Subscription, error)
	DeleteSubscription(ctx context.Context, account int64, id string) error
	ListDeliveries(ctx context.Context, account int64, sub, status, beforeID string, limit int) ([]Delivery, error)
	Redeliver(ctx context.Context, account int64, sub, id string, now, expires time.Time) (Delivery, error)
	InsertPing(ctx context.Context, account int64, sub string, now, expires time.Time) (Delivery, error)
}

// Fields are what an update sets: the whole new value of each.
type Fields struct {
	URL            string
	Events         []string
	DeploymentIDs  []int64 // nil: every event of the account
	Enabled        bool
	IncludeRefused bool
	Description    string
}

// The store's answers the service tells apart (besides ErrNotFound and ErrLimit).
var (
	ErrChanged = errors.New("webhooks: the subscription changed since it was read")
	ErrPending = errors.New("webhooks: the delivery is pending already")
)

// Deployments says whose a deployment is (ErrNotFound: nobody's).
type Deployments interface {
	AccountOf(ctx context.Context, deploymentID int64) (int64, error)
}

// Ports are the service's dependencies.
type Ports struct {
	Store       Store
	Deployments Deployments
	// Box seals the signing secrets (the embed key box), the subscription id as
	// associated data.
	Box *sealbox.Box
}

// Limits of the API, as configured.
type Limits struct {
	MaxSubscriptions int           // per account (WEBHOOK_MAX_SUBSCRIPTIONS)
	SecretOverlap    time.Duration // a rotated secret stays valid this long (WEBHOOK_SECRET_OVERLAP)
	RetryPeriod      time.Duration // a redelivery or ping is retried this long (WEBHOOK_RETRY_PERIOD)
	// AllowedHosts may be reached although loopback or private, and over http
	// (WEBHOOK_ALLOWED_HOSTS: names, addresses, CIDR prefixes).
	AllowedHosts []string
}

// Defaults of Limits.
const (
	DefaultMaxSubscriptions = 25
	DefaultSecretOverlap    = 24 * time.Hour
	DefaultRetryPeriod      = 24 * time.Hour
)

// Options configure the service.
type Options struct {
	Limits Limits
	Now    func() time.Time
	// What the service's decorators are built from, each nil to leave its decorator out:
	// the audit trail (audit.go), the logger of the changes done (logging.go) and the
	// API's counters (metrics.go).
	Audit   audit.Recorder
	Logger  *slog.Logger
	Metrics *APIMetrics
}

// Created is a new subscription with its secret, shown this once.
type Created struct {
	Subscription
	SecretText string
}

// Rotated is a subscription's new secret and when the previous one stops being valid.
type Rotated struct {
	Subscription
	SecretText string
}

// Input is a new subscription as POST /api/v1/webhooks asks for it (decoded, its
// grammar checked).
type Input struct {
	URL            string
	Events         []string
	DeploymentIDs  []int64 // nil: not given
	Enabled        bool
	IncludeRefused bool
	Description    string
}

// Patch is what PATCH /api/v1/webhooks/{id} changes; nil fields are left.
type Patch struct {
	URL            *string
	Events         []string // nil: left
	DeploymentIDs  *[]int64 // set: *DeploymentIDs nil means every deployment (null)
	Enabled        *bool
	IncludeRefused *bool
	Description    *string
}

// DeliveryQuery pages a subscription's deliveries.
type DeliveryQuery struct {
	First  int
	After  string // the last delivery id of the previous page
	Status string // "": any
}

// Audit actions of the API (embed-svc records embed. actions only).
const (
	ActionCreate    = "embed.webhook.create"
	ActionUpdate    = "embed.webhook.update"
	ActionDelete    = "embed.webhook.delete"
	ActionRotate    = "embed.webhook.secret.rotate"
	ActionPing      = "embed.webhook.ping"
	ActionRedeliver = "embed.webhook.redeliver"
	ActionDisable   = "embed.webhook.disable" // the deliverer, after failures lasting WEBHOOK_DISABLE_AFTER
	TargetWebhook   = "webhook"
)

// SecretPrefix starts every secret as shown ("whsec_" and the base64 of its bytes).
const SecretPrefix = "whsec_"

// secretBytes is a secret's length.
const secretBytes = 32

// Errors of the API.
var (
	ErrForbidden    = errs.Forbiddenf("managing webhooks requires an admin's bearer token or API key")
	errNotFound     = errs.NotFoundf("webhook not found").WithCode(errs.CodeWebhookNotFound)
	errDelNotFound  = errs.NotFoundf("delivery not found").WithCode(errs.CodeDeliveryNotFound)
	errDelPending   = errs.Conflictf("the delivery is pending already: it will be attempted again").WithCode(errs.CodeDeliveryPending)
	errChanged      = errs.Conflictf("the webhook changed while it was being updated; read it again and retry")
	errNullOutScope = errs.Forbiddenf("this credential is scoped to deployments: deploymentIds must name some of them, not every deployment").WithCode(errs.CodeKeyOutOfScope)
)

type service struct {
	p   Ports
	lim Limits
	now func() time.Time
	g   *netguard.Guard
}

// NewService serves the webhooks API over p, wrapped in its decorators in the platform's
// order (kit.Decorate).
func NewService(p Ports, o Options) Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Limits.MaxSubscriptions <= 0 {
		o.Limits.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if o.Limits.SecretOverlap <= 0 {
		o.Limits.SecretOverlap = DefaultSecretOverlap
	}
	if o.Limits.RetryPeriod <= 0 {
		o.Limits.RetryPeriod = DefaultRetryPeriod
	}
	s := &service{p: p, lim: o.Limits, now: o.Now, g: netguard.New(o.Limits.AllowedHosts)}
	return kit.Decorate[Service](s, kit.Decorators[Service]{Audit: auditingMiddleware(o.Audit), Log: loggingMiddleware(o.Logger), Metrics: instrumentingMiddleware(o.Metrics)})
}

func (s *service) clock() time.Time { return s.now().UTC().Truncate(time.Millisecond) }

// authorize: admins only, by a user's bearer token (a service account's included) or an
// API key, as the audit trail it delivers. It returns the credential's deployment scope
// (nil: unscoped).
func authorize(p *identity.Principal) ([]int64, error) {
	if p == nil || !p.HasRole(identity.RoleAdmin) ||
		(p.Credential != identity.CredentialBearer && p.Credential != identity.CredentialAPIKey) {
		return nil, ErrForbidden
	}
	if len(p.KeyScope) > 0 {
		return p.KeyScope, nil
	}
	return nil, nil
}

// visible: a scoped credential sees the subscriptions whose deployments are all in its
// scope; an unscoped one every subscription of the account.
func visible(scope []int64, sub Subscription) bool {
	if scope == nil {
		return true
	}
	if sub.DeploymentIDs == nil {
		return false
	}
	for _, d := range sub.DeploymentIDs {
		if !slices.Contains(scope, d) {
			return false
		}
	}
	return true
}

// checkURL: an absolute https URL (http only to a host the operator allowed), with no
// user information or fragment, naming no address that may not be reached.
func (s *service) checkURL(raw string) error {
	bad := func(why string) error {
		return errs.Invalidf("url %s", why).WithCode(errs.CodeInvalidWebhookURL)
	}
	if len(raw) > MaxURLBytes {
		return bad(fmt.Sprintf("must be at most %d bytes", MaxURLBytes))
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return bad("must be an absolute URL such as https://hooks.example.com/platform")
	}
	if u.User != nil {
		return bad("must not hold a user name or password: authenticate the deliveries by their signature")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return bad("must not have a fragment")
	}
	host := u.Hostname()
	allowed := s.g.HostAllowed(host)
	if a, err := netip.ParseAddr(host); err == nil {
		if s.g.Check("", a) != nil {
			return bad(fmt.Sprintf("names the address %s, which is not a public internet address: webhooks are delivered to public addresses only", a))
		}
		allowed = allowed || !s.g.Public(a) // an address the operator allowed
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowed {
			return bad("must use https (http only to a host the platform's operator allows)")
		}
	default:
		return bad("must use https")
	}
	return nil
}

// checkDeployments: a scoped credential's subscription names deployments of its scope
// (its whole scope when it names none); an unscoped one's names its account's.
func (s *service) checkDeployments(ctx context.Context, p *identity.Principal, scope []int64, ids []int64, given bool) ([]int64, error) {
	if scope != nil {
		if !given {
			return slices.Clone(scope), nil
		}
		if ids == nil {
			return nil, errNullOutScope
		}
		for _, d := range ids {
			if !slices.Contains(scope, d) {
				return nil, errs.Forbiddenf("this credential is scoped to other deployments than %d", d).WithCode(errs.CodeKeyOutOfScope)
			}
		}
		return ids, nil
	}
	for _, d := range ids {
		acc, err := s.p.Deployments.AccountOf(ctx, d)
		switch {
		case errors.Is(err, ErrNotFound) || (err == nil && acc != p.Account.ID):
			return nil, errs.NotFoundf("deployment %d not found", d)
		case err != nil:
			return nil, err
		}
	}
	return ids, nil
}

func newSecret() ([]byte, string) {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b)
	return b, SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

func storeErr(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return errNotFound
	case errs.IsUnavailable(err):
		return errors.Join(errs.Unavailablef("the webhooks store is temporarily unavailable; retry shortly"), err)
	}
	return err
}

func (s *service) Create(ctx context.Context, p *identity.Principal, in Input) (Created, error) {
	scope, err := authorize(p)
	if err != nil {
		return Created{}, err
	}
	if err := s.checkURL(in.URL); err != nil {
		return Created{}, err
	}
	deps, err := s.checkDeployments(ctx, p, scope, in.DeploymentIDs, in.DeploymentIDs != nil)
	if err != nil {
		return Created{}, err
	}
	now := s.clock()
	id := "wh_" + audit.NewID(now)
	raw, text := newSecret()
	sub := Subscription{ID: id, AccountID: p.Account.ID, DeploymentIDs: deps, URL: in.URL, Events: in.Events, IncludeRefused: in.IncludeRefused,
		Enabled: in.Enabled, Description: in.Description, Secret: s.p.Box.Seal(raw, []byte(id)), CreatedAt: now, UpdatedAt: now,
		CreatedBy: audit.ActorOf(p).ID}
	if err := s.p.Store.CreateSubscription(ctx, sub, s.lim.MaxSubscriptions); err != nil {
		if errors.Is(err, ErrLimit) {
			return Created{}, errs.Conflictf("the account has %d webhooks, the most an account may have: delete one first", s.lim.MaxSubscriptions).
				WithCode(errs.CodeWebhookLimit)
		}
		return Created{}, storeErr(err)
	}
	return Created{Subscription: sub, SecretText: text}, nil
}

// read is the caller's subscription id (errNotFound when it is none it may see).
func (s *service) read(ctx context.Context, p *identity.Principal, id string) (Subscription, []int64, error) {
	scope, err := authorize(p)
	if err != nil {
		return Subscription{}, nil, err
	}
	sub, err := s.p.Store.GetSubscription(ctx, p.Account.ID, id)
	if err != nil {
		return Subscription{}, nil, storeErr(err)
	}
	if !visible(scope, sub) {
		return Subscription{}, nil, errNotFound
	}
	return sub, scope, nil
}

func (s *service) Get(ctx context.Context, p *identity.Principal, id string) (Subscription, error) {
	sub, _, err := s.read(ctx, p, id)
	return sub, err
}

// listScan bounds the subscriptions one page of a scoped credential's list reads.
const listScan = 1000

func (s *service) List(ctx context.Context, p *identity.Principal, first int, after string) (httpx.Page[Subscription], error) {
	scope, err := authorize(p)
	if err != nil {
		return httpx.Page[Subscription]{}, err
	}
	var out []Subscription
	more := false
	for scanned := 0; scanned < listScan; {
		batch, err := s.p.Store.ListSubscriptions(ctx, p.Account.ID, after, first+1)
		if err != nil {
			return httpx.Page[Subscription]{}, storeErr(err)
		}
		scanned += len(batch)
		for _, sub := range batch {
			if !visible(scope, sub) {
				continue
			}
			if len(out) == first {
				more = true
				break
			}
			out = append(out, sub)
		}
		if more || len(batch) <= first {
			break
		}
		after = batch[len(batch)-1].ID
	}
	if out == nil {
		out = []Subscription{}
	}
	return httpx.PageOf(out, more, func(x Subscription) string { return x.ID }), nil
}

func (s *service) Update(ctx context.Context, p *identity.Principal, id string, patch Patch) (Subscription, error) {
	for try := 0; ; try++ {
		sub, scope, err := s.read(ctx, p, id)
		if err != nil {
			return Subscription{}, err
		}
		f := Fields{URL: sub.URL, Events: sub.Events, DeploymentIDs: sub.DeploymentIDs, Enabled: sub.Enabled, IncludeRefused: sub.IncludeRefused,
			Description: sub.Description}
		if patch.URL != nil {
			if err := s.checkURL(*patch.URL); err != nil {
				return Subscription{}, err
			}
			f.URL = *patch.URL
		}
		if patch.Events != nil {
			f.Events = patch.Events
		}
		if patch.DeploymentIDs != nil {
			if f.DeploymentIDs, err = s.checkDeployments(ctx, p, scope, *patch.DeploymentIDs, true); err != nil {
				return Subscription{}, err
			}
		}
		if patch.Enabled != nil {
			f.Enabled = *patch.Enabled
		}
		if patch.IncludeRefused != nil {
			f.IncludeRefused = *patch.IncludeRefused
		}
		if patch.Description != nil {
			f.Description = *patch.Description
		}
		out, err := s.p.Store.UpdateSubscription(ctx, p.Account.ID, id, sub.UpdatedAt, f, s.clock())
		if errors.Is(err, ErrChanged) {
			if try < 3 {
				continue
			}
			return Subscription{}, errChanged
		}
		if err != nil {
			return Subscription{}, storeErr(err)
		}
		return out, nil
	}
}

func (s *service) Delete(ctx context.Context, p *identity.Principal, id string) error {
	if _, _, err := s.read(ctx, p, id); err != nil {
		return err
	}
	return storeErr(s.p.Store.DeleteSubscription(ctx, p.Account.ID, id))
}

func (s *service) RotateSecret(ctx context.Context, p *identity.Principal, id string) (Rotated, error) {
	for try := 0; ; try++ {
		sub, _, err := s.read(ctx, p, id)
		if err != nil {
			return Rotated{}, err
		}
		raw, text := newSecret()
		now := s.clock()
		out, err := s.p.Store.RotateSecret(ctx, p.Account.ID, id, sub.Secret, s.p.Box.Seal(raw, []byte(id)), now.Add(s.lim.SecretOverlap), now)
		if errors.Is(err, ErrChanged) {
			if try < 3 {
				continue
			}
			return Rotated{}, errChanged
		}
		if err != nil {
			return Rotated{}, storeErr(err)
		}
		return Rotated{Subscription: out, SecretText: text}, nil
	}
}

func (s *service) ListDeliveries(ctx context.Context, p *identity.Principal, id string, q DeliveryQuery) (httpx.Page[Delivery], error) {
	if _, _, err := s.read(ctx, p, id); err != nil {
		return httpx.Page[Delivery]{}, err
	}
	items, err := s.p.Store.ListDeliveries(ctx, p.Account.ID, id, q.Status, q.After, q.First+1)
	if err != nil {
		return httpx.Page[Delivery]{}, storeErr(err)
	}
	more := len(items) > q.First
	return httpx.PageOf(items[:min(len(items), q.First)], more, func(d Delivery) string { return d.ID }), nil
}

func (s *service) Redeliver(ctx context.Context, p *identity.Principal, id, deliveryID string) (Delivery, error) {
	if _, _, err := s.read(ctx, p, id); err != nil {
		return Delivery{}, err
	}
	now := s.clock()
	d, err := s.p.Store.Redeliver(ctx, p.Account.ID, id, deliveryID, now, now.Add(s.lim.RetryPeriod))
	switch {
	case errors.Is(err, ErrNotFound):
		return Delivery{}, errDelNotFound
	case errors.Is(err, ErrPending):
		return Delivery{}, errDelPending
	case err != nil:
		return Delivery{}, storeErr(err)
	}
	return d, nil
}

func (s *service) Ping(ctx context.Context, p *identity.Principal, id string) (Delivery, error) {
	if _, _, err := s.read(ctx, p, id); err != nil {
		return Delivery{}, err
	}
	now := s.clock()
	d, err := s.p.Store.InsertPing(ctx, p.Account.ID, id, now, now.Add(s.lim.RetryPeriod))
	if err != nil {
		return Delivery{}, storeErr(err)
	}
	return d, nil
}
