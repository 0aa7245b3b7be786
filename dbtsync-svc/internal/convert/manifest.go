package convert

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/go-json-experiment/json"
)

// DecodeManifest reads a manifest.json as a stream, keeping only what the data model
// needs: memory stays proportional to the models, not to the file (raw and compiled SQL,
// macros, docs and the rest are skipped without being held).
func DecodeManifest(r io.Reader) (*Project, error) { return DecodeManifestNotify(r, nil) }

// DecodeManifestNotify is DecodeManifest calling onModel (when not nil) with each model as
// soon as it is decoded, in manifest order, so a caller can prepare for its file while
// the rest streams in.
//
// One goroutine reads the stream and cuts it into members (each node, metric, semantic
// model and saved query), validating what lies between them, and hands them on in
// batches; one worker per CPU parses and validates the members; the caller's goroutine
// takes their results in manifest order. The project, and the first error in manifest
// order, are what one pass would give.
func DecodeManifestNotify(r io.Reader, onModel func(*Model)) (*Project, error) {
	workers := runtime.GOMAXPROCS(0)
	inFlight := 16 + 2*workers
	d := &decoding{work: make(chan *batch, 2*workers), order: make(chan *batch, 16), stop: make(chan struct{}),
		free: make(chan *batch, inFlight+2)}
	var wg sync.WaitGroup
	wg.Add(1 + workers)
	go func() {
		defer wg.Done()
		d.split(newStreamScanner(r, scanWindow))
	}()
	for range workers {
		go func() {
			defer wg.Done()
			np := &nodeParser{}
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
		switch m.kind {
		case memberNode:
			m.model, m.test, m.isTest, m.err = np.parseNode()
			if m.model != nil {
				m.model.UniqueID = string(b.buf[m.id0:m.id1])
			}
		case memberMetadata:
			m.err = s.skip() // validated by the splitter; read by the collector
		default:
			// The rest is small: validated here, then decoded by reflection, a member of
			// an unexpected shape reading as a zero one (as it always has).
			m.err = s.skip()
			switch m.kind {
			case memberMetric:
				v := &rawMetric{}
				_ = json.Unmarshal(raw, v)
				m.other = v
			case memberSemanticModel:
				v := &rawSemanticModel{}
				_ = json.Unmarshal(raw, v)
				m.other = v
			case memberSavedQuery:
				v := &rawSavedQuery{}
				_ = json.Unmarshal(raw, v)
				m.other = v
			}
		}
		if m.err == nil && s.ws() {
			m.err = s.fail("after a value")
		}
	}
}

// decoding is the state shared by the splitter, the workers and the collector.
type decoding struct {
	work  chan *batch // to the workers
	order chan *batch // to the collector, in manifest order
	free  chan *batch // back to the splitter
	stop  chan struct{}
	cur   *batch // the splitter's batch being filled
	id    []byte // the splitter's copy of a node's id
}

// add puts a member into the current batch, handing the batch on once it is full; false
// when the collector has stopped.
func (d *decoding) add(kind memberKind, id, raw []byte) bool {
	if d.cur == nil {
		select {
		case d.cur = <-d.free:
		default:
			d.cur = &batch{done: make(chan struct{}, 1)}
		}
	}
	b := d.cur
	m := member{kind: kind, id0: len(b.buf)}
	b.buf = append(b.buf, id...)
	m.id1, m.v0 = len(b.buf), len(b.buf)
	b.buf = append(b.buf, raw...)
	m.v1 = len(b.buf)
	b.members = append(b.members, m)
	if len(b.buf) < batchBytes {
		return true
	}
	return d.flush()
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
	p := &Project{}
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
	}
	_ = json.Unmarshal(raw, &md) // a member of an unexpected shape is not a broken manifest
	p.Adapter = md.Adapter
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
			raw, err := s.rawValue()
			if err == nil && !d.add(memberMetadata, nil, raw) {
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
		var id []byte
		if kind == memberNode {
			// The name's bytes are the window's: copied before the value's capture moves it.
			d.id = append(d.id[:0], key...)
			id = d.id
		}
		var raw []byte
		var err error
		switch c := s.peek(); {
		case c == '{' || c == '[':
			raw, err = s.capture()
		case objectsOnly:
			return s.skip()
		default:
			raw, err = s.rawValue()
		}
		if err != nil {
			return err
		}
		if kind == memberNode && raw[0] != '{' {
			return newBytesScanner(raw).skip() // an array as a node: validated, not read
		}
		if !d.add(kind, id, raw) {
			return errStopped
		}
		return nil
	})
}
