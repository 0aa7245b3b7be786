// Package memstore is an in-memory dbtsync.BranchStore and dbtsync.IntegrationStore, for
// unit tests of the service without MongoDB. The contract suite (internal/store/storetest) runs
// against it and against mongostore, so both behave alike.
package memstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/httpx"
)

// Store keeps everything in maps; it is safe for concurrent use.
type Store struct {
	mu           sync.Mutex
	branches     map[branchKey]*branch
	integrations map[int64]dbtsync.Integration
	pushes       map[string]pushClaim
	unavailable  bool
}

type branchKey struct {
	deploymentID int64
	name         string
}

// branch is a branch with the file sets of its kept versions (by sync job id).
type branch struct {
	state   dbtsync.BranchState
	digests map[string]string // sync job id -> dbtsync.FilesDigest of its set
	sets    map[string][]dbtsync.StoredFile
}

// New returns an empty store.
func New() *Store {
	return &Store{branches: map[branchKey]*branch{}, integrations: map[int64]dbtsync.Integration{}, pushes: map[string]pushClaim{}}
}

// SetUnavailable makes every call fail as an unreachable MongoDB would (true), or work
// again (false).
func (s *Store) SetUnavailable(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable = down
}

var errDown = dbtsync.StoreUnavailable(errors.New("memstore: server selection timeout"))

// lock takes the store, or reports it unreachable.
func (s *Store) lock() error {
	s.mu.Lock()
	if s.unavailable {
		s.mu.Unlock()
		return errDown
	}
	return nil
}

// copyState returns st with its own slice and lease, so callers never share memory with
// the store.
func copyState(st dbtsync.BranchState) dbtsync.BranchState {
	st.Versions = slices.Clone(st.Versions)
	if st.LeaseExpiresAt != nil {
		t := *st.LeaseExpiresAt
		st.LeaseExpiresAt = &t
	}
	return st
}

// Branch reads one branch.
func (s *Store) Branch(_ context.Context, deploymentID int64, name string) (dbtsync.BranchState, error) {
	if err := s.lock(); err != nil {
		return dbtsync.BranchState{}, err
	}
	defer s.mu.Unlock()
	b, ok := s.branches[branchKey{deploymentID, name}]
	if !ok {
		return dbtsync.BranchState{}, dbtsync.ErrNotFound
	}
	return copyState(b.state), nil
}

// Branches reads the deployment's branches.
func (s *Store) Branches(_ context.Context, deploymentID int64, after, except string, limit int) ([]dbtsync.BranchState, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []dbtsync.BranchState{}
	for k, b := range s.branches {
		if k.deploymentID == deploymentID && k.name > after && k.name != except {
			out = append(out, copyState(b.state))
		}
	}
	slices.SortFunc(out, func(a, b dbtsync.BranchState) int { return strings.Compare(a.Name, b.Name) })
	return out[:min(limit, len(out))], nil
}

// Files reads one version's files.
func (s *Store) Files(_ context.Context, deploymentID int64, name string, version int64, path string, withContent bool) (int64, []dbtsync.StoredFile, error) {
	if err := s.lock(); err != nil {
		return 0, nil, err
	}
	defer s.mu.Unlock()
	b, ok := s.branches[branchKey{deploymentID, name}]
	if !ok {
		return 0, nil, dbtsync.ErrNotFound
	}
	if version == 0 {
		version = b.state.LatestVersion
	}
	i := slices.IndexFunc(b.state.Versions, func(v dbtsync.BranchVersion) bool { return v.Version == version })
	if i < 0 {
		return 0, nil, dbtsync.ErrNotFound
	}
	out := []dbtsync.StoredFile{}
	for _, f := range b.sets[b.state.Versions[i].SyncJobID] {
		if path != "" && f.Path != path {
			continue
		}
		if !withContent {
			f.Content = ""
		}
		out = append(out, f)
	}
	return version, out, nil
}

