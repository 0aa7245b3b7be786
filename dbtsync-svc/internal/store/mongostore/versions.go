package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/mongox"
)

// fileDoc is one file of a set: the version of a branch written by one sync job.
type fileDoc struct {
	ID           string `bson:"_id"`
	DeploymentID int64  `bson:"deploymentId"`
	Branch       string `bson:"branch"`
	SetID        string `bson:"setId"`
	Path         string `bson:"path"`
	Content      string `bson:"content"`
	Size         int64  `bson:"size"`
	SHA256       string `bson:"sha256"`
}

func setFilter(deploymentID int64, branch, setID string) bson.D {
	return bson.D{{Key: "deploymentId", Value: deploymentID}, {Key: "branch", Value: branch}, {Key: "setId", Value: setID}}
}

// WriteVersion writes files as a new version of the branch (dbtsync.BranchStore): the
// files land under the job's own set id first, and the branch switches to it in one
// conditional update.
func (s *Store) WriteVersion(ctx context.Context, deploymentID int64, name, syncJobID string, files []convert.File, now time.Time) (int64, bool, error) {
	digest := dbtsync.FilesDigest(files)
	if b, err := s.branch(ctx, deploymentID, name); err == nil {
		if v, ok := versionOfJob(b, syncJobID); ok {
			return v, true, nil
		}
		// Byte-identical to the latest version: no new version, the latest stays.
		if n := len(b.Versions); n > 0 && b.Versions[n-1].Version == b.LatestVersion {
			latest, err := s.storedDigest(ctx, deploymentID, name, b.Versions[n-1])
			if err != nil {
				return 0, false, err
			}
			if latest == digest {
				return b.LatestVersion, false, nil
			}
		}
	} else if !errors.Is(err, dbtsync.ErrNotFound) {
		return 0, false, err
	}
	if err := s.writeSet(ctx, deploymentID, name, syncJobID, files); err != nil {
		return 0, false, err
	}
	v, err := s.switchVersion(ctx, deploymentID, name, versionDoc{CreatedAt: now, SyncJobID: syncJobID, FileCount: len(files), Digest: digest})
	return v, err == nil, err
}

