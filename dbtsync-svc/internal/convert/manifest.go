package convert

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DecodeManifest reads a manifest.json as a stream within DefaultManifestLimits, keeping
// only what the data model needs: memory stays proportional to the members the
// conversion reads, not to the file (raw and compiled SQL, macros, docs and the rest are
// validated as they stream past and never held). A manifest is read once, as jsontext
// reads JSON by default: a duplicate member name or invalid UTF-8 anywhere fails it
// (a *FieldError saying where), and so does a member the conversion reads that is not
// of the shape dbt writes.
func DecodeManifest(r io.Reader) (*Project, error) { return DecodeManifestNotify(r, nil) }

// DecodeManifestNotify is DecodeManifestWith the default limits.
func DecodeManifestNotify(r io.Reader, onModel func(*Model)) (*Project, error) {
	return DecodeManifestWith(r, ManifestLimits{}, onModel)
}

// ManifestLimits bound what one manifest read holds; a limit of zero or less takes its
// DefaultManifestLimits value. Over a limit the read fails with a *ManifestLimitError.
type ManifestLimits struct {
	// MaxMemberBytes is the most bytes of one member the conversion reads whole: the
	// members of a node it reads, together (not its SQL, which streams past), the
	// metadata, one metric, semantic model or saved query. Each is held while it is read.
	MaxMemberBytes int
	// MaxNames is the most member names the objects open at once hold together: each is
	// remembered, to refuse a duplicate (the nodes object's names are its node ids).
	MaxNames int
}

// DefaultManifestLimits apply where ManifestLimits leaves a field zero.
var DefaultManifestLimits = ManifestLimits{MaxMemberBytes: 32 << 20, MaxNames: 1 << 19}

// WithDefaults is l with every limit not set at its DefaultManifestLimits value.
func (l ManifestLimits) WithDefaults() ManifestLimits {
	if l.MaxMemberBytes <= 0 {
		l.MaxMemberBytes = DefaultManifestLimits.MaxMemberBytes
	}
	if l.MaxNames <= 0 {
		l.MaxNames = DefaultManifestLimits.MaxNames
	}
	return l
}

// ErrMemberShape is a member the conversion reads (the metadata, a metric, a semantic
// model, a saved query) that is not of the shape dbt writes.
var ErrMemberShape = errors.New("a manifest member is not of the shape dbt writes")

// DecodeManifestWith is DecodeManifest within limits, calling onModel (when not nil) with
// each model as soon as it is decoded, in manifest order, so a caller can prepare for its
// file while the rest streams in.
//
// One goroutine reads the stream and cuts it into members (each node, metric, semantic
// model and saved query), validating what lies between them, and hands them on in
// batches; one worker per CPU parses and validates the members; the caller's goroutine
// takes their results in manifest order. The project, and the first error in manifest
// order, are what one pass would give.
func DecodeManifestWith(r io.Reader, limits ManifestLimits, onModel func(*Model)) (*Project, error) {
	limits = limits.WithDefaults()
	workers := runtime.GOMAXPROCS(0)
	inFlight := 16 + 2*workers
	d := &decoding{work: make(chan *batch, 2*workers), order: make(chan *batch, 16), stop: make(chan struct{}),
		free: make(chan *batch, inFlight+2)}
	var wg sync.WaitGroup
	wg.Add(1 + workers)
	go func() {
		defer wg.Done()
		s := newStreamScanner(r, scanWindow)
		s.maxHold, s.names.max = limits.MaxMemberBytes, limits.MaxNames
		d.maxNode = limits.MaxMemberBytes
		d.split(s)
	}()
	for range workers {
		go func() {
			defer wg.Done()
			np := &nodeParser{maxNames: limits.MaxNames}
			for b := range d.work {
				b.parse(np)
				b.done <- struct{}{}
			}
		}()
	}
	p, err := d.collect(onModel)
	close(d.stop)
	for range d.order { // let the splitter see the stop and end
	}
	wg.Wait()
	return p, err
}

// scanWindow is the size the scanner's window starts at (tests make it small, so that
// every value crosses a refill).
var scanWindow = 512 << 10

// errStopped ends the splitter once the collector has stopped (on an error).
var errStopped = errors.New("stopped")

// memberKind is what a member of the manifest is.
type memberKind int

const (
	memberNode memberKind = iota
	memberMetadata
	memberMetric
	memberSemanticModel
	memberSavedQuery
)

