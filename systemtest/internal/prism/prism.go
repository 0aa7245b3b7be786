// Package prism judges HTTP exchanges against api/openapi.yaml with Stoplight Prism's
// validating proxy (npm @stoplight/prism-cli, pinned, installed outside the repository),
// the validator customers put in front of an API: it reads OpenAPI 3.0.3 strictly, so a
// null where the document does not admit one is a violation, as in a typed client.
//
// A test keeps talking to the platform itself and reads the platform's own bytes: each
// exchange it makes is then replayed through Prism. The request goes to Prism as it was
// sent; Prism forwards it to an upstream of this package that answers with the response
// the platform gave, and reports what it found in its sl-violations header. Prism as the
// test's proxy instead would change what the test sees: it re-encodes JSON answers
// (losing int64 precision) and answers a request it cannot parse itself.
package prism

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
)

// Version is the pinned @stoplight/prism-cli. 5.14.2 is the last release that runs on
// Node 20 (Debian's); later ones need Node 24.
const Version = "5.14.2"

// replayHeader carries the id of the recorded answer through Prism to the upstream.
const replayHeader = "X-Prism-Replay"

// Violation is one finding of Prism: where (request or response, then the part and the
// field), the rule and its message.
type Violation struct {
	Location []string `json:"location"`
	Severity string   `json:"severity"`
	Code     any      `json:"code"` // a JSON Schema keyword ("type", "required") or Prism's own code
	Message  string   `json:"message"`
}

// Field is the violation's place, such as response.body.dashboardDraft.
func (v Violation) Field() string { return strings.Join(v.Location, ".") }

// Rule is the rule broken: the schema keyword and Prism's message.
func (v Violation) Rule() string {
	if v.Code == nil {
		return v.Message
	}
	return fmt.Sprintf("%v: %s", v.Code, v.Message)
}

func (v Violation) String() string { return v.Field() + " (" + v.Rule() + ")" }

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, 2^53−1: the bound Prism puts on
// format int64.
const maxSafeInteger = "9007199254740991"

// beyondJavaScript reports whether v is Prism's bound on format int64 rather than a rule of
// the document (which states no such bound: a test checks that it never does).
func (v Violation) beyondJavaScript() bool {
	return (v.Code == "maximum" || v.Code == "minimum") && strings.HasSuffix(v.Message, maxSafeInteger)
}

// Verdict is Prism's judgement of one exchange.
type Verdict struct {
	Request  []Violation // the request is not what the document allows (counted, not failed: tests send bad requests on purpose)
	Response []Violation // the answer is not what the document says (a failure)
	// BeyondJavaScript are Prism's findings, in the request or the answer, on integers of
	// format int64 beyond ±(2^53−1), the integers a JavaScript number holds exactly: Prism
	// checks int64 against that range, which the document does not state (an id a client
	// sent, and the answer echoing it).
	BeyondJavaScript []Violation
	// Unparsed is set when Prism answered the request itself instead of forwarding it
	// (a body that is not JSON): the exchange was then judged without the body.
	Unparsed string
}

// Exchange is what a test sent and what it got back.
type Exchange struct {
	Method     string
	URI        string // escaped path and query, as sent
	Header     http.Header
	Body       []byte
	Status     int
	RespHeader http.Header
	RespBody   []byte
}

// Validator is a running Prism proxy and the upstream that replays answers to it.
type Validator struct {
	url    string
	cmd    *exec.Cmd
	done   chan struct{} // closed when Prism has exited, with exit set
	exit   error
	out    *bytes.Buffer
	outMu  *sync.Mutex
	replay *httptest.Server
	http   *http.Client

	seq     atomic.Uint64
	mu      sync.Mutex
	pending map[string]*Exchange
	served  map[string]bool
}

// Start runs Prism's proxy for the document at doc until t ends. It fails t when Prism
// does not start, and skips it only when npm cannot reach the registry.
func Start(t testing.TB, doc string) *Validator {
	t.Helper()
	bin := filepath.Join(devstack.NpmPackage(t, "@stoplight/prism-cli", Version, "the contract validation (Prism)"), ".bin", "prism")
	v := &Validator{pending: map[string]*Exchange{}, served: map[string]bool{}, http: &http.Client{
		Timeout: 30 * time.Second,
		// Node closes a connection idle for 5 s; closing it first here means a request
		// never goes out on a connection Prism is closing.
		Transport: &http.Transport{IdleConnTimeout: 2 * time.Second, MaxIdleConnsPerHost: 8},
	}}
	v.replay = httptest.NewServer(http.HandlerFunc(v.serveRecorded))
	t.Cleanup(v.replay.Close)
	var err error
	for attempt := 1; attempt <= 3; attempt++ { // a port found free can be taken before Prism binds it
		if err = v.start(devstack.FreeAddr(t), bin, doc); err == nil {
			t.Cleanup(v.stop)
			return v
		}
	}
	t.Fatalf("prism: %v", err)
	return nil
}

