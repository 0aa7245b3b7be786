package mongoplan

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Recorder keeps every distinct query a client sends (its Observe is the client's
// mongox.ConnectOptions.Observe) with the code that built it, and Check holds each
// against the database's indexes.
type Recorder struct {
	// Tests records the queries a test's own code sends too; by default a query whose
	// sender is a _test.go file (a test inspecting the database) is not a store's and is
	// left out.
	Tests bool

	mu   sync.Mutex
	seen map[string]bool
	cmds []Command
	used map[Allowance]bool
}

// NewRecorder is an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{seen: map[string]bool{}, used: map[Allowance]bool{}}
}

// stackFrames is how many frames of the sending code a command keeps.
const stackFrames = 3

// ignoredFrames are the packages between the code that built a command and the monitor.
var ignoredFrames = []string{"go.mongodb.org/", "runtime.", "testing.", "github.com/analyticsco/platform/libs/mongox.",
	"github.com/analyticsco/platform/devstack/mongoplan."}

// Observe records the queries of e with the caller's stack (it runs in the goroutine
// that sends the command). It never blocks on anything but the recorder's own lock.
func (r *Recorder) Observe(_ context.Context, e *event.CommandStartedEvent) {
	cmds := Commands(e)
	if len(cmds) == 0 {
		return
	}
	stack, fromTest := callers()
	if fromTest && !r.Tests {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		c.Stack = stack
		k := shapeKey(c)
		if r.seen[k] {
			continue
		}
		r.seen[k] = true
		// The event's command is the driver's buffer: keep copies.
		c.Filter, c.Sort, c.Hint, c.Projection = clone(c.Filter), clone(c.Sort), clone(c.Hint), clone(c.Projection)
		r.cmds = append(r.cmds, c)
	}
}

