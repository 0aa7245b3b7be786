package dbtsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/analyticsco/platform/libs/httpx"
	"slices"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/mongox"
)

// KeptVersions is how many versions of a branch are kept.
const KeptVersions = 20

// LeaseDuration is how long an open lease keeps a branch served.
const LeaseDuration = 10 * time.Minute

// BranchVersion is one kept file set of a branch.
type BranchVersion struct {
	Version   int64     `bson:"version" json:"version"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	SyncJobID string    `bson:"syncJobId" json:"syncJobId"`
	FileCount int       `bson:"fileCount" json:"fileCount"`
	// Digest identifies the file set (SHA-256 over each path and its content's SHA-256,
	// in path order): a sync whose output has the latest version's digest writes nothing.
	Digest string `bson:"digest,omitempty" json:"-"`
}

// filesDigest is the Digest of a file set.
func filesDigest(files []convert.File) string {
	sums := make([][2]string, len(files))
	for i, f := range files {
		sum := sha256.Sum256([]byte(f.Content))
		sums[i] = [2]string{f.Path, hex.EncodeToString(sum[:])}
	}
	return digestOf(sums)
}

// digestOf hashes (path, content SHA-256) pairs in path order.
func digestOf(sums [][2]string) string {
	slices.SortFunc(sums, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	h := sha256.New()
	for _, e := range sums {
		h.Write([]byte(e[0]))
		h.Write([]byte{0})
		h.Write([]byte(e[1]))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// storedDigest is the Digest of a stored version, read from its files' paths and sums
// (never their contents) when the version predates digests.
func (s *Store) storedDigest(ctx context.Context, dep int64, name string, v BranchVersion) (string, error) {
	if v.Digest != "" {
		return v.Digest, nil
	}
	cur, err := s.files.Find(ctx, bson.D{{Key: "deploymentId", Value: dep}, {Key: "branch", Value: name}, {Key: "setId", Value: v.SyncJobID}},
		options.Find().SetProjection(bson.D{{Key: "path", Value: 1}, {Key: "sha256", Value: 1}}))
	if err != nil {
		return "", wrapDB(err)
	}
	var docs []struct {
		Path   string `bson:"path"`
		SHA256 string `bson:"sha256"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return "", wrapDB(err)
	}
	sums := make([][2]string, len(docs))
	for i, d := range docs {
		sums[i] = [2]string{d.Path, d.SHA256}
	}
	return digestOf(sums), nil
}

// branchDoc is a branch: its kept versions (newest last) and its served state. The file
// sets are immutable documents of branch_files keyed by the sync job that wrote them, so
// switching the current version is one conditional update of this document.
type branchDoc struct {
	ID             string          `bson:"_id"`
	DeploymentID   int64           `bson:"deploymentId"`
	Name           string          `bson:"name"`
	LatestVersion  int64           `bson:"latestVersion"`
	Versions       []BranchVersion `bson:"versions"`
	StagingEnabled bool            `bson:"stagingEnabled"`
	LeaseExpiresAt *time.Time      `bson:"leaseExpiresAt"`
	UpdatedAt      time.Time       `bson:"updatedAt"`
}

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

type integrationDoc struct {
	DeploymentID int64     `bson:"_id"`
	RepoURL      string    `bson:"repoUrl"`
	Branch       string    `bson:"branch"`
	ProjectPath  string    `bson:"projectPath"`
	ManifestPath string    `bson:"manifestPath,omitempty"`
	Credentials  []byte    `bson:"credentials,omitempty"` // AES-GCM sealed JSON
	UpdatedAt    time.Time `bson:"updatedAt"`
}

// Store keeps branches, their files and the git integrations in MongoDB.
type Store struct {
	branches     *mongo.Collection
	files        *mongo.Collection
	integrations *mongo.Collection
	now          func() time.Time
}

// NewStore uses db's collections branches, branch_files and dbt_git_integrations.
func NewStore(db *mongo.Database) *Store {
	return &Store{branches: db.Collection("branches"), files: db.Collection("branch_files"), integrations: db.Collection("dbt_git_integrations"), now: time.Now}
}

