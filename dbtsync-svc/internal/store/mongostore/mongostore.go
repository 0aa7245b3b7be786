// Package mongostore is dbtsync-svc's MongoDB adapter: data-model branches (their kept
// versions and served state), the immutable file set of each version, and the dbt git
// integrations. Its records are its own; it maps them to the domain's types and wraps
// the driver's unavailability errors with dbtsync.ErrStoreUnavailable. Store implements
// dbtsync.BranchStore and dbtsync.IntegrationStore.
package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/mongox"
)

// Store keeps branches, their files and the git integrations in MongoDB.
type Store struct {
	branches     *mongo.Collection
	files        *mongo.Collection
	integrations *mongo.Collection
	pushes       *mongo.Collection
}

// New uses db's collections branches, branch_files and dbt_git_integrations.
func New(db *mongo.Database) *Store {
	return &Store{branches: db.Collection("branches"), files: db.Collection("branch_files"), integrations: db.Collection("dbt_git_integrations"), pushes: db.Collection("dbt_push_claims")}
}

// EnsureIndexes creates the indexes the queries use (the app retries it while the
// database cannot be reached: mongox.EnsureIndexes).
func (s *Store) EnsureIndexes(ctx context.Context) error {
	_, err := s.branches.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "deploymentId", Value: 1}, {Key: "name", Value: 1}}})
	if err != nil {
		return wrap(err)
	}
	_, err = s.files.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "deploymentId", Value: 1}, {Key: "branch", Value: 1}, {Key: "setId", Value: 1}, {Key: "path", Value: 1}}})
	return wrap(err)
}

// wrap marks an error of an unreachable database as the domain's ErrStoreUnavailable.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if mongox.Unavailable(err) {
		return dbtsync.StoreUnavailable(err)
	}
	return err
}

// branchDoc is a branch: its kept versions (oldest first) and its served state. The file
// sets are immutable documents of branch_files keyed by the sync job that wrote them, so
// switching the current version is one conditional update of this document.
type branchDoc struct {
	ID             string       `bson:"_id"`
	DeploymentID   int64        `bson:"deploymentId"`
	Name           string       `bson:"name"`
	LatestVersion  int64        `bson:"latestVersion"`
	Versions       []versionDoc `bson:"versions"`
	StagingEnabled bool         `bson:"stagingEnabled"`
	LeaseExpiresAt *time.Time   `bson:"leaseExpiresAt"`
	UpdatedAt      time.Time    `bson:"updatedAt"`
}

// versionDoc is one kept version of a branch.
type versionDoc struct {
	Version   int64     `bson:"version"`
	CreatedAt time.Time `bson:"createdAt"`
	SyncJobID string    `bson:"syncJobId"` // also the id of its file set
	FileCount int       `bson:"fileCount"`
	// Digest is dbtsync.FilesDigest of the set ("" for versions written before digests).
	Digest string `bson:"digest,omitempty"`
}

func (b *branchDoc) state() dbtsync.BranchState {
	st := dbtsync.BranchState{Name: b.Name, LatestVersion: b.LatestVersion, StagingEnabled: b.StagingEnabled,
		UpdatedAt: b.UpdatedAt.UTC(), Versions: make([]dbtsync.BranchVersion, len(b.Versions))}
	if b.LeaseExpiresAt != nil {
		t := b.LeaseExpiresAt.UTC()
		st.LeaseExpiresAt = &t
	}
	for i, v := range b.Versions {
		st.Versions[i] = dbtsync.BranchVersion{Version: v.Version, SyncJobID: v.SyncJobID, FileCount: v.FileCount, CreatedAt: httpx.At(v.CreatedAt.UTC())}
	}
	return st
}

func branchID(deploymentID int64, name string) string {
	return fmt.Sprintf("%d/%s", deploymentID, name)
}

func (s *Store) branch(ctx context.Context, deploymentID int64, name string) (*branchDoc, error) {
	var b branchDoc
	err := s.branches.FindOne(ctx, bson.D{{Key: "_id", Value: branchID(deploymentID, name)}}).Decode(&b)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, dbtsync.ErrNotFound
	}
	if err != nil {
		return nil, wrap(err)
	}
	return &b, nil
}

// Branch reads one branch.
func (s *Store) Branch(ctx context.Context, deploymentID int64, name string) (dbtsync.BranchState, error) {
	b, err := s.branch(ctx, deploymentID, name)
	if err != nil {
		return dbtsync.BranchState{}, err
	}
	return b.state(), nil
}

// Branches reads the deployment's branches.
func (s *Store) Branches(ctx context.Context, deploymentID int64, after, except string, limit int) ([]dbtsync.BranchState, error) {
	filter := bson.D{{Key: "deploymentId", Value: deploymentID}, {Key: "name", Value: bson.D{{Key: "$gt", Value: after}, {Key: "$ne", Value: except}}}}
	cur, err := s.branches.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "name", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, wrap(err)
	}
	var docs []branchDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(err)
	}
	out := make([]dbtsync.BranchState, len(docs))
	for i := range docs {
		out[i] = docs[i].state()
	}
	return out, nil
}

// SetLease sets the branch's lease.
func (s *Store) SetLease(ctx context.Context, deploymentID int64, name string, until, now time.Time) (dbtsync.BranchState, error) {
	return s.update(ctx, deploymentID, name, bson.D{{Key: "leaseExpiresAt", Value: until}, {Key: "updatedAt", Value: now}})
}

// SetStaging enables or disables the branch's staging.
func (s *Store) SetStaging(ctx context.Context, deploymentID int64, name string, enabled bool, now time.Time) (dbtsync.BranchState, error) {
	return s.update(ctx, deploymentID, name, bson.D{{Key: "stagingEnabled", Value: enabled}, {Key: "updatedAt", Value: now}})
}

func (s *Store) update(ctx context.Context, deploymentID int64, name string, set bson.D) (dbtsync.BranchState, error) {
	var b branchDoc
	err := s.branches.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: branchID(deploymentID, name)}}, bson.D{{Key: "$set", Value: set}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&b)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return dbtsync.BranchState{}, dbtsync.ErrNotFound
	}
	if err != nil {
		return dbtsync.BranchState{}, wrap(err)
	}
	return b.state(), nil
}
