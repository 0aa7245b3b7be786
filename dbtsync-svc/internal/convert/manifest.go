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
// model and saved query), validating what lies between them; one worker per CPU parses
// and validates the members; the caller's goroutine takes their results in manifest
// order. The project, and the first error in manifest order, are what one pass would
// give.
func DecodeManifestNotify(r io.Reader, onModel func(*Model)) (*Project, error) {
	workers := runtime.GOMAXPROCS(0)
	d := &decoding{work: make(chan *item, 4*workers), order: make(chan *item, 64), stop: make(chan struct{}),
		free: make(chan *item, 64+4*workers+workers+2)}
	var wg sync.WaitGroup
	wg.Add(1 + workers)
	go func() {
		defer wg.Done()
		d.split(newStreamScanner(r, 512<<10))
	}()
	for range workers {
		go func() {
			defer wg.Done()
			np := &nodeParser{}
			for it := range d.work {
				it.parse(np)
				it.done <- struct{}{}
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

// errStopped ends the splitter once the collector has stopped (on an error).
var errStopped = errors.New("stopped")

// itemKind is what a member of the manifest is.
type itemKind int

const (
	itemNode itemKind = iota
	itemMetadata
	itemMetric
	itemSemanticModel
	itemSavedQuery
	itemEnd // the end of the stream: its error, whether it had nodes
)

// item is one member on its way from the splitter to a worker and on to the collector.
// Items go round: the collector hands each back to the splitter (free), buffers and all.
type item struct {
	kind itemKind
	id   []byte // a node's id
	raw  []byte // the member's value (a copy: the splitter's window moves on)
	done chan struct{}

	err      error
	model    *Model
	test     Test
	isTest   bool
	metric   rawMetric
	semantic rawSemanticModel
	saved    rawSavedQuery
	sawNodes bool
}

// parse reads the item's value (a worker's part).
func (it *item) parse(np *nodeParser) {
	s := np.reset(it.raw)
	switch it.kind {
	case itemNode:
		it.model, it.test, it.isTest, it.err = np.parseNode()
		if it.model != nil {
			it.model.UniqueID = string(it.id)
		}
	default:
		// The rest is small: validated here, then decoded by reflection, a member of an
		// unexpected shape reading as a zero one (as it always has).
		it.err = s.skip()
		switch it.kind {
		case itemMetric:
			_ = json.Unmarshal(it.raw, &it.metric)
		case itemSemanticModel:
			_ = json.Unmarshal(it.raw, &it.semantic)
		case itemSavedQuery:
			_ = json.Unmarshal(it.raw, &it.saved)
		}
	}
	if it.err == nil && s.ws() {
		it.err = s.fail("after a value")
	}
}

// decoding is the state shared by the splitter, the workers and the collector.
type decoding struct {
	work  chan *item // to the workers
	order chan *item // to the collector, in manifest order
	free  chan *item // back to the splitter
	stop  chan struct{}
}

// send hands an item on (to a worker too when it has to be parsed); false when the
// collector has stopped.
func (d *decoding) send(it *item, parse bool) bool {
	select {
	case d.order <- it:
	case <-d.stop:
		return false
	}
	if !parse {
		it.done <- struct{}{}
		return true
	}
	select {
	case d.work <- it:
		return true
	case <-d.stop:
		it.done <- struct{}{}
		return false
	}
}

func (d *decoding) newItem(kind itemKind, id, raw []byte) *item {
	var it *item
	select {
	case it = <-d.free:
	default:
		it = &item{done: make(chan struct{}, 1)}
	}
	it.kind, it.id, it.raw = kind, append(it.id[:0], id...), append(it.raw[:0], raw...)
	return it
}

// collect takes the items in manifest order into a project.
func (d *decoding) collect(onModel func(*Model)) (*Project, error) {
	p := &Project{}
	for it := range d.order {
		<-it.done
		err, end, sawNodes := it.err, it.kind == itemEnd, it.sawNodes
		if err == nil {
			err = d.apply(p, it, onModel)
		}
		raw := it.raw[:0]
		if cap(raw) > 1<<20 {
			raw = nil // a rare huge member's buffer is not kept for the next
		}
		*it = item{id: it.id[:0], raw: raw, done: it.done}
		select {
		case d.free <- it:
		default:
		}
		if err != nil {
			return nil, err
		}
		if end {
			if !sawNodes {
				return nil, ErrNoNodes
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: the manifest ended early", ErrNotJSON)
}

func (d *decoding) apply(p *Project, it *item, onModel func(*Model)) error {
	switch it.kind {
	case itemMetadata:
		return applyMetadata(p, it.raw)
	case itemNode:
		if it.model != nil {
			p.Models = append(p.Models, it.model)
			if onModel != nil {
				onModel(it.model)
			}
		}
		if it.isTest {
			p.Tests = append(p.Tests, it.test)
		}
	case itemMetric:
		switch m := it.metric; {
		case m.Type != "":
			p.Metrics = append(p.Metrics, m.toMetric())
		case m.CalculationMethod != "": // dbt 1.3 to 1.5, before MetricFlow
			p.LegacyMetrics = append(p.LegacyMetrics, m.toLegacyMetric())
		}
	case itemSemanticModel:
		p.SemanticModels = append(p.SemanticModels, it.semantic.toSemanticModel())
	case itemSavedQuery:
		p.SavedQueries = append(p.SavedQueries, it.saved.toSavedQuery())
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

// split reads the manifest object: each member the data model uses becomes an item;
// the others are validated and skipped. It ends with an itemEnd carrying the error
// that stopped it, if any.
func (d *decoding) split(s *scanner) {
	defer close(d.order)
	defer close(d.work)
	end := d.newItem(itemEnd, nil, nil)
	end.err = d.splitObject(s, &end.sawNodes)
	if end.err == nil && s.ws() {
		end.err = fmt.Errorf("%w: trailing data after the manifest object", ErrNotJSON)
	}
	d.send(end, false)
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
			if err == nil && !d.send(d.newItem(itemMetadata, nil, raw), false) {
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
			return d.splitMembers(s, itemNode, true)
		case "metrics":
			return d.splitMembersOrNull(s, itemMetric)
		case "semantic_models":
			return d.splitMembersOrNull(s, itemSemanticModel)
		case "saved_queries":
			return d.splitMembersOrNull(s, itemSavedQuery)
		}
		return s.skip()
	})
	if err == errStopped {
		return nil
	}
	return err
}

func (d *decoding) splitMembersOrNull(s *scanner, kind itemKind) error {
	if s.peek() != '{' {
		return s.skip()
	}
	return d.splitMembers(s, kind, false)
}

// splitMembers hands on each member of the object at the current position. A node that
// is not an object is skipped (it was never read); any other member is handed on.
func (d *decoding) splitMembers(s *scanner, kind itemKind, objectsOnly bool) error {
	return s.object(func(key []byte) error {
		var id []byte
		if kind == itemNode {
			id = key
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
		if kind == itemNode && raw[0] != '{' {
			return newBytesScanner(raw).skip() // an array as a node: validated, not read
		}
		if !d.send(d.newItem(kind, id, raw), true) {
			return errStopped
		}
		return nil
	})
}
