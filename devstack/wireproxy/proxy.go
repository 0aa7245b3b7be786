// Package wireproxy is a MongoDB wire-protocol proxy that executes the commands of all
// client connections one at a time (All), only the writes to one collection one at a
// time (Collections), or only the write commands (Writes); Interleave is Collections with
// writes of many documents split as MongoDB interleaves them (interleave.go).
//
// FerretDB v1 runs update and findAndModify as read-then-write without a lock,
// so concurrent $inc or conditional updates lose writes. Putting this proxy in
// front makes every write atomic with respect to every other one, which is what
// tests of optimistic concurrency and counters need from a dev database. Collections and
// Writes modes let reads (find, count, getMore, aggregate without $out or $merge, …) run
// beside the writes and each other (turns.go). The proxy takes maxTimeMS out of finds and
// aggregates (maxtime.go: FerretDB's cancellation of it spoiled pooled PostgreSQL
// connections), writes a find's $in of one value as the equality FerretDB pushes down
// (inone.go), adds the equalities every branch of a find's rooted $or shares beside it
// (orhoist.go) and answers a find with an $in of several _ids (or of an indexed field) with
// one find per value, merged (split.go).
// It answers StatsCommand itself (stats.go).
// It is a dev/test tool: throughput is one command at a time by design.
//
// It also keeps FerretDB's write commands from hanging on their statement count: it
// forwards the statements of update and insert commands in batches and merges the replies
// (batch.go). A command that still gets no reply within a deadline is answered with an
// error and its upstream connection dropped, so it cannot hold the turn for ever.
package wireproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// MaxMessageSize is the largest message the proxy forwards. It is above
// MongoDB's and FerretDB's maxMessageSizeBytes (48,000,000), so anything a
// conforming driver sends fits; bigger messages close the connection.
const MaxMessageSize = 48 << 20

// Message header and opcodes, see
// https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/
const (
	headerLen = 16

	opUpdate      = 2001
	opInsert      = 2002
	opQuery       = 2004
	opDelete      = 2006
	opKillCursors = 2007
	opMsg         = 2013

	flagChecksumPresent = 1 << 0
	flagMoreToCome      = 1 << 1
	flagExhaustAllowed  = 1 << 16
)

// ErrMessageTooLarge is returned when a peer announces a message above MaxMessageSize.
var ErrMessageTooLarge = errors.New("wireproxy: message larger than MaxMessageSize")

// ErrBadHeader is returned for a message length below the 16-byte header.
var ErrBadHeader = errors.New("wireproxy: message length shorter than its header")

var errClosed = errors.New("wireproxy: proxy closed")

// Mode says which commands the proxy runs one at a time.
type Mode int

const (
	// All runs every command one at a time across all connections.
	All Mode = iota
	// Writes runs every command that may write (anything but the reads of readCommands
	// and aggregates without $out or $merge) one at a time across all connections; reads
	// are forwarded at once.
	Writes
	// Collections runs the writes to one collection one at a time, writes to different
	// collections and reads side by side (turns.go); a write that names no collection
	// or several waits for every other write.
	Collections
)

func (m Mode) String() string {
	switch m {
	case Writes:
		return "writes"
	case Collections:
		return "collections"
	case Interleave:
		return "interleave"
	}
	return "all"
}

// ParseMode reads a Mode's String; "" is All.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "all":
		return All, nil
	case "writes":
		return Writes, nil
	case "collections":
		return Collections, nil
	case "interleave":
		return Interleave, nil
	}
	return All, fmt.Errorf("wireproxy: unknown mode %q: want all, writes, collections or interleave", s)
}