func (v *Validator) start(addr, bin, doc string) error {
	host, port, _ := net.SplitHostPort(addr)
	v.url = "http://" + addr
	v.out, v.outMu = &bytes.Buffer{}, &sync.Mutex{}
	v.cmd = exec.Command(bin, "proxy", doc, v.replay.URL, "--host", host, "--port", port, "--errors=false", "--cors=false", "--verboseLevel", "warn")
	w := &lockedWriter{mu: v.outMu, b: v.out}
	v.cmd.Stdout, v.cmd.Stderr = w, w
	exited, err := devstack.StartChild(v.cmd)
	if err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	v.done = make(chan struct{})
	go func() { v.exit = <-exited; close(v.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-v.done:
			return fmt.Errorf("prism exited at start:\n%s", v.output())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond) // polling interval of the start deadline
	}
	v.stop()
	return fmt.Errorf("prism did not listen on %s within 60 s:\n%s", addr, v.output())
}

func (v *Validator) stop() {
	if v.cmd == nil || v.cmd.Process == nil {
		return
	}
	_ = v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(10 * time.Second):
		_ = v.cmd.Process.Kill()
		<-v.done
	}
}

// CPU is the processor time Prism has used so far (user and system), from /proc.
func (v *Validator) CPU() (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", v.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name in parentheses: state is the 3rd field, utime and
	// stime the 14th and 15th, in clock ticks (100 per second on Linux).
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", v.cmd.Process.Pid, raw)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", v.cmd.Process.Pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func (v *Validator) output() string {
	v.outMu.Lock()
	defer v.outMu.Unlock()
	return v.out.String()
}

// Judge replays the exchange through Prism and returns its verdict. An error means
// Prism could not judge it (it failed or did not forward the answer).
func (v *Validator) Judge(ctx context.Context, x *Exchange) (Verdict, error) {
	verdict, forwarded, err := v.send(ctx, x, x.Body)
	if err != nil || forwarded {
		return verdict, err
	}
	// Prism answered itself, which it does for a body it cannot parse: judge the answer
	// without the body (the missing body is then a request violation of Prism's making,
	// not the test's, and is dropped).
	unparsed := verdict.Unparsed
	verdict, forwarded, err = v.send(ctx, x, nil)
	if err != nil {
		return verdict, err
	}
	if !forwarded {
		return verdict, fmt.Errorf("prism did not forward %s %s even without its body: %s", x.Method, x.URI, verdict.Unparsed)
	}
	verdict.Request = []Violation{{Location: []string{"request", "body"}, Severity: "Error", Message: "Prism refused the body: " + unparsed}}
	verdict.Unparsed = unparsed
	return verdict, nil
}

// send sends the request of x to Prism with body, the recorded answer ready upstream.
func (v *Validator) send(ctx context.Context, x *Exchange, body []byte) (Verdict, bool, error) {
	id := strconv.FormatUint(v.seq.Add(1), 10)
	v.mu.Lock()
	v.pending[id] = x
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		delete(v.pending, id)
		delete(v.served, id)
		v.mu.Unlock()
	}()
	req, err := http.NewRequestWithContext(ctx, x.Method, v.url+x.URI, bytes.NewReader(body))
	if err != nil {
		return Verdict{}, false, err
	}
	for k, vs := range x.Header {
		req.Header[k] = vs
	}
	if body == nil {
		req.Header.Del("Content-Type")
	}
	req.Header.Set(replayHeader, id)
	resp, err := v.http.Do(req)
	if err != nil {
		select {
		case <-v.done:
			return Verdict{}, false, fmt.Errorf("prism has exited (%v):\n%s", v.exit, v.output())
		default:
			return Verdict{}, false, fmt.Errorf("prism: %w\n%s", err, v.output())
		}
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	v.mu.Lock()
	forwarded := v.served[id]
	v.mu.Unlock()
	var verdict Verdict
	if !forwarded {
		verdict.Unparsed = fmt.Sprintf("%d %.300s", resp.StatusCode, raw)
		return verdict, false, nil
	}
	var found []Violation
	if h := resp.Header.Get("sl-violations"); h != "" {
		if err := json.Unmarshal([]byte(h), &found); err != nil {
			return verdict, true, fmt.Errorf("prism's sl-violations header %q: %w", h, err)
		}
	}
	for _, f := range found {
		switch {
		case f.beyondJavaScript():
			verdict.BeyondJavaScript = append(verdict.BeyondJavaScript, f)
		case len(f.Location) == 0 || f.Location[0] != "response":
			verdict.Request = append(verdict.Request, f)
		default:
			verdict.Response = append(verdict.Response, f)
		}
	}
	return verdict, true, nil
}

// serveRecorded is Prism's upstream: it answers with the recorded answer the request's
// replay id names.
func (v *Validator) serveRecorded(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(replayHeader)
	v.mu.Lock()
	x, ok := v.pending[id]
	if ok {
		v.served[id] = true
	}
	v.mu.Unlock()
	if !ok {
		http.Error(w, "no recorded answer for replay id "+strconv.Quote(id), http.StatusBadGateway)
		return
	}
	for k, vs := range x.RespHeader {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive":
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(x.Status)
	_, _ = w.Write(x.RespBody)
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 64<<10 { // Prism's start and its latest lines are enough to tell what went wrong
		w.b.Truncate(32 << 10)
	}
	return w.b.Write(p)
}