// batchBytes is about how many bytes of members a batch carries: a few nodes, so that
// handing them on costs little next to reading them.
const batchBytes = 64 << 10

// batch is members on their way from the splitter to a worker and on to the collector.
// Batches go round: the collector hands each back to the splitter (free), buffers and
// all. The last one carries the splitter's own outcome.
type batch struct {
	buf     []byte // the members' ids and values (copies: the splitter's window moves on)
	members []member
	done    chan struct{}

	last     bool
	err      error // what stopped the splitter
	sawNodes bool
}

// member is one member of a batch: where its id and value are in the batch's bytes,
// and what a worker made of it.
type member struct {
	kind             memberKind
	id0, id1, v0, v1 int
	at               int64 // the value's input offset (noOffset for a node: its members are not the input's bytes)

	err    error
	model  *Model
	test   Test
	isTest bool
	other  any // *rawMetric, *rawSemanticModel, *rawSavedQuery
}

// parse reads the batch's members (a worker's part).
func (b *batch) parse(np *nodeParser) {
	for i := range b.members {
		m := &b.members[i]
		raw := b.buf[m.v0:m.v1]
		s := np.reset(raw)
		s.base = m.at
		switch m.kind {
		case memberNode:
			m.model, m.test, m.isTest, m.err = np.parseNode()
			if m.model != nil {
				m.model.UniqueID = string(b.buf[m.id0:m.id1])
			}
			if np.other != nil {
				np.other.UniqueID = string(b.buf[m.id0:m.id1])
				m.other = np.other
			}
		case memberMetadata:
			m.err = s.skip() // validated by the splitter; read by the collector
		default:
			// The rest is small: validated here, then decoded by reflection.
			if m.err = s.skip(); m.err == nil {
				m.other, m.err = unmarshalMember(m.kind, raw)
			}
		}
		if m.err == nil && s.ws() {
			m.err = s.fail("after a value")
		}
		if m.err != nil && m.kind != memberMetadata {
			m.err = atPath(sections[m.kind], atMember(b.buf[m.id0:m.id1], m.err))
		}
	}
}

// sections names the manifest's member that holds each kind of member.
var sections = [...]string{memberNode: "nodes", memberMetadata: "metadata", memberMetric: "metrics",
	memberSemanticModel: "semantic_models", memberSavedQuery: "saved_queries"}

// unmarshalMember decodes a metric, semantic model or saved query.
func unmarshalMember(kind memberKind, raw []byte) (any, error) {
	var v any
	switch kind {
	case memberMetric:
		v = &rawMetric{}
	case memberSemanticModel:
		v = &rawSemanticModel{}
	case memberSavedQuery:
		v = &rawSavedQuery{}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMemberShape, err)
	}
	return v, nil
}

// decoding is the state shared by the splitter, the workers and the collector.
type decoding struct {
	work  chan *batch // to the workers
	order chan *batch // to the collector, in manifest order
	free  chan *batch // back to the splitter
	stop  chan struct{}
	cur   *batch // the splitter's batch being filled
	id    []byte // the splitter's copy of a node's id
	// maxNode is the most bytes of the members of one node the splitter hands on.
	maxNode int
}

// add puts a member into the current batch, handing the batch on once it is full; false
// when the collector has stopped.
func (d *decoding) add(kind memberKind, id, raw []byte, at int64) bool {
	b := d.batch()
	m := member{kind: kind, id0: len(b.buf), at: at}
	b.buf = append(b.buf, id...)
	m.id1, m.v0 = len(b.buf), len(b.buf)
	b.buf = append(b.buf, raw...)
	m.v1 = len(b.buf)
	return d.added(m)
}

// batch is the batch being filled.
func (d *decoding) batch() *batch {
	if d.cur == nil {
		select {
		case d.cur = <-d.free:
		default:
			d.cur = &batch{done: make(chan struct{}, 1)}
		}
	}
	return d.cur
}

// added puts m, whose bytes are in the current batch, into it, handing the batch on
// once it is full; false when the collector has stopped.
func (d *decoding) added(m member) bool {
	b := d.cur
	b.members = append(b.members, m)
	if len(b.buf) < batchBytes {
		return true
	}
	return d.flush()
}

// maxInline is the longest string a node's member the conversion reads is captured
// as without validating (the worker does); a longer one is validated as it is held.
const maxInline = 64 << 10