// Proxy forwards MongoDB wire-protocol traffic to one upstream, serialised.
type Proxy struct {
	ln        net.Listener
	logger    *slog.Logger
	mode      Mode
	escape    bool
	batches   map[string]int
	timeout   time.Duration
	onTimeout func(string)
	rs        *ReplicaSet
	examiner  *examiner // what MongoDB would read (examine.go)
	maxSplit  int       // Options.MaxSplitIDs, defaulted

	// upstream is the address new upstream connections go to; generation counts its
	// changes, so a connection to a former upstream is replaced before its next command.
	upstreamMu sync.Mutex
	upstream   string
	generation int

	// Commands forwarded (each find a split sent, split.go), and of them those that took a
	// turn (a write, or any command in All mode): what a benchmark reports beside its timings.
	forwarded, serialised atomic.Int64
	stats                 stats

	// turns are the locks commands wait for (turns.go).
	turns *turns
	done  chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Listen starts a proxy on addr ("127.0.0.1:0" for a random port) forwarding
// to the MongoDB server at upstream ("host:port"), serialising every command (All).
// Each client connection gets its own upstream connection, so per-connection server
// state (cursors, sessions) keeps its meaning.
func Listen(addr, upstream string, logger *slog.Logger) (*Proxy, error) {
	return ListenWith(addr, upstream, Options{Mode: All, Logger: logger})
}

// Options are a proxy's settings.
type Options struct {
	// Mode is which commands run one at a time: All (the zero value) or Writes.
	Mode Mode
	// EscapeNUL rewrites NUL in the strings of requests and back in replies (nul.go),
	// for an upstream that cannot store it (FerretDB on PostgreSQL).
	EscapeNUL bool
	// Batches are the most statements per command the proxy forwards of the write
	// commands it names (update, insert, delete), see batch.go; nil is DefaultBatches, an
	// empty map forwards every command whole.
	Batches map[string]int
	// CommandTimeout bounds how long the proxy waits for the reply to one command it
	// forwards (each batch of a write command); 0 is DefaultCommandTimeout. Past it the
	// client gets a MaxTimeMSExpired error and the upstream connection is dropped.
	CommandTimeout time.Duration
	// OnCommandTimeout, when set, is called with the upstream's address after a command
	// got no reply within CommandTimeout; it must not block.
	OnCommandTimeout func(upstream string)
	Logger           *slog.Logger

	// ReplicaSet, when set, makes the proxy present its upstream as that one-node
	// replica set (replset.go), with the proxy's address as its member.
	ReplicaSet *ReplicaSet
	// Examine makes the proxy count what MongoDB would read for each query it forwards
	// from the start (examine.go); without it, from ExamineCommand's {record: true} on.
	Examine bool
	// MaxSplitIDs is the most values of a find's top-level $in the proxy sends as one find
	// per value (split.go); 0 is DefaultMaxSplitIDs, a negative number splits none.
	MaxSplitIDs int
}

// DefaultCommandTimeout is Options.CommandTimeout's default: far above what a command of
// the local stack or the tests takes, so only a command that hangs meets it.
const DefaultCommandTimeout = 2 * time.Minute

// ListenWith is Listen with options.
func ListenWith(addr, upstream string, o Options) (*Proxy, error) {
	logger, mode := o.Logger, o.Mode
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wireproxy: listen on %s: %w", addr, err)
	}
	p := &Proxy{
		upstream:  upstream,
		ln:        ln,
		logger:    logger.With("component", "wireproxy"),
		mode:      mode,
		escape:    o.EscapeNUL,
		batches:   o.Batches,
		timeout:   o.CommandTimeout,
		onTimeout: o.OnCommandTimeout,
		rs:        o.ReplicaSet,
		maxSplit:  o.MaxSplitIDs,
		done:      make(chan struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	p.turns = newTurns(p.done)
	p.examiner = newExaminer(p.currentUpstream, p.logger, o.Examine)
	if p.rs != nil {
		p.rs.attach(ln.Addr().String())
	}
	if p.batches == nil {
		p.batches = DefaultBatches
	}
	if p.timeout <= 0 {
		p.timeout = DefaultCommandTimeout
	}
	if p.maxSplit == 0 {
		p.maxSplit = DefaultMaxSplitIDs
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Counts are the commands forwarded so far, and of them those run one at a time.
func (p *Proxy) Counts() (forwarded, serialised int64) {
	return p.forwarded.Load(), p.serialised.Load()
}

// SetUpstream points the proxy at another upstream: every client connection's next
// command goes there, on a new upstream connection (cursors of the former one are gone).
func (p *Proxy) SetUpstream(addr string) {
	p.upstreamMu.Lock()
	defer p.upstreamMu.Unlock()
	p.upstream = addr
	p.generation++
}

func (p *Proxy) currentUpstream() (string, int) {
	p.upstreamMu.Lock()
	defer p.upstreamMu.Unlock()
	return p.upstream, p.generation
}

// Close stops accepting, closes every client and upstream connection and
// waits for all proxy goroutines to return. It is idempotent.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.done)
		err = p.ln.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
		p.examiner.close()
	})
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary errors (EMFILE and the like): back off briefly
			// instead of spinning, as net/http does.
			p.logger.Warn("accept failed", "err", err)
			select {
			case <-p.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers conns so Close can interrupt blocked reads; false once closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// link is a client connection's connection to the upstream.
type link struct {
	addr       string
	generation int
	conn       net.Conn
	r          *bufio.Reader
}

func (p *Proxy) dial() (*link, error) {
	addr, gen := p.currentUpstream()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("wireproxy: dial upstream %s: %w", addr, err)
	}
	if !p.track(c) {
		_ = c.Close()
		return nil, errClosed
	}
	return &link{addr: addr, generation: gen, conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (p *Proxy) drop(l *link) {
	_ = l.conn.Close()
	p.untrack(l.conn)
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)

	l, err := p.dial()
	if err != nil {
		p.logger.Warn("dial upstream failed", "err", err)
		return
	}
	defer func() { p.drop(l) }()

	cr := bufio.NewReaderSize(client, 64<<10)
	for {
		msg, err := ReadMessage(cr)
		if err != nil {
			p.logEnd("client", err)
			return
		}
		if _, gen := p.currentUpstream(); gen != l.generation {
			if l, err = p.redial(l); err != nil {
				return
			}
		}
		if p.escape {
			msg = rewriteMsg(msg, escapeString)
		}
		replies, err := p.handle(l, msg)
		if err != nil && !errors.Is(err, errNoReply) {
			p.logEnd("upstream", err)
			return
		}
		// Replies are written after the lock is released: the command has
		// already completed upstream, and a slow client must not stall others.
		for _, r := range replies {
			if p.escape && bytes.Contains(r, escCharBytes) {
				r = rewriteMsg(r, unescapeString)
			}
			if _, err := client.Write(r); err != nil {
				p.logEnd("client", err)
				return
			}
		}
		if err != nil {
			name, _ := commandName(msg)
			p.logger.Warn("no reply from upstream within the command deadline: dropping the upstream connection",
				"upstream", l.addr, "command", name, "timeout", p.timeout)
			if p.onTimeout != nil {
				p.onTimeout(l.addr)
			}
			if l, err = p.redial(l); err != nil {
				return
			}
		}
	}
}

// redial replaces l by a new connection to the current upstream.
func (p *Proxy) redial(l *link) (*link, error) {
	p.drop(l)
	nl, err := p.dial()
	if err != nil {
		p.logger.Warn("dial upstream failed", "err", err)
		return l, err
	}
	return nl, nil
}

func (p *Proxy) logEnd(side string, err error) {
	select {
	case <-p.done:
		return
	default:
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, ErrMessageTooLarge) || errors.Is(err, ErrBadHeader) {
		p.logger.Warn("closing connection", "side", side, "err", err)
		return
	}
	p.logger.Debug("connection ended", "side", side, "err", err)
}

// errNoReply: the upstream did not answer within the command deadline.
var errNoReply = errors.New("wireproxy: no reply from upstream within the command deadline")

// handle answers one request: the replica set's way when the proxy presents one
// (replset.go), else forward's. With errNoReply the replies (if any) are still to be
// given, and the upstream connection is to be replaced; with any other error the client
// connection ends.
func (p *Proxy) handle(l *link, msg []byte) ([][]byte, error) {
	if p.rs != nil {
		return p.rs.handle(p, l, msg)
	}
	return p.forward(l, msg)
}

// forward forwards one request and returns the replies to give the client, holding the
// turns its mode gives it (turns.go), so no command it must not overlap runs upstream
// in between. With errNoReply the replies (if any) are still to be given, and
// the upstream connection is to be replaced.
func (p *Proxy) forward(l *link, msg []byte) ([][]byte, error) {
	expectReply := prepareRequest(msg)
	m, isMsg := parseOpMsg(msg)
	if isStatsRequest(m, isMsg) {
		return [][]byte{p.statsReply(msg)}, nil
	}
	msg, m = withoutMaxTime(msg, m, isMsg)
	msg, m = withInOneAsEquality(msg, m, isMsg)
	msg, m = withOrEqualitiesHoisted(msg, m, isMsg)
	if reply, ok := p.examine(msg, m, isMsg); ok {
		return [][]byte{reply}, nil
	}
	if p.mode == Interleave && isMsg && expectReply {
		if replies, ok, err := p.interleave(l, msg, m); ok {
			return replies, err
		}
	}
	split, splits := findSplit{}, false
	if isMsg && expectReply {
		split, splits = splitFind(m, p.maxSplit, p.examiner.indexed)
	}
	p.forwarded.Add(1)
	sc := scopeOf(p.mode, msg, m, isMsg)
	if sc.all || sc.stripe >= 0 {
		p.serialised.Add(1)
	}
	arrived := time.Now()
	release, ok := p.turns.acquire(sc)
	if !ok {
		return nil, errClosed
	}
	turn := time.Now()
	defer release()
	sent := 0 // finds a split sent upstream
	defer func() { p.stats.record(statsKey(msg, m, isMsg), turn.Sub(arrived), time.Since(turn), sent) }()

	var replies [][]byte
	var err error
	if w, ok := asWriteCommand(msg, m, p.batches); ok && isMsg {
		replies, err = p.forwardWrite(l, &w, expectReply)
	} else if splits {
		replies, sent, err = p.forwardSplit(l, msg, &split)
		// Every find it sent was forwarded, in the command's turn.
		p.forwarded.Add(int64(sent - 1))
		if sc.all || sc.stripe >= 0 {
			p.serialised.Add(int64(sent - 1))
		}
	} else {
		replies, err = p.exchange(l, msg, expectReply)
	}
	if errors.Is(err, errNoReply) && replies == nil && expectReply {
		if !isMsg {
			return nil, fmt.Errorf("%s within %s", errNoReply.Error(), p.timeout) // the connection ends
		}
		replies = [][]byte{errorReply(msg, codeMaxTimeMSExpired, "MaxTimeMSExpired", p.timeoutMessage())}
	}
	return replies, err
}

func (p *Proxy) timeoutMessage() string {
	return fmt.Sprintf("wireproxy: no reply from the database within %s (the proxy's command deadline): the command was abandoned and its connection dropped", p.timeout)
}

// exchange writes msg upstream and reads its replies, within the command deadline.
func (p *Proxy) exchange(l *link, msg []byte, expectReply bool) ([][]byte, error) {
	if err := l.conn.SetDeadline(time.Now().Add(p.timeout)); err != nil {
		return nil, err
	}
	if _, err := l.conn.Write(msg); err != nil {
		return nil, noReply(err)
	}
	if !expectReply {
		return nil, nil
	}
	var replies [][]byte
	for {
		r, err := ReadMessage(l.r)
		if err != nil {
			return nil, noReply(err)
		}
		replies = append(replies, r)
		// An exhaust reply with moreToCome is followed by more replies to the
		// same request; the last one clears the flag.
		if !(opCode(r) == opMsg && msgFlags(r)&flagMoreToCome != 0) {
			return replies, nil
		}
	}
}

// noReply is err, marked errNoReply when it is the command deadline's.
func noReply(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %w", errNoReply, err)
	}
	return err
}