func clone(b bson.Raw) bson.Raw {
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

// callers names the first frames outside the driver, mongox and this package, innermost
// first: "mongostore.(*Store).ApplyTreeOp tree.go:75 < workspace.(*Service).apply service.go:60",
// and says whether the innermost of them is a test's.
func callers() (string, bool) {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var out []string
	fromTest := false
	for {
		f, more := frames.Next()
		if !slices.ContainsFunc(ignoredFrames, func(p string) bool { return strings.HasPrefix(f.Function, p) }) && f.Function != "" {
			name := f.Function
			if i := strings.LastIndex(name, "/"); i >= 0 {
				name = name[i+1:]
			}
			if len(out) == 0 {
				fromTest = strings.HasSuffix(f.File, "_test.go")
			}
			out = append(out, fmt.Sprintf("%s %s:%d", name, filepath.Base(f.File), f.Line))
			if len(out) == stackFrames {
				break
			}
		}
		if !more {
			break
		}
	}
	return strings.Join(out, " < "), fromTest
}

// shapeKey identifies a query up to its values and the callers of the function that
// built it: a query is reported once, with the stack it was first sent from.
func shapeKey(c Command) string {
	builder, _, _ := strings.Cut(c.Stack, " < ")
	return strings.Join([]string{c.Database, c.Collection, c.Name, Shape(c.Filter), KeysShape(c.Sort), KeysShape(c.Hint), c.HintName, c.Key, builder}, "\x00")
}

// KeysShape is a sort, a hint or a projection: {position: 1, _id: -1}.
func KeysShape(d bson.Raw) string {
	if d == nil {
		return ""
	}
	return keysText(Keys(d))
}

// Shape is a filter with its values left out: {dep: ?, anc: ?, treeV: {$lt: ?}}.
func Shape(d bson.Raw) string {
	if d == nil {
		return ""
	}
	elems, err := d.Elements()
	if err != nil {
		return "?"
	}
	var parts []string
	for _, e := range elems {
		parts = append(parts, e.Key()+": "+valueShape(e.Key(), e.Value()))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func valueShape(key string, v bson.RawValue) string {
	switch key {
	case "$and", "$or", "$nor":
		var parts []string
		for _, d := range arrayDocs(v) {
			parts = append(parts, Shape(d))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if d, ok := v.DocumentOK(); ok {
		if elems, err := d.Elements(); err == nil && len(elems) > 0 && strings.HasPrefix(elems[0].Key(), "$") {
			return Shape(d)
		}
	}
	return "?"
}

// Allowance excuses the unserved queries that a function (a substring of a frame of
// their stack) sends to a collection: a deliberate read of a whole, small collection. Its
// Reason says why a reviewer accepts it.
type Allowance struct {
	Func       string
	Collection string
	Reason     string
}

func (a Allowance) allows(c Command) bool {
	return a.Func != "" && strings.Contains(c.Stack, a.Func) && (a.Collection == "" || a.Collection == c.Collection)
}

// Check holds every distinct query recorded for db against db's indexes and fails t for
// each that no index serves (naming the command, the collection, the filter's shape, why,
// and the code that sent it), unless an allowance excuses it. Call it before the client
// disconnects (a t.Cleanup registered after the client's).
func (r *Recorder) Check(t testing.TB, db *mongo.Database, allow ...Allowance) {
	t.Helper()
	for _, a := range allow {
		if a.Reason == "" || a.Func == "" {
			t.Errorf("mongoplan: an allowance needs a function and a reason: %+v", a)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	indexes, err := IndexesOf(ctx, db)
	if err != nil {
		t.Errorf("mongoplan: %v", err)
		return
	}
	for _, c := range r.Unserved(db.Name(), indexes, allow...) {
		t.Errorf("mongoplan: %s", c)
	}
}

// Unserved are the recorded queries of database dbName that no index of indexes serves
// and no allowance excuses, each as its report line.
func (r *Recorder) Unserved(dbName string, indexes map[string][]Index, allow ...Allowance) []string {
	r.mu.Lock()
	cmds := slices.Clone(r.cmds)
	r.mu.Unlock()
	var out []string
	for _, c := range cmds {
		if c.Database != dbName {
			continue
		}
		p := Choose(c, indexes[c.Collection])
		if p.Served {
			continue
		}
		if i := slices.IndexFunc(allow, func(a Allowance) bool { return a.allows(c) }); i >= 0 {
			r.mu.Lock()
			r.used[allow[i]] = true
			r.mu.Unlock()
			continue
		}
		out = append(out, Report(c, p))
	}
	return out
}

// Report is the line that names an unserved query.
func Report(c Command, p Plan) string {
	q := Shape(c.Filter)
	if c.Sort != nil {
		q += " sort " + KeysShape(c.Sort)
	}
	if c.HintName != "" {
		q += " hint " + c.HintName
	} else if c.Hint != nil {
		q += " hint " + KeysShape(c.Hint)
	}
	return fmt.Sprintf("%s %s %s is served by no index: %s; sent by %s", c.Name, c.Collection, q, p.Reason, c.Stack)
}

// CheckAllowancesUsed fails t for every allowance no Check of this recorder needed: an
// allowance outliving its reason hides the next query it would match.
func (r *Recorder) CheckAllowancesUsed(t testing.TB, allow ...Allowance) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range allow {
		if !r.used[a] {
			t.Errorf("mongoplan: the allowance %+v excused nothing: remove it", a)
		}
	}
}

// Await waits up to timeout until a query whose stack names fn has been recorded, and
// reports whether one was: for a query a background task sends at start, which an
// allowance excuses and CheckAllowancesUsed then expects.
func (r *Recorder) Await(fn string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		found := slices.ContainsFunc(r.cmds, func(c Command) bool { return strings.Contains(c.Stack, fn) })
		r.mu.Unlock()
		if found || time.Now().After(deadline) {
			return found
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Commands are the distinct queries recorded so far.
func (r *Recorder) Commands() []Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cmds)
}
