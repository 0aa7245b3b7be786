package gitsource

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// HasRef runs in the API process, inside the request of any sync whose ref looks like a
// SHA, against a server the tenant chose: it reads the server's reference advertisement
// as a stream, keeps nothing of it but the line it is at, stops at the first of the two
// names it looks for, and reads at most MaxRefAdverts bytes (a server listing millions of
// references costs a bounded read, not their decoding into maps). At most RefListings
// run at once; more wait within their request's deadline.

// refListTimeout bounds the listing inside the request that asked for it.
const refListTimeout = 15 * time.Second

// errAdvertTooLarge: the server's reference advertisement is over MaxRefAdverts bytes.
var errAdvertTooLarge = errors.New("reference advertisement over its limit")

// HasRef reports whether ref is a branch or a tag of the integration's repository, by
// reading the remote's references (git ls-remote: no objects are fetched). An error means
// the repository could not be asked, or listed more than the limit (the caller may let
// the job find out).
func (s *Source) HasRef(ctx context.Context, in dbtsync.Integration, ref string) (bool, error) {
	if err := s.limits.Policy.CheckURL(ctx, in.RepoURL); err != nil {
		return false, dbtsync.Permanent(err)
	}
	auth, err := s.auth(in)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, min(refListTimeout, s.limits.CloneTimeout))
	defer cancel()
	select {
	case s.listings <- struct{}{}:
		defer func() { <-s.listings }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	want := refCandidates(ref)
	var found bool
	if path, ok := strings.CutPrefix(in.RepoURL, "file://"); ok {
		found, err = localHasRef(path, want)
	} else {
		client := &http.Client{Transport: policyTransport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}
		found, err = advertisedRef(ctx, client, in.RepoURL, auth, want)
	}
	if err != nil {
		return false, cloneFailure(ctx, dbtsync.RepoHost(in.RepoURL), ref, err, s.limits)
	}
	return found, nil
}

// localHasRef looks the names up in a file:// repository (the local stack): the loose
// reference, else a line-by-line scan of packed-refs that stops at the name.
func localHasRef(path string, want []plumbing.ReferenceName) (bool, error) {
	st, err := localRepositories{}.Load(&transport.Endpoint{Protocol: "file", Path: path})
	if err != nil {
		return false, err
	}
	for _, name := range want {
		_, err := st.Reference(name)
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, plumbing.ErrReferenceNotFound):
			return false, err
		}
	}
	return false, nil
}

// advertisedRef asks the smart-HTTP server at repoURL for its upload-pack advertisement
// (GET info/refs?service=git-upload-pack) and reports whether it names one of want. The
// client's transport bounds the bytes read (MaxRefAdverts: errAdvertTooLarge).
func advertisedRef(ctx context.Context, client *http.Client, repoURL string, auth transport.AuthMethod, want []plumbing.ReferenceName) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(repoURL, "/")+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("User-Agent", "git/2.0 (dbtsync)")
	if a, ok := auth.(githttp.AuthMethod); ok && a != nil {
		a.SetAuth(req)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return false, transport.ErrAuthenticationRequired
	case http.StatusForbidden:
		return false, transport.ErrAuthorizationFailed
	case http.StatusNotFound:
		return false, transport.ErrRepositoryNotFound
	default:
		return false, fmt.Errorf("git server answered %d to the reference listing", resp.StatusCode)
	}
	return scanAdvertisement(resp.Body, want)
}

// errNotAnAdvertisement: the answer is not a smart-HTTP upload-pack advertisement.
var errNotAnAdvertisement = errors.New("the server's answer is not a git reference advertisement")

// scanAdvertisement reads pkt-lines (git's protocol v0/v1 advertisement, after the
// smart-HTTP service line) until a reference named in want, or the end of the list.
func scanAdvertisement(r io.Reader, want []plumbing.ReferenceName) (bool, error) {
	pr := pktReader{r: bufio.NewReaderSize(r, 64<<10)}
	line, err := pr.next()
	if err != nil {
		return false, err
	}
	if line != nil && strings.HasPrefix(string(line), "# service=") {
		// The smart-HTTP preamble: the service line, then a flush.
		if line, err = pr.next(); err != nil {
			return false, err
		}
		if line != nil {
			return false, errNotAnAdvertisement
		}
		if line, err = pr.next(); err != nil {
			return false, err
		}
	}
	if line != nil && string(line) == "version 1\n" {
		if line, err = pr.next(); err != nil {
			return false, err
		}
	}
	names := make([][]byte, len(want))
	for i, w := range want {
		names[i] = []byte(w)
	}
	for first := true; line != nil; first = false {
		if first {
			line, _, _ = bytes.Cut(line, []byte{0}) // the capabilities
		}
		hash, name, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(" "))
		if !ok || (len(hash) != 40 && len(hash) != 64) {
			return false, errNotAnAdvertisement
		}
		for _, w := range names {
			if bytes.Equal(name, w) {
				return true, nil
			}
		}
		if line, err = pr.next(); err != nil {
			return false, err
		}
	}
	return false, nil
}

// pktReader reads git pkt-lines into one reused buffer.
type pktReader struct {
	r   *bufio.Reader
	buf [65520]byte
}

// next is the next pkt-line's payload, valid until the next call; nil at a flush.
func (p *pktReader) next() ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(p.r, head[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return nil, errNotAnAdvertisement
		}
		return nil, err
	}
	n, err := strconv.ParseUint(string(head[:]), 16, 16)
	switch {
	case err != nil:
		return nil, errNotAnAdvertisement
	case n == 0:
		return nil, nil
	case n < 4 || n > uint64(len(p.buf)):
		return nil, errNotAnAdvertisement
	}
	b := p.buf[:n-4]
	if _, err := io.ReadFull(p.r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return nil, errNotAnAdvertisement
		}
		return nil, err
	}
	return b, nil
}
