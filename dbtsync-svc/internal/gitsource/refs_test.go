package gitsource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/devstack/gitrepo"
)

// The API process asks a tenant's git server whether a SHA-like ref is a branch or a
// tag. A server that advertises hundreds of thousands of references costs it a bounded
// read: the listing streams, stops at the name it looks for, and reads at most the
// advertisement limit.

const manyRefs = 200_000

const someHash = "0123456789abcdef0123456789abcdef01234567"

// advertise serves a smart-HTTP upload-pack advertisement of n branches b000000000...,
// written as it streams, and counts the bytes the client took.
func advertise(t *testing.T, n int, sent *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/acme/dbt.git/info/refs" || r.URL.Query().Get("service") != "git-upload-pack" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		bw := bufio.NewWriterSize(countingWriter{w, sent}, 32<<10)
		defer bw.Flush()
		_, _ = bw.WriteString("001e# service=git-upload-pack\n0000")
		_, _ = bw.WriteString(pkt(someHash + " refs/heads/b000000000\x00multi_ack side-band-64k ofs-delta\n"))
		// The other lines, written in place: the server allocates nothing per line.
		line := []byte(pkt(someHash + " refs/heads/b000000000\n"))
		var digits [20]byte
		for i := 1; i < n; i++ {
			d := strconv.AppendInt(digits[:0], int64(i), 10)
			copy(line[len(line)-1-len(d):], d)
			if _, err := bw.Write(line); err != nil {
				return // the client stopped reading
			}
		}
		_, _ = bw.WriteString("0000")
	}))
	t.Cleanup(srv.Close)
	return srv
}

type countingWriter struct {
	w http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// pkt is payload as a pkt-line.
func pkt(payload string) string { return fmt.Sprintf("%04x%s", 4+len(payload), payload) }

// advertSize is the bytes of advertise's answer for n references.
func advertSize(n int) int64 { return int64(34 + n*(4+40+1+21+1) + 34 + 4) }

// listClient is the HTTP client HasRef reads with, over the policy's transport, for a
// Source with limits l (the test's server is on 127.0.0.1).
func listClient(l Limits) *http.Client {
	l.Policy.AllowedHosts = append(l.Policy.AllowedHosts, "127.0.0.1")
	New(nil, l)
	return &http.Client{Transport: policyTransport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}
}

// allocated is the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Not parallel (here and below): the policy's transport is the process's, and the
// allocation counts are the process's.
func TestAListingOfManyRefsStopsAtTheNameItLooksFor(t *testing.T) {
	var sent, read atomic.Int64
	srv := advertise(t, manyRefs, &sent)
	client := listClient(Limits{})
	client.Transport = countingTransport{client.Transport, &read}
	var found bool
	var err error
	alloc := allocated(func() {
		found, err = advertisedRef(context.Background(), client, srv.URL+"/acme/dbt.git", nil, refCandidates("b000000010"))
	})
	if err != nil || !found {
		t.Fatalf("advertisedRef = %v, %v; want found", found, err)
	}
	size := advertSize(manyRefs)
	t.Logf("a name near the start of %d bytes of advertisement: %d bytes allocated, %d read", size, alloc, read.Load())
	if alloc > uint64(size/20) {
		t.Errorf("finding a ref near the start allocated %d bytes, for an advertisement of %d", alloc, size)
	}
	if n := read.Load(); n > 256<<10 {
		t.Errorf("the listing read %d of %d bytes to find a name at its start", n, size)
	}
}

// countingTransport counts the bytes read of its responses' bodies.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func TestAListingOverTheAdvertisementLimitFailsNamingIt(t *testing.T) {
	var sent atomic.Int64
	srv := advertise(t, manyRefs, &sent)
	client := listClient(Limits{})
	var err error
	alloc := allocated(func() {
		_, err = advertisedRef(context.Background(), client, srv.URL+"/acme/dbt.git", nil, refCandidates("nowhere"))
	})
	if !errors.Is(err, errAdvertTooLarge) {
		t.Fatalf("advertisedRef of a %d-byte advertisement = %v, want the limit's error", advertSize(manyRefs), err)
	}
	t.Logf("an absent name in %d bytes of advertisement: %d bytes allocated", advertSize(manyRefs), alloc)
	// Decoded into maps, the references took several times the advertisement's size.
	if alloc > uint64(advertSize(manyRefs)/4) {
		t.Errorf("reading %d bytes of a %d-byte advertisement allocated %d bytes", DefaultLimits.MaxRefAdverts, advertSize(manyRefs), alloc)
	}
	code, msg, _ := dbtsync.PublicFailure(cloneFailure(context.Background(), "git.example", "nowhere", err, DefaultLimits))
	if code != dbtsync.CodeRepositoryLimit || !strings.Contains(msg, "over the limit of 8388608 bytes") {
		t.Errorf("the failure is %s %q, want repository_limit naming the limit", code, msg)
	}
	// Under a limit it fits in, the whole list is read and the name is not in it.
	client = listClient(Limits{MaxRefAdverts: 64 << 20})
	found, err := advertisedRef(context.Background(), client, srv.URL+"/acme/dbt.git", nil, refCandidates("nowhere"))
	if err != nil || found {
		t.Errorf("advertisedRef of an absent name = %v, %v", found, err)
	}
	found, err = advertisedRef(context.Background(), client, srv.URL+"/acme/dbt.git", nil, refCandidates(fmt.Sprintf("b%09d", manyRefs-1)))
	if err != nil || !found {
		t.Errorf("advertisedRef of the last name = %v, %v", found, err)
	}
	listClient(Limits{}) // the default limits again, for the tests after this one
}

