package dbtsync

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

// Push providers: who sent a push webhook.
const (
	ProviderGitHub = "github"
	ProviderGitLab = "gitlab"
)

// TriggerPush is the trigger of a job a push webhook started (the API's are "api").
const TriggerPush = "push"

// Webhook secret bounds: GitHub and GitLab accept any string; a short one is guessable.
const (
	MinWebhookSecretBytes = 16
	MaxWebhookSecretBytes = 256
)

// DefaultMaxPushBodyBytes is the default of DBT_SYNC_WEBHOOK_MAX_BYTES: a push's refs and
// ids are all it needs; GitHub caps its payloads at 25 MB, but one that large carries
// thousands of commits nobody reads here.
const DefaultMaxPushBodyBytes = 1 << 20

// DefaultPushDedupRetention is how long a push's delivery id and commit are remembered.
const DefaultPushDedupRetention = 7 * 24 * time.Hour

// PushRequest is a push webhook as it arrived: the provider's headers and the raw body,
// whose bytes the signature covers.
type PushRequest struct {
	Provider   string // ProviderGitHub or ProviderGitLab ("": neither header set)
	Event      string // X-GitHub-Event or X-Gitlab-Event
	DeliveryID string // X-GitHub-Delivery or X-Gitlab-Event-UUID
	Signature  string // X-Hub-Signature-256 (GitHub)
	Token      string // X-Gitlab-Token (GitLab)
	Body       []byte
}

// PushResult is the answer to a push webhook: a started sync (202) or why none started
// (200).
type PushResult struct {
	Started   bool    `json:"started"`
	Reason    string  `json:"reason,omitempty"`
	SyncJobID *string `json:"syncJobId,omitempty"`
	Commit    string  `json:"commit,omitempty"`
}

// Reasons a push starts no sync.
const (
	PushReasonPing              = "ping"
	PushReasonNotPush           = "not_a_push_event"
	PushReasonTag               = "tag_push"
	PushReasonDeleted           = "branch_deleted"
	PushReasonOtherBranch       = "other_branch"
	PushReasonDuplicateDelivery = "duplicate_delivery"
	PushReasonDuplicateCommit   = "duplicate_commit"
)

// pushPayload is what a GitHub or GitLab push event carries that a sync needs.
type pushPayload struct {
	Ref     string `json:"ref"`
	After   string `json:"after"`
	Deleted bool   `json:"deleted"`
}

// errPushUnauthenticated is the one answer to a push nobody can vouch for: an unknown
// deployment, no integration, no secret or a missing or bad signature all read the same,
// so the answer tells a sender nothing about which.
var errPushUnauthenticated = errs.Unauthorizedf("%s", errs.PushUnverified).WithCode(errs.CodeUnauthenticated)

// dummySecret stands in when a deployment has no secret, so a push to it takes the time
// of one that verifies.
var dummySecret = []byte("dbt-push-webhook-no-secret-configured")

// verifyPush reports whether req is signed with secret: GitHub's X-Hub-Signature-256
// (sha256= and the hex HMAC-SHA256 of the body) or GitLab's X-Gitlab-Token (the secret
// itself), each compared in constant time.
func verifyPush(req PushRequest, secret []byte) bool {
	switch req.Provider {
	case ProviderGitHub:
		sig, ok := strings.CutPrefix(req.Signature, "sha256=")
		got, err := hex.DecodeString(sig)
		mac := hmac.New(sha256.New, secret)
		mac.Write(req.Body)
		want := mac.Sum(nil)
		return ok && err == nil && hmac.Equal(got, want)
	case ProviderGitLab:
		a, b := sha256.Sum256([]byte(req.Token)), sha256.Sum256(secret)
		return req.Token != "" && subtle.ConstantTimeCompare(a[:], b[:]) == 1
	}
	return false
}

// isPing is GitHub's ping event, sent when a webhook is created: answered 200, nothing
// started. (GitLab's "Test" button sends a push event of the branch's head, which syncs
// it like any push, once per commit.)
func isPing(req PushRequest) bool {
	return req.Provider == ProviderGitHub && req.Event == "ping"
}

func isPushEvent(req PushRequest) bool {
	return (req.Provider == ProviderGitHub && req.Event == "push") ||
		(req.Provider == ProviderGitLab && (req.Event == "Push Hook" || req.Event == "Tag Push Hook"))
}

