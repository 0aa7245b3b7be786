package dbtsync

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/httpx"
)

// KeptVersions is how many versions of a branch are kept; older ones and their files
// are dropped when a new one is written.
const KeptVersions = 20

// LeaseDuration is how long opening a branch keeps it served.
const LeaseDuration = 10 * time.Minute

// BranchState is a branch as the branch store keeps it.
type BranchState struct {
	Name           string
	LatestVersion  int64           // 0: no version yet
	Versions       []BranchVersion // the kept versions, oldest first
	StagingEnabled bool
	LeaseExpiresAt *time.Time // the last open's lease, expired or not
	UpdatedAt      time.Time
}

// BranchVersion is one kept file set of a branch (fields in the order clients have
// always received them).
type BranchVersion struct {
	Version   int64      `json:"version"`
	SyncJobID string     `json:"syncJobId"`
	FileCount int        `json:"fileCount"`
	CreatedAt httpx.Time `json:"createdAt"`
}

// StoredFile is a file of a branch version; Content is empty unless it was asked for.
type StoredFile struct {
	Path    string
	Content string
	Size    int64
	SHA256  string
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

// Served is the spec's rule (generate-session, branch selection): a branch is served
// while someone has it open (its lease has not expired at now) or permanently once its
// staging environment is enabled; the production branch always is.
func (b BranchState) Served(production string, now time.Time) bool {
	return b.Name == production || b.StagingEnabled || b.leaseActive(now)
}

func (b BranchState) leaseActive(now time.Time) bool {
	return b.LeaseExpiresAt != nil && b.LeaseExpiresAt.After(now)
}

// View is the branch as the API shows it at now: an expired lease is no lease.
func (b BranchState) View(production string, now time.Time) Branch {
	out := Branch{Name: b.Name, Production: b.Name == production, Served: b.Served(production, now), StagingEnabled: b.StagingEnabled,
		UpdatedAt: httpx.At(b.UpdatedAt.UTC())}
	if b.leaseActive(now) {
		t := b.LeaseExpiresAt.UTC()
		out.LeaseExpiresAt = httpx.AtPtr(&t)
	}
	if b.LatestVersion > 0 {
		v := b.LatestVersion
		out.LatestVersion = &v
	}
	return out
}

// productionBranch is the production branch before anything was synced into it: it
// always exists, and is always served.
func productionBranch(name string) Branch {
	return Branch{Name: name, Production: true, Served: true, UpdatedAt: httpx.At(time.Unix(0, 0).UTC())}
}

// FilesDigest identifies a file set: SHA-256 over each path and its content's SHA-256, in
// path order. A sync whose output has the latest version's digest writes no version.
func FilesDigest(files []convert.File) string {
	sums := make([][2]string, len(files))
	for i, f := range files {
		sums[i] = [2]string{f.Path, ContentSHA256(f.Content)}
	}
	return DigestOfSums(sums)
}

// ContentSHA256 is the hex SHA-256 of a file's content.
func ContentSHA256(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// DigestOfSums is FilesDigest from (path, content SHA-256) pairs, for a store that
// keeps the sums of its files (it sorts sums).
func DigestOfSums(sums [][2]string) string {
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
