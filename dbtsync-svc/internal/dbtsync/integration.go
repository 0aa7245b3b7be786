package dbtsync

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// Integration is a deployment's saved dbt git integration.
type Integration struct {
	DeploymentID int64
	RepoURL      string
	Branch       string
	ProjectPath  string
	ManifestPath string // "": none
	Select       string // the model selector's select ("": every model)
	Exclude      string // and its exclude ("": none)
	Credentials  []byte // sealed GitCredentials (see Sealer); empty: none
	// WebhookSecret is the push webhook's secret, sealed (webhookSecretPrefix and the
	// secret); empty: none, and pushes are refused.
	WebhookSecret []byte
	UpdatedAt     time.Time
}

// GitCredentials authenticate https clones; they are stored sealed and never returned.
type GitCredentials struct {
	Username string `json:"username,omitempty"`
	Token    string `json:"token"`
}

// RepositoryRefusedError is a repository URL the platform will not clone; Reason says why
// in words safe to show the caller.
type RepositoryRefusedError struct{ Reason string }

func (e *RepositoryRefusedError) Error() string { return "refused repository host: " + e.Reason }

// validate checks an integration before anything else of it is looked at.
func (in IntegrationInput) validate() error {
	switch {
	case in.RepoURL == "":
		return errs.Invalidf("field \"repoUrl\" is required")
	case !strings.HasPrefix(in.RepoURL, "https://") && !strings.HasPrefix(in.RepoURL, "file://"):
		return errs.Invalidf("field \"repoUrl\" must be an https:// or file:// URL")
	case strings.Contains(urlAuthority(in.RepoURL), "@"):
		return errs.Invalidf("field \"repoUrl\" must not carry credentials: send them in \"credentials\"")
	case in.Branch == "":
		return errs.Invalidf("field \"branch\" is required")
	case !ValidRef(in.Branch):
		return errs.Invalidf("field \"branch\" must be a branch name")
	case in.ProjectPath == nil:
		return errs.Invalidf("field \"projectPath\" is required")
	case strings.Contains(*in.ProjectPath, ".."):
		return errs.Invalidf("field \"projectPath\" must stay inside the repository (no \"..\")")
	case in.ManifestPath != nil && strings.Contains(*in.ManifestPath, ".."):
		return errs.Invalidf("field \"manifestPath\" must stay inside the repository (no \"..\")")
	case in.Credentials != nil && in.Credentials.Token == "":
		return errs.Invalidf("field \"credentials.token\" is required")
	case in.WebhookSecret.Value != nil && (len(*in.WebhookSecret.Value) < MinWebhookSecretBytes || len(*in.WebhookSecret.Value) > MaxWebhookSecretBytes):
		return errs.Invalidf("field \"webhookSecret\" must be %d to %d bytes long, not %d", MinWebhookSecretBytes, MaxWebhookSecretBytes, len(*in.WebhookSecret.Value))
	}
	return nil
}

// urlAuthority is what follows an https:// or file:// scheme up to the path.
func urlAuthority(u string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "file://")
	return strings.SplitN(rest, "/", 2)[0]
}

func integrationView(d Integration) DbtGitIntegration {
	v := DbtGitIntegration{DeploymentID: d.DeploymentID, RepoURL: d.RepoURL, Branch: d.Branch, ProjectPath: d.ProjectPath,
		HasCredentials: len(d.Credentials) > 0, WebhookSecretSet: len(d.WebhookSecret) > 0, UpdatedAt: httpx.At(d.UpdatedAt.UTC())}
	if d.ManifestPath != "" {
		mp := d.ManifestPath
		v.ManifestPath = &mp
	}
	v.Select, v.Exclude = strPtr(d.Select), strPtr(d.Exclude)
	return v
}

func (s *service) PutIntegration(ctx context.Context, p *identity.Principal, deploymentID int64, in IntegrationInput) (DbtGitIntegration, error) {
	if err := authorize(p, roleIntegration); err != nil {
		return DbtGitIntegration{}, err
	}
	if err := in.validate(); err != nil {
		return DbtGitIntegration{}, err
	}
	if err := s.Git.CheckRepository(ctx, in.RepoURL); err != nil {
		var refused *RepositoryRefusedError
		if errors.As(err, &refused) {
			return DbtGitIntegration{}, errs.Invalidf("field \"repoUrl\": %s", refused.Reason)
		}
		return DbtGitIntegration{}, err
	}
	d := Integration{DeploymentID: deploymentID, RepoURL: in.RepoURL, Branch: in.Branch, ProjectPath: *in.ProjectPath, UpdatedAt: s.now().UTC()}
	if in.ManifestPath != nil {
		d.ManifestPath = *in.ManifestPath
	}
	var err error
	if d.Select, d.Exclude, err = s.integrationSelector(ctx, deploymentID, in, d.ManifestPath); err != nil {
		return DbtGitIntegration{}, err
	}
	if in.Credentials != nil {
		plain, _ := json.Marshal(in.Credentials)
		d.Credentials = s.Sealer.Seal(plain, deploymentID)
	}
	switch {
	case in.WebhookSecret.Value != nil:
		d.WebhookSecret = s.sealWebhookSecret(deploymentID, *in.WebhookSecret.Value)
	case !in.WebhookSecret.Set:
		stored, err := s.Integrations.Integration(ctx, deploymentID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return DbtGitIntegration{}, err
		}
		d.WebhookSecret = stored.WebhookSecret
	}
	// As for a sync's ref: a name that looks like a commit SHA is accepted when the
	// repository has it as a branch or tag.
	if LooksLikeSHA(d.Branch) {
		if ok, err := s.Git.HasRef(ctx, d, d.Branch); err == nil && !ok {
			return DbtGitIntegration{}, errs.Invalidf("field \"branch\": %q is neither a branch nor a tag of the repository at %s (a commit SHA is not accepted)", d.Branch, RepoHost(d.RepoURL))
		}
	}
	if err := s.Integrations.SaveIntegration(ctx, d); err != nil {
		return DbtGitIntegration{}, err
	}
	return integrationView(d), nil
}

func (s *service) GetIntegration(ctx context.Context, p *identity.Principal, deploymentID int64) (DbtGitIntegration, error) {
	if err := authorize(p, roleIntegration); err != nil {
		return DbtGitIntegration{}, err
	}
	d, err := s.Integrations.Integration(ctx, deploymentID)
	if errors.Is(err, ErrNotFound) {
		return DbtGitIntegration{}, errs.NotFoundf("deployment %d has no dbt git integration", deploymentID)
	}
	if err != nil {
		return DbtGitIntegration{}, err
	}
	return integrationView(d), nil
}