// appendMemberName appends `"name":` to the object begun at b[start], after a comma
// unless it is the first member.
func appendMemberName(b []byte, start int, name []byte) []byte {
	if len(b) > start+1 {
		b = append(b, ',')
	}
	for _, c := range name {
		if c < ' ' || c == '"' || c == '\\' {
			b, _ = jsontext.AppendQuote(b, name)
			return append(b, ':')
		}
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// splitNode hands on the node at the current position as an object of the members the
// conversion reads (nodeReads), validating and skipping the rest as they stream past: a
// node's SQL is most of a manifest, and is never held.
func (d *decoding) splitNode(s *scanner, id []byte) error {
	b := d.batch()
	m := member{kind: memberNode, id0: len(b.buf), at: noOffset}
	b.buf = append(b.buf, id...)
	m.id1, m.v0 = len(b.buf), len(b.buf)
	b.buf = append(b.buf, '{')
	err := s.object(func(name []byte) error {
		if !nodeReads(name) {
			return s.skip()
		}
		// The name's bytes are the window's: copied before the value's capture moves it.
		member := len(b.buf)
		b.buf = appendMemberName(b.buf, m.v0, name)
		// Captured, not validated: the worker validates what it reads.
		var raw []byte
		var err error
		switch c := s.peek(); {
		case c == '{' || c == '[':
			raw, err = s.capture()
		case c == '"':
			if end, ok := s.stringEndInWindow(maxInline); ok {
				raw, s.pos = s.buf[s.pos:end], end
				break
			}
			fallthrough
		default:
			raw, err = s.rawValue()
		}
		if err != nil {
			b.buf = b.buf[:member]
			return err
		}
		b.buf = append(b.buf, raw...)
		if len(b.buf)-m.v0 > d.maxNode {
			return &ManifestLimitError{Limit: "bytes of the members of one node the conversion reads", Value: int64(d.maxNode)}
		}
		return nil
	})
	if err != nil {
		// The members handed on so far come first: an error in them is the node's.
		part := append(b.buf[m.v0:], '}')
		b.buf = b.buf[:m.id0]
		ps := newBytesScanner(part)
		ps.base = noOffset
		if perr := ps.object(func([]byte) error { return ps.skip() }); perr != nil {
			return perr
		}
		return err
	}
	b.buf = append(b.buf, '}')
	m.v1 = len(b.buf)
	if !d.added(m) {
		return errStopped
	}
	return nil
}

// flush hands the current batch on (to the collector, and to a worker); false when the
// collector has stopped.
func (d *decoding) flush() bool {
	b := d.cur
	if b == nil {
		return true
	}
	d.cur = nil
	select {
	case d.order <- b:
	case <-d.stop:
		return false
	}
	select {
	case d.work <- b:
		return true
	case <-d.stop:
		b.done <- struct{}{}
		return false
	}
}

// collect takes the batches' members in manifest order into a project.
func (d *decoding) collect(onModel func(*Model)) (*Project, error) {
	p := &Project{FromManifest: true}
	for b := range d.order {
		<-b.done
		err := d.apply(p, b, onModel)
		last, sawNodes := b.last, b.sawNodes
		if err == nil && last {
			err = b.err
		}
		buf := b.buf[:0]
		if cap(buf) > 4*batchBytes {
			buf = nil // a rare huge member's buffer is not kept for the next
		}
		*b = batch{buf: buf, members: b.members[:0], done: b.done}
		select {
		case d.free <- b:
		default:
		}
		if err != nil {
			return nil, err
		}
		if last {
			if !sawNodes {
				return nil, ErrNoNodes
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: the manifest ended early", ErrNotJSON)
}

// apply adds a batch's members to the project, stopping at the first error.
func (d *decoding) apply(p *Project, b *batch, onModel func(*Model)) error {
	for i := range b.members {
		m := &b.members[i]
		if m.err != nil {
			return m.err
		}
		switch m.kind {
		case memberMetadata:
			if err := applyMetadata(p, b.buf[m.v0:m.v1]); err != nil {
				return err
			}
		case memberNode:
			if m.model != nil {
				p.Models = append(p.Models, m.model)
				if onModel != nil {
					onModel(m.model)
				}
			}
			if m.isTest {
				p.Tests = append(p.Tests, m.test)
			}
			if g, ok := m.other.(*GraphNode); ok {
				p.Others = append(p.Others, *g)
			}
		case memberMetric:
			switch v := m.other.(*rawMetric); {
			case v.Type != "":
				p.Metrics = append(p.Metrics, v.toMetric())
			case v.CalculationMethod != "": // dbt 1.3 to 1.5, before MetricFlow
				p.LegacyMetrics = append(p.LegacyMetrics, v.toLegacyMetric())
			}
		case memberSemanticModel:
			p.SemanticModels = append(p.SemanticModels, m.other.(*rawSemanticModel).toSemanticModel())
		case memberSavedQuery:
			p.SavedQueries = append(p.SavedQueries, m.other.(*rawSavedQuery).toSavedQuery())
		}
	}
	return nil
}

// applyMetadata reads the adapter and the schema version (an unsupported one fails the
// manifest).
func applyMetadata(p *Project, raw []byte) error {
	var md struct {
		Version string `json:"dbt_schema_version"`
		Adapter string `json:"adapter_type"`
		Project string `json:"project_name"`
	}
	if raw[0] != '{' {
		return nil // metadata that is no object says nothing
	}
	if err := json.Unmarshal(raw, &md); err != nil {
		return &FieldError{Path: "metadata", Err: fmt.Errorf("%w: %v", ErrMemberShape, err)}
	}
	p.Adapter, p.ProjectName = md.Adapter, md.Project
	if md.Version != "" {
		v, err := CheckSchemaVersion(md.Version)
		if err != nil {
			return err
		}
		p.SchemaVersion = v
	}
	return nil
}

// split reads the manifest object: each member the data model uses goes into a batch;
// the others are validated and skipped. The last batch carries the error that stopped
// it, if any.
func (d *decoding) split(s *scanner) {
	defer close(d.order)
	defer close(d.work)
	var sawNodes bool
	err := d.splitObject(s, &sawNodes)
	if err == nil && s.ws() {
		err = fmt.Errorf("%w: trailing data after the manifest object", ErrNotJSON)
	}
	if limit, ok := s.rerr.(*ManifestLimitError); ok && err == nil { // a refill it refused ends the read
		err = limit
	}
	if err == errStopped {
		return
	}
	if d.cur == nil {
		d.cur = &batch{done: make(chan struct{}, 1)}
	}
	d.cur.last, d.cur.err, d.cur.sawNodes = true, err, sawNodes
	d.flush()
}

func (d *decoding) splitObject(s *scanner, sawNodes *bool) error {
	switch c := s.peek(); {
	case c == '{':
	case c == '[':
		return ErrNotManifest
	case c == 0:
		return s.fail("at the start of the manifest")
	default:
		if err := s.scalar(); err != nil {
			return err
		}
		return ErrNotManifest
	}
	err := s.object(func(key []byte) error {
		section := string(key)
		switch section {
		case "metadata":
			s.ws()
			at := s.base + int64(s.pos)
			raw, err := s.rawValue()
			if err == nil && !d.add(memberMetadata, nil, raw, at) {
				return errStopped
			}
			return err
		case "nodes":
			*sawNodes = true
			if s.peek() != '{' {
				if err := s.skip(); err != nil {
					return err
				}
				return fmt.Errorf("%w: nodes is not an object", ErrNoNodes)
			}
			return d.splitMembers(s, memberNode, true)
		case "metrics":
			return d.splitMembersOrNull(s, memberMetric)
		case "semantic_models":
			return d.splitMembersOrNull(s, memberSemanticModel)
		case "saved_queries":
			return d.splitMembersOrNull(s, memberSavedQuery)
		}
		return s.skip()
	})
	return err
}

func (d *decoding) splitMembersOrNull(s *scanner, kind memberKind) error {
	if s.peek() != '{' {
		return s.skip()
	}
	return d.splitMembers(s, kind, false)
}

// splitMembers hands on each member of the object at the current position. A node that
// is not an object is skipped (it was never read); any other member is handed on.
func (d *decoding) splitMembers(s *scanner, kind memberKind, objectsOnly bool) error {
	return s.object(func(key []byte) error {
		// The name's bytes are the window's: copied before the value's capture moves it.
		d.id = append(d.id[:0], key...)
		id := d.id
		var raw []byte
		var err error
		c := s.peek()
		at := s.base + int64(s.pos)
		switch {
		case kind == memberNode && c == '{':
			return d.splitNode(s, id)
		case objectsOnly:
			return s.skip() // an array as a node: validated, not read
		case c == '{' || c == '[':
			raw, err = s.capture()
		default:
			raw, err = s.rawValue()
		}
		if err != nil {
			return err
		}
		if !d.add(kind, id, raw, at) {
			return errStopped
		}
		return nil
	})
}
