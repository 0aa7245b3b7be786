package dbtsync

import (
	"net/url"
	"regexp"
	"strings"
)

// The names a sync works with: git refs (a branch or a tag of the repository, never a
// commit SHA) and data-model branch names.
var (
	refRE          = regexp.MustCompile(`^[A-Za-z0-9._/+-]{1,200}$`)
	refForbiddenRE = regexp.MustCompile(`\.\.|//|^/|/$|\.lock$|^-`)
	branchRE       = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,200}$`)
	branchBadRE    = regexp.MustCompile(`\.\.|//|^/|/$`)
	shaRE          = regexp.MustCompile(`^[0-9a-fA-F]{7,40}$`)

	sanitizeRE = regexp.MustCompile(`[^A-Za-z0-9._/-]+`)
	dotsRE     = regexp.MustCompile(`\.\.+`)
	slashesRE  = regexp.MustCompile(`/+`)
	trimRE     = regexp.MustCompile(`^[/.-]+|[/.-]+$`)
)

// ValidRef reports whether s is a legal git branch or tag name (in the subset clones use).
func ValidRef(s string) bool { return refRE.MatchString(s) && !refForbiddenRE.MatchString(s) }

// validBranchName reports whether s may name a data-model branch.
func validBranchName(s string) bool { return branchRE.MatchString(s) && !branchBadRE.MatchString(s) }

// LooksLikeSHA reports whether a ref could be a commit SHA (7 to 40 hex digits). Such a
// name is also a legal branch or tag (a date tag 20240601, a build number): the
// repository is asked before it is accepted.
func LooksLikeSHA(ref string) bool { return shaRE.MatchString(ref) }

// derivedBranchName is dbt/<ref>, sanitized to the branch name alphabet.
func derivedBranchName(ref string) string {
	s := sanitizeRE.ReplaceAllString(ref, "-")
	s = dotsRE.ReplaceAllString(s, ".")
	s = slashesRE.ReplaceAllString(s, "/")
	s = trimRE.ReplaceAllString(s, "")
	if s == "" {
		s = "ref"
	}
	if len(s) > 190 {
		s = s[:190]
	}
	return "dbt/" + s
}

// manifestBranch is the branch a manifest sync writes when nothing names one.
const manifestBranch = "dbt/manifest"

// validFilePath reports whether path names a file inside a branch version: relative,
// without empty, "." or ".." segments.
func validFilePath(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return false
		}
	}
	return true
}

// RedactRepoURL is a repository URL as the audit trail and logs may keep it: scheme,
// host and path, without the credentials a user may have pasted into it (userinfo, a
// token in the query) and without the fragment. A URL that does not parse keeps only
// what follows its last '@' up to the first '?' or '#'.
func RedactRepoURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		return u.String()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	if scheme == "" {
		return rest
	}
	return scheme + "://" + rest
}

// RepoHost is the host of a repository URL, for messages ("" when it has none).
func RepoHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.Scheme == "file" {
		return "the local file system"
	}
	return u.Hostname()
}
