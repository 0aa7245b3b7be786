package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// integrationDoc is a deployment's dbt git integration.
type integrationDoc struct {
	DeploymentID int64     `bson:"_id"`
	RepoURL      string    `bson:"repoUrl"`
	Branch       string    `bson:"branch"`
	ProjectPath  string    `bson:"projectPath"`
	ManifestPath string    `bson:"manifestPath,omitempty"`
	Select       string    `bson:"select,omitempty"`
	Exclude      string    `bson:"exclude,omitempty"`
	Credentials  []byte    `bson:"credentials,omitempty"`   // sealed JSON
	Webhook      []byte    `bson:"webhookSecret,omitempty"` // sealed
	UpdatedAt    time.Time `bson:"updatedAt"`
}

// SaveIntegration creates or replaces the deployment's integration.
func (s *Store) SaveIntegration(ctx context.Context, in dbtsync.Integration) error {
	d := integrationDoc{DeploymentID: in.DeploymentID, RepoURL: in.RepoURL, Branch: in.Branch, ProjectPath: in.ProjectPath,
		ManifestPath: in.ManifestPath, Select: in.Select, Exclude: in.Exclude, Credentials: in.Credentials, Webhook: in.WebhookSecret, UpdatedAt: in.UpdatedAt}
	_, err := s.integrations.ReplaceOne(ctx, bson.D{{Key: "_id", Value: d.DeploymentID}}, d, options.Replace().SetUpsert(true))
	return wrap(err)
}

// Integration reads the deployment's integration.
func (s *Store) Integration(ctx context.Context, deploymentID int64) (dbtsync.Integration, error) {
	var d integrationDoc
	err := s.integrations.FindOne(ctx, bson.D{{Key: "_id", Value: deploymentID}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return dbtsync.Integration{}, dbtsync.ErrNotFound
	}
	if err != nil {
		return dbtsync.Integration{}, wrap(err)
	}
	return dbtsync.Integration{DeploymentID: d.DeploymentID, RepoURL: d.RepoURL, Branch: d.Branch, ProjectPath: d.ProjectPath,
		ManifestPath: d.ManifestPath, Select: d.Select, Exclude: d.Exclude, Credentials: d.Credentials, WebhookSecret: d.Webhook, UpdatedAt: d.UpdatedAt.UTC()}, nil
}

// Resealer moves sealed credentials to the sealing key (internal/credentials).
type Resealer interface {
	// Reseal returns sealed under the sealing key; changed is false when it already was.
	Reseal(sealed []byte, deploymentID int64) (out []byte, changed bool, err error)
}

// ResealReport is what ResealCredentials did.
type ResealReport struct {
	Resealed   int // moved to the sealing key
	Unreadable int // open with no listed key: a key was removed too early
}

// ResealCredentials moves every saved credential not sealed with the first key of
// DBT_CREDENTIALS_KEY to it (step 2 of a rotation, run when the API starts). Each
// update is a compare-and-set on the old value, so a concurrent save wins; reading
// is by a cursor over id and credentials only.
func (s *Store) ResealCredentials(ctx context.Context, sealer Resealer) (ResealReport, error) {
	var rep ResealReport
	cur, err := s.integrations.Find(ctx, bson.D{{Key: "credentials", Value: bson.D{{Key: "$exists", Value: true}}}},
		options.Find().SetProjection(bson.D{{Key: "credentials", Value: 1}}).SetBatchSize(200))
	if err != nil {
		return rep, wrap(err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var d struct {
			ID          int64  `bson:"_id"`
			Credentials []byte `bson:"credentials"`
		}
		if err := cur.Decode(&d); err != nil || len(d.Credentials) == 0 {
			continue
		}
		out, changed, err := sealer.Reseal(d.Credentials, d.ID)
		if err != nil {
			rep.Unreadable++
			continue
		}
		if !changed {
			continue
		}
		res, err := s.integrations.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}, {Key: "credentials", Value: d.Credentials}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "credentials", Value: out}}}})
		if err != nil {
			return rep, wrap(err)
		}
		rep.Resealed += int(res.ModifiedCount)
	}
	return rep, wrap(cur.Err())
}