// EnsureIndexes creates the indexes the queries use.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	_, err := s.branches.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "deploymentId", Value: 1}, {Key: "name", Value: 1}}})
	if err != nil {
		return wrapDB(err)
	}
	_, err = s.files.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "deploymentId", Value: 1}, {Key: "branch", Value: 1}, {Key: "setId", Value: 1}, {Key: "path", Value: 1}}})
	return wrapDB(err)
}

func wrapDB(err error) error {
	if err == nil {
		return nil
	}
	if mongox.Unavailable(err) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

func branchID(dep int64, name string) string { return fmt.Sprintf("%d/%s", dep, name) }

func (s *Store) branch(ctx context.Context, dep int64, name string) (*branchDoc, error) {
	var b branchDoc
	err := s.branches.FindOne(ctx, bson.D{{Key: "_id", Value: branchID(dep, name)}}).Decode(&b)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, wrapDB(err)
	}
	return &b, nil
}

// WriteVersion writes files as a new version of the branch, created by syncJobID. It is
// idempotent by syncJobID: when a version of that job exists, nothing is written and its
// number is returned. When files are byte-identical to the latest version, nothing is
// written either: the latest version's number is returned with changed false. Readers see the old or the new set, never a mix: the files land
// under the job's own set id first and the branch switches to it in one update.
func (s *Store) WriteVersion(ctx context.Context, dep int64, name, syncJobID string, files []convert.File) (version int64, changed bool, err error) {
	digest := filesDigest(files)
	if b, err := s.branch(ctx, dep, name); err == nil {
		if v, ok := versionOfJob(b, syncJobID); ok {
			return v, true, nil
		}
		// Byte-identical to the latest version: no new version, the latest stays.
		if n := len(b.Versions); n > 0 && b.Versions[n-1].Version == b.LatestVersion {
			latest, err := s.storedDigest(ctx, dep, name, b.Versions[n-1])
			if err != nil {
				return 0, false, err
			}
			if latest == digest {
				return b.LatestVersion, false, nil
			}
		}
	} else if !errors.Is(err, ErrNotFound) {
		return 0, false, err
	}
	v, err := s.writeVersion(ctx, dep, name, syncJobID, files, digest)
	return v, err == nil, err
}

func (s *Store) writeVersion(ctx context.Context, dep int64, name, syncJobID string, files []convert.File, digest string) (int64, error) {
	// A retried job may have left part of its set: replace it whole.
	if _, err := s.files.DeleteMany(ctx, bson.D{{Key: "deploymentId", Value: dep}, {Key: "branch", Value: name}, {Key: "setId", Value: syncJobID}}); err != nil {
		return 0, wrapDB(err)
	}
	const batch = 500
	for i := 0; i < len(files); i += batch {
		end := min(i+batch, len(files))
		docs := make([]any, 0, end-i)
		for _, f := range files[i:end] {
			sum := sha256.Sum256([]byte(f.Content))
			docs = append(docs, fileDoc{ID: branchID(dep, name) + "\x00" + syncJobID + "\x00" + f.Path, DeploymentID: dep, Branch: name, SetID: syncJobID,
				Path: f.Path, Content: f.Content, Size: int64(len(f.Content)), SHA256: hex.EncodeToString(sum[:])})
		}
		if _, err := s.files.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
			return 0, wrapDB(err)
		}
	}
	for attempt := 0; attempt < 20; attempt++ {
		b, err := s.branch(ctx, dep, name)
		now := s.now().UTC()
		if errors.Is(err, ErrNotFound) {
			doc := branchDoc{ID: branchID(dep, name), DeploymentID: dep, Name: name, LatestVersion: 1,
				Versions: []BranchVersion{{Version: 1, CreatedAt: now, SyncJobID: syncJobID, FileCount: len(files), Digest: digest}}, UpdatedAt: now}
			if _, err := s.branches.InsertOne(ctx, doc); err != nil {
				if mongox.IsDuplicateKey(err) {
					continue
				}
				return 0, wrapDB(err)
			}
			return 1, nil
		}
		if err != nil {
			return 0, err
		}
		if v, ok := versionOfJob(b, syncJobID); ok {
			return v, nil
		}
		next := b.LatestVersion + 1
		versions := append(append([]BranchVersion(nil), b.Versions...), BranchVersion{Version: next, CreatedAt: now, SyncJobID: syncJobID, FileCount: len(files), Digest: digest})
		var dropped []BranchVersion
		if len(versions) > KeptVersions {
			dropped = versions[:len(versions)-KeptVersions]
			versions = versions[len(versions)-KeptVersions:]
		}
		res, err := s.branches.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: b.ID}, {Key: "latestVersion", Value: b.LatestVersion}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "latestVersion", Value: next}, {Key: "versions", Value: versions}, {Key: "updatedAt", Value: now}}}})
		if err != nil {
			return 0, wrapDB(err)
		}
		if res.MatchedCount == 0 {
			continue // another writer won: re-read and retry
		}
		for _, d := range dropped {
			if _, err := s.files.DeleteMany(ctx, bson.D{{Key: "deploymentId", Value: dep}, {Key: "branch", Value: name}, {Key: "setId", Value: d.SyncJobID}}); err != nil {
				return next, wrapDB(err)
			}
		}
		return next, nil
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