// storedDigest is the digest of a stored version, read from its files' paths and sums
// (never their contents) when the version predates digests.
func (s *Store) storedDigest(ctx context.Context, deploymentID int64, name string, v versionDoc) (string, error) {
	if v.Digest != "" {
		return v.Digest, nil
	}
	cur, err := s.files.Find(ctx, setFilter(deploymentID, name, v.SyncJobID), options.Find().SetProjection(bson.D{{Key: "path", Value: 1}, {Key: "sha256", Value: 1}}))
	if err != nil {
		return "", wrap(err)
	}
	var docs []struct {
		Path   string `bson:"path"`
		SHA256 string `bson:"sha256"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return "", wrap(err)
	}
	sums := make([][2]string, len(docs))
	for i, d := range docs {
		sums[i] = [2]string{d.Path, d.SHA256}
	}
	return dbtsync.DigestOfSums(sums), nil
}

// writeSet writes the job's file set, replacing whatever a retried run of it left.
func (s *Store) writeSet(ctx context.Context, deploymentID int64, name, syncJobID string, files []convert.File) error {
	if _, err := s.files.DeleteMany(ctx, setFilter(deploymentID, name, syncJobID)); err != nil {
		return wrap(err)
	}
	const batch = 500
	for i := 0; i < len(files); i += batch {
		end := min(i+batch, len(files))
		docs := make([]any, 0, end-i)
		for _, f := range files[i:end] {
			docs = append(docs, fileDoc{ID: branchID(deploymentID, name) + "\x00" + syncJobID + "\x00" + f.Path, DeploymentID: deploymentID, Branch: name, SetID: syncJobID,
				Path: f.Path, Content: f.Content, Size: int64(len(f.Content)), SHA256: dbtsync.ContentSHA256(f.Content)})
		}
		if _, err := s.files.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// switchVersion makes v (its Version unset) the branch's latest version, creating the
// branch when it has none, and drops the sets of the versions past KeptVersions. It is a
// compare-and-set on latestVersion, retried while other writers win.
func (s *Store) switchVersion(ctx context.Context, deploymentID int64, name string, v versionDoc) (int64, error) {
	for attempt := 0; attempt < 20; attempt++ {
		b, err := s.branch(ctx, deploymentID, name)
		if errors.Is(err, dbtsync.ErrNotFound) {
			v.Version = 1
			doc := branchDoc{ID: branchID(deploymentID, name), DeploymentID: deploymentID, Name: name, LatestVersion: 1, Versions: []versionDoc{v}, UpdatedAt: v.CreatedAt}
			if _, err := s.branches.InsertOne(ctx, doc); err != nil {
				if mongox.IsDuplicateKey(err) {
					continue
				}
				return 0, wrap(err)
			}
			return 1, nil
		}
		if err != nil {
			return 0, err
		}
		if n, ok := versionOfJob(b, v.SyncJobID); ok {
			return n, nil
		}
		v.Version = b.LatestVersion + 1
		versions := append(append([]versionDoc(nil), b.Versions...), v)
		var dropped []versionDoc
		if len(versions) > dbtsync.KeptVersions {
			dropped = versions[:len(versions)-dbtsync.KeptVersions]
			versions = versions[len(versions)-dbtsync.KeptVersions:]
		}
		res, err := s.branches.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: b.ID}, {Key: "latestVersion", Value: b.LatestVersion}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "latestVersion", Value: v.Version}, {Key: "versions", Value: versions}, {Key: "updatedAt", Value: v.CreatedAt}}}})
		if err != nil {
			return 0, wrap(err)
		}
		if res.MatchedCount == 0 {
			continue // another writer won: re-read and retry
		}
		for _, d := range dropped {
			if _, err := s.files.DeleteMany(ctx, setFilter(deploymentID, name, d.SyncJobID)); err != nil {
				return v.Version, wrap(err)
			}
		}
		return v.Version, nil
	}
	return 0, errors.New("branch write: too many concurrent writers")
}

func versionOfJob(b *branchDoc, syncJobID string) (int64, bool) {
	for _, v := range b.Versions {
		if v.SyncJobID == syncJobID {
			return v.Version, true
		}
	}
	return 0, false
}

// Files reads the files of one version (dbtsync.BranchStore).
func (s *Store) Files(ctx context.Context, deploymentID int64, name string, version int64, path string, withContent bool) (int64, []dbtsync.StoredFile, error) {
	b, err := s.branch(ctx, deploymentID, name)
	if err != nil {
		return 0, nil, err
	}
	if version == 0 {
		version = b.LatestVersion
	}
	set := ""
	for _, v := range b.Versions {
		if v.Version == version {
			set = v.SyncJobID
		}
	}
	if set == "" {
		return 0, nil, dbtsync.ErrNotFound
	}
	filter := setFilter(deploymentID, name, set)
	if path != "" {
		filter = append(filter, bson.E{Key: "path", Value: path})
	}
	opts := options.Find().SetSort(bson.D{{Key: "path", Value: 1}})
	if !withContent {
		opts.SetProjection(bson.D{{Key: "content", Value: 0}})
	}
	cur, err := s.files.Find(ctx, filter, opts)
	if err != nil {
		return 0, nil, wrap(err)
	}
	var docs []fileDoc
	if err := cur.All(ctx, &docs); err != nil {
		return 0, nil, wrap(err)
	}
	// A version other than the newest may be dropped while it is read: the branch
	// document forgets it first, then its files go, document by document, so on
	// MongoDB this read may have met a part of them. Still kept after the read, it
	// was whole; gone, it answers as a version no longer kept would.
	if latest := b.Versions[len(b.Versions)-1].Version; version != latest {
		if kept, err := s.keeps(ctx, deploymentID, name, set); err != nil {
			return 0, nil, err
		} else if !kept {
			return 0, nil, dbtsync.ErrNotFound
		}
	}
	out := make([]dbtsync.StoredFile, len(docs))
	for i, d := range docs {
		out[i] = dbtsync.StoredFile{Path: d.Path, Content: d.Content, Size: d.Size, SHA256: d.SHA256}
	}
	return version, out, nil
}

// keeps reports whether the branch still keeps the file set of sync job set.
func (s *Store) keeps(ctx context.Context, deploymentID int64, name, set string) (bool, error) {
	err := s.branches.FindOne(ctx, bson.D{{Key: "_id", Value: branchID(deploymentID, name)}, {Key: "versions.syncJobId", Value: set}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, wrap(err)
}