// openWebhookSecret opens the integration's sealed secret (nil: none, or unreadable).
func (s *service) openWebhookSecret(in Integration) []byte {
	if len(in.WebhookSecret) == 0 {
		return nil
	}
	plain, err := s.Sealer.Open(in.WebhookSecret, in.DeploymentID)
	if err != nil {
		return nil
	}
	secret, ok := strings.CutPrefix(string(plain), webhookSecretPrefix)
	if !ok {
		return nil // sealed for another field of the deployment
	}
	return []byte(secret)
}

// webhookSecretPrefix marks a sealed webhook secret, so a sealed value of another field
// of the deployment (its git credentials) moved into this one opens to nothing.
const webhookSecretPrefix = "dbt-push-webhook:"

func (s *service) sealWebhookSecret(deploymentID int64, secret string) []byte {
	return s.Sealer.Seal([]byte(webhookSecretPrefix+secret), deploymentID)
}

func (s *service) PushWebhook(ctx context.Context, p *identity.Principal, deploymentID int64, req PushRequest) (PushResult, error) {
	if p == nil || p.Deployment == nil || p.Deployment.ID != deploymentID {
		return PushResult{}, errPushUnauthenticated
	}
	integ, err := s.Integrations.Integration(ctx, deploymentID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return PushResult{}, err
	}
	secret := s.openWebhookSecret(integ)
	verified := verifyPush(req, secret)
	if secret == nil {
		verifyPush(req, dummySecret)
		verified = false
	}
	if !verified {
		return PushResult{}, errPushUnauthenticated
	}
	switch {
	case isPing(req):
		return PushResult{Reason: PushReasonPing}, nil
	case !isPushEvent(req):
		return PushResult{Reason: PushReasonNotPush}, nil
	}
	var body pushPayload
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return PushResult{}, errs.Invalidf("the push payload is not a JSON push event")
	}
	switch {
	case strings.HasPrefix(body.Ref, "refs/tags/"):
		return PushResult{Reason: PushReasonTag}, nil
	case body.Deleted || strings.Trim(body.After, "0") == "":
		return PushResult{Reason: PushReasonDeleted}, nil
	case body.Ref != "refs/heads/"+integ.Branch:
		return PushResult{Reason: PushReasonOtherBranch}, nil
	case !isCommitSHA(body.After):
		return PushResult{}, errs.Invalidf("the push payload's \"after\" is not a commit SHA")
	}
	commit := strings.ToLower(body.After)
	res := PushResult{Commit: commit}
	id := NewSyncJobID(s.now().UTC())
	keys := []string{"commit:" + commit}
	if req.DeliveryID != "" {
		keys = append([]string{"delivery:" + req.Provider + ":" + req.DeliveryID}, keys...)
	}
	var claimed []string
	release := func() {
		for _, k := range claimed {
			_ = s.Pushes.ReleasePush(context.WithoutCancel(ctx), deploymentID, k, id)
		}
	}
	for _, k := range keys {
		owner, err := s.Pushes.ClaimPush(ctx, deploymentID, k, id, s.now().UTC(), s.pushDedup)
		if err != nil {
			release()
			return res, QueueUnavailable(err)
		}
		if owner != id {
			release()
			res.Reason, res.SyncJobID = PushReasonDuplicateCommit, &owner
			if strings.HasPrefix(k, "delivery:") {
				res.Reason = PushReasonDuplicateDelivery
			}
			return res, nil
		}
		claimed = append(claimed, k)
	}
	queue := QueueKey{Account: p.Account.ID, Deployment: deploymentID}
	if err := s.queueHasRoom(ctx, queue); err != nil {
		release()
		return res, err
	}
	ref := integ.Branch
	job := s.newJob(ctx, p, deploymentID, id, Job{Source: SourceGit, Output: OutputBranch, Ref: &ref, BranchName: derivedBranchName(integ.Branch),
		Commit: commit, Trigger: TriggerPush, DeliveryID: req.DeliveryID})
	job.Select, job.Exclude = strPtr(integ.Select), strPtr(integ.Exclude)
	if err := s.enqueue(ctx, job); err != nil {
		release()
		return res, err
	}
	res.Started, res.SyncJobID = true, &id
	return res, nil
}

// isCommitSHA: 40 (SHA-1) or 64 (SHA-256) hex digits.
func isCommitSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