// MarshalJSON writes createdAt the way every API answer writes a timestamp (the
// stored record keeps a BSON date).
func (v BranchVersion) MarshalJSON() ([]byte, error) {
	type plain BranchVersion
	return json.Marshal(struct {
		plain
		CreatedAt httpx.Time `json:"createdAt"`
	}{plain(v), httpx.At(v.CreatedAt)})
}

// Branch is a branch as the API shows it.
type Branch struct {
	Name           string      `json:"name"`
	Production     bool        `json:"production"`
	Served         bool        `json:"served"`
	StagingEnabled bool        `json:"stagingEnabled"`
	LeaseExpiresAt *httpx.Time `json:"leaseExpiresAt"`
	LatestVersion  *int64      `json:"latestVersion"`
	UpdatedAt      httpx.Time  `json:"updatedAt"`
}

func (s *Store) view(b *branchDoc, production string) Branch {
	out := Branch{Name: b.Name, Production: b.Name == production, StagingEnabled: b.StagingEnabled, UpdatedAt: httpx.At(b.UpdatedAt.UTC())}
	now := s.now()
	if b.LeaseExpiresAt != nil && b.LeaseExpiresAt.After(now) {
		t := b.LeaseExpiresAt.UTC()
		out.LeaseExpiresAt = httpx.AtPtr(&t)
	}
	out.Served = out.Production || out.StagingEnabled || out.LeaseExpiresAt != nil
	if b.LatestVersion > 0 {
		v := b.LatestVersion
		out.LatestVersion = &v
	}
	return out
}

// Branch returns a branch; the production branch always exists.
func (s *Store) Branch(ctx context.Context, dep int64, name, production string) (Branch, error) {
	b, err := s.branch(ctx, dep, name)
	if errors.Is(err, ErrNotFound) && name == production {
		return Branch{Name: name, Production: true, Served: true, UpdatedAt: httpx.At(time.Unix(0, 0).UTC())}, nil
	}
	if err != nil {
		return Branch{}, err
	}
	return s.view(b, production), nil
}

// Branches lists the deployment's branches, production first, then by name.
func (s *Store) Branches(ctx context.Context, dep int64, production string) ([]Branch, error) {
	cur, err := s.branches.Find(ctx, bson.D{{Key: "deploymentId", Value: dep}})
	if err != nil {
		return nil, wrapDB(err)
	}
	var docs []branchDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrapDB(err)
	}
	out := make([]Branch, 0, len(docs)+1)
	hasProd := false
	for i := range docs {
		v := s.view(&docs[i], production)
		hasProd = hasProd || v.Production
		out = append(out, v)
	}
	if !hasProd {
		out = append(out, Branch{Name: production, Production: true, Served: true, UpdatedAt: httpx.At(time.Unix(0, 0).UTC())})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Production != out[j].Production {
			return out[i].Production
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Open renews the branch's lease for LeaseDuration.
func (s *Store) Open(ctx context.Context, dep int64, name, production string) (Branch, error) {
	if name == production {
		return s.Branch(ctx, dep, name, production)
	}
	now := s.now().UTC()
	until := now.Add(LeaseDuration)
	return s.update(ctx, dep, name, production, bson.D{{Key: "leaseExpiresAt", Value: until}, {Key: "updatedAt", Value: now}})
}

// SetStaging enables or disables the branch's staging environment.
func (s *Store) SetStaging(ctx context.Context, dep int64, name, production string, enabled bool) (Branch, error) {
	return s.update(ctx, dep, name, production, bson.D{{Key: "stagingEnabled", Value: enabled}, {Key: "updatedAt", Value: s.now().UTC()}})
}

func (s *Store) update(ctx context.Context, dep int64, name, production string, set bson.D) (Branch, error) {
	var b branchDoc
	err := s.branches.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: branchID(dep, name)}}, bson.D{{Key: "$set", Value: set}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&b)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Branch{}, ErrNotFound
	}
	if err != nil {
		return Branch{}, wrapDB(err)
	}
	return s.view(&b, production), nil
}