// The worker's fetch reads the same advertisement before the pack, through the same
// transport: it fails at the limit too.
func TestAFetchStopsAtTheAdvertisementLimit(t *testing.T) {
	var sent atomic.Int64
	srv := advertise(t, manyRefs, &sent)
	client := githttp.NewClient(listClient(Limits{}))
	ep, err := transport.NewEndpoint(srv.URL + "/acme/dbt.git")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.NewUploadPackSession(ep, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.AdvertisedReferencesContext(context.Background())
	code, msg, _ := dbtsync.PublicFailure(cloneFailure(context.Background(), "git.example", "main", err, DefaultLimits))
	if code != dbtsync.CodeRepositoryLimit || !strings.Contains(msg, "over the limit of 8388608 bytes") {
		t.Errorf("a fetch's advertisement of %d bytes: %v, failing %s %q", advertSize(manyRefs), err, code, msg)
	}
}

func TestAnAnswerThatIsNotAnAdvertisementIsAnError(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"html":            "<html>sign in</html>",
		"truncated":       "001e# service=git-upload-pack\n0000003f" + someHash,
		"no-hash":         "001e# service=git-upload-pack\n0000000bnohash\n0000",
		"short-length":    "0003",
		"no-flush":        "001e# service=git-upload-pack\n",
		"dumb-http-lines": someHash + "\trefs/heads/main\n",
	} {
		if _, err := scanAdvertisement(strings.NewReader(body), refCandidates("main")); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	found, err := scanAdvertisement(strings.NewReader("001e# service=git-upload-pack\n0000"+
		pkt(someHash+" refs/heads/dev\x00multi_ack ofs-delta\n")+pkt(someHash+" refs/tags/v1.0.0\n")+"0000"), refCandidates("v1.0.0"))
	if err != nil || !found {
		t.Errorf("a tag: %v %v", found, err)
	}
	empty := "001e# service=git-upload-pack\n0000" + pkt(strings.Repeat("0", 40)+" capabilities^{}\x00ofs-delta\n") + "0000"
	if found, err := scanAdvertisement(strings.NewReader(empty), refCandidates("main")); err != nil || found {
		t.Errorf("an empty repository: %v %v", found, err)
	}
}

// file:// (the local stack): the names are looked up in the repository, packed-refs read
// line by line up to the name.
func TestHasRefOfALocalRepositoryWithManyRefs(t *testing.T) {
	dir := t.TempDir()
	r, err := gitrepo.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := r.Tree(nil)
	head, err := r.Commit(tree, "main")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, ".git", "packed-refs"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "# pack-refs with: peeled fully-peeled sorted")
	for i := range manyRefs {
		fmt.Fprintf(w, "%s refs/heads/b%09d\n", head, i)
	}
	fmt.Fprintf(w, "%s refs/tags/v1\n", head)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(filepath.Join(dir, ".git", "packed-refs"))
	s := New(nil, Limits{Policy: Policy{AllowFile: true}})
	in := dbtsync.Integration{DeploymentID: 1, RepoURL: "file://" + dir}
	var found bool
	alloc := allocated(func() { found, err = s.HasRef(context.Background(), in, "b000000003") })
	if err != nil || !found {
		t.Fatalf("HasRef of a packed branch = %v, %v", found, err)
	}
	if alloc > uint64(st.Size()/20) {
		t.Errorf("finding a ref near the start allocated %d bytes, for %d bytes of packed-refs", alloc, st.Size())
	}
	for ref, want := range map[string]bool{"main": true, "v1": true, "abcdef1": false} {
		if got, err := s.HasRef(context.Background(), in, ref); err != nil || got != want {
			t.Errorf("HasRef(%s) = %v, %v; want %v", ref, got, err, want)
		}
	}
}

// At most RefListings listings run at once; one more waits, within its request's
// deadline.
func TestListingsBeyondTheLimitWaitWithinTheirDeadline(t *testing.T) {
	dir := t.TempDir()
	r, _ := gitrepo.Init(dir)
	tree, _ := r.Tree(nil)
	if _, err := r.Commit(tree, "main"); err != nil {
		t.Fatal(err)
	}
	s := New(nil, Limits{Policy: Policy{AllowFile: true}, RefListings: 2})
	in := dbtsync.Integration{DeploymentID: 1, RepoURL: "file://" + dir}
	s.listings <- struct{}{}
	s.listings <- struct{}{} // two listings running
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.HasRef(ctx, in, "main"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a third listing = %v, want it to wait until its deadline", err)
	}
	if waited := time.Since(start); waited < 90*time.Millisecond {
		t.Errorf("the third listing waited %s", waited)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.HasRef(context.Background(), in, "main")
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	<-s.listings // one ends
	if err := <-done; err != nil {
		t.Errorf("the waiting listing: %v", err)
	}
}