// WriteVersion writes a new version unless the job wrote one or the files are the latest
// version's.
func (s *Store) WriteVersion(_ context.Context, deploymentID int64, name, syncJobID string, files []convert.File, now time.Time) (int64, bool, error) {
	if err := s.lock(); err != nil {
		return 0, false, err
	}
	defer s.mu.Unlock()
	digest := dbtsync.FilesDigest(files)
	b, ok := s.branches[branchKey{deploymentID, name}]
	if !ok {
		b = &branch{state: dbtsync.BranchState{Name: name}, digests: map[string]string{}, sets: map[string][]dbtsync.StoredFile{}}
		s.branches[branchKey{deploymentID, name}] = b
	}
	for _, v := range b.state.Versions {
		if v.SyncJobID == syncJobID {
			return v.Version, true, nil
		}
	}
	if n := len(b.state.Versions); n > 0 && b.digests[b.state.Versions[n-1].SyncJobID] == digest {
		return b.state.LatestVersion, false, nil
	}
	set := make([]dbtsync.StoredFile, len(files))
	for i, f := range files {
		set[i] = dbtsync.StoredFile{Path: f.Path, Content: f.Content, Size: int64(len(f.Content)), SHA256: dbtsync.ContentSHA256(f.Content)}
	}
	slices.SortFunc(set, func(a, b dbtsync.StoredFile) int { return strings.Compare(a.Path, b.Path) })
	b.sets[syncJobID], b.digests[syncJobID] = set, digest
	next := b.state.LatestVersion + 1
	b.state.Versions = append(b.state.Versions, dbtsync.BranchVersion{Version: next, SyncJobID: syncJobID, FileCount: len(files), CreatedAt: httpx.At(now.UTC())})
	if extra := len(b.state.Versions) - dbtsync.KeptVersions; extra > 0 {
		for _, v := range b.state.Versions[:extra] {
			delete(b.sets, v.SyncJobID)
			delete(b.digests, v.SyncJobID)
		}
		b.state.Versions = slices.Clone(b.state.Versions[extra:])
	}
	b.state.LatestVersion, b.state.UpdatedAt = next, now.UTC()
	return next, true, nil
}

// SetLease sets the branch's lease.
func (s *Store) SetLease(_ context.Context, deploymentID int64, name string, until, now time.Time) (dbtsync.BranchState, error) {
	return s.update(deploymentID, name, now, func(st *dbtsync.BranchState) {
		u := until.UTC()
		st.LeaseExpiresAt = &u
	})
}

// SetStaging enables or disables the branch's staging.
func (s *Store) SetStaging(_ context.Context, deploymentID int64, name string, enabled bool, now time.Time) (dbtsync.BranchState, error) {
	return s.update(deploymentID, name, now, func(st *dbtsync.BranchState) { st.StagingEnabled = enabled })
}

func (s *Store) update(deploymentID int64, name string, now time.Time, fn func(*dbtsync.BranchState)) (dbtsync.BranchState, error) {
	if err := s.lock(); err != nil {
		return dbtsync.BranchState{}, err
	}
	defer s.mu.Unlock()
	b, ok := s.branches[branchKey{deploymentID, name}]
	if !ok {
		return dbtsync.BranchState{}, dbtsync.ErrNotFound
	}
	fn(&b.state)
	b.state.UpdatedAt = now.UTC()
	return copyState(b.state), nil
}

// SaveIntegration creates or replaces the deployment's integration.
func (s *Store) SaveIntegration(_ context.Context, in dbtsync.Integration) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	in.Credentials, in.WebhookSecret = slices.Clone(in.Credentials), slices.Clone(in.WebhookSecret)
	s.integrations[in.DeploymentID] = in
	return nil
}

// Integration reads the deployment's integration.
func (s *Store) Integration(_ context.Context, deploymentID int64) (dbtsync.Integration, error) {
	if err := s.lock(); err != nil {
		return dbtsync.Integration{}, err
	}
	defer s.mu.Unlock()
	in, ok := s.integrations[deploymentID]
	if !ok {
		return dbtsync.Integration{}, dbtsync.ErrNotFound
	}
	in.Credentials, in.WebhookSecret = slices.Clone(in.Credentials), slices.Clone(in.WebhookSecret)
	return in, nil
}

// pushClaim is a push's delivery id or commit, claimed by the job it started.
type pushClaim struct {
	job string
	at  time.Time
}

// ClaimPush records key of deploymentID for job unless another job claimed it within retention.
func (s *Store) ClaimPush(_ context.Context, deploymentID int64, key, job string, now time.Time, retention time.Duration) (string, error) {
	if err := s.lock(); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	k := strconv.FormatInt(deploymentID, 10) + "/" + key
	if c, ok := s.pushes[k]; ok && now.Sub(c.at) < retention {
		return c.job, nil
	}
	s.pushes[k] = pushClaim{job: job, at: now}
	return job, nil
}

// ReleasePush drops job's claim of key.
func (s *Store) ReleasePush(_ context.Context, deploymentID int64, key, job string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := strconv.FormatInt(deploymentID, 10) + "/" + key
	if c, ok := s.pushes[k]; ok && c.job == job {
		delete(s.pushes, k)
	}
	return nil
}