// Versions lists the kept versions, newest first.
func (s *Store) Versions(ctx context.Context, dep int64, name string) ([]BranchVersion, error) {
	b, err := s.branch(ctx, dep, name)
	if err != nil {
		return nil, err
	}
	out := make([]BranchVersion, 0, len(b.Versions))
	for i := len(b.Versions) - 1; i >= 0; i-- {
		v := b.Versions[i]
		v.CreatedAt = v.CreatedAt.UTC()
		out = append(out, v)
	}
	return out, nil
}

// StoredFile is a file of a branch version.
type StoredFile struct {
	Path    string
	Content string
	Size    int64
	SHA256  string
}

// Files returns the files of one version (0: the latest), sorted by path, with contents
// when withContent; path "" means every file.
func (s *Store) Files(ctx context.Context, dep int64, name string, version int64, path string, withContent bool) (int64, []StoredFile, error) {
	b, err := s.branch(ctx, dep, name)
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
		return 0, nil, ErrNotFound
	}
	filter := bson.D{{Key: "deploymentId", Value: dep}, {Key: "branch", Value: name}, {Key: "setId", Value: set}}
	if path != "" {
		filter = append(filter, bson.E{Key: "path", Value: path})
	}
	opts := options.Find().SetSort(bson.D{{Key: "path", Value: 1}})
	if !withContent {
		opts.SetProjection(bson.D{{Key: "content", Value: 0}})
	}
	cur, err := s.files.Find(ctx, filter, opts)
	if err != nil {
		return 0, nil, wrapDB(err)
	}
	var docs []fileDoc
	if err := cur.All(ctx, &docs); err != nil {
		return 0, nil, wrapDB(err)
	}
	out := make([]StoredFile, len(docs))
	for i, d := range docs {
		out[i] = StoredFile{Path: d.Path, Content: d.Content, Size: d.Size, SHA256: d.SHA256}
	}
	return version, out, nil
}

// Resolve answers the embed-svc question: does the branch exist, is it served, is it
// production.
func (s *Store) Resolve(ctx context.Context, dep int64, name, production string) (exists, served, isProd bool, err error) {
	if name == production {
		return true, true, true, nil
	}
	b, err := s.Branch(ctx, dep, name, production)
	if errors.Is(err, ErrNotFound) {
		return false, false, false, nil
	}
	if err != nil {
		return false, false, false, err
	}
	return true, b.Served, false, nil
}

func (s *Store) saveIntegration(ctx context.Context, d integrationDoc) error {
	_, err := s.integrations.ReplaceOne(ctx, bson.D{{Key: "_id", Value: d.DeploymentID}}, d, options.Replace().SetUpsert(true))
	return wrapDB(err)
}

func (s *Store) integration(ctx context.Context, dep int64) (*integrationDoc, error) {
	var d integrationDoc
	err := s.integrations.FindOne(ctx, bson.D{{Key: "_id", Value: dep}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, wrapDB(err)
	}
	return &d, nil
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
func (s *Store) ResealCredentials(ctx context.Context, sealer *Sealer) (ResealReport, error) {
	var rep ResealReport
	cur, err := s.integrations.Find(ctx, bson.D{{Key: "credentials", Value: bson.D{{Key: "$exists", Value: true}}}},
		options.Find().SetProjection(bson.D{{Key: "credentials", Value: 1}}).SetBatchSize(200))
	if err != nil {
		return rep, wrapDB(err)
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
			return rep, wrapDB(err)
		}
		rep.Resealed += int(res.ModifiedCount)
	}
	return rep, wrapDB(cur.Err())
}
