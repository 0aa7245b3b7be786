package wireproxy

import (
	"hash/fnv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Turns: which commands wait for which. FerretDB v1's read-then-write (update,
// findAndModify, an insert checking its unique indexes) reads and writes one collection,
// so two writes need to wait for each other only when they name the same collection
// (Collections mode); a read needs no turn at all, as PostgreSQL shows it every document
// either before or after a write's transaction. A collection's turn is one of
// turnStripes locks, chosen by a hash of the namespace: two collections may share one,
// which only makes them wait for each other (safe), and the locks do not grow with the
// collections. A write that names no collection, or more than one (dropDatabase,
// renameCollection, an aggregate with $out or $merge, anything unknown), takes every
// stripe in order, which is the whole database to itself.
//
// However many clients send, at most MaxInFlight commands are at FerretDB at once: a
// command of FerretDB holds up to two of its 50 PostgreSQL connections (the read of an
// update and its write transaction) and waits for the second while it holds the first,
// so more than 25 such commands at once could each wait for a connection that only
// another of them can free.

// turnStripes is how many locks the collections' turns are spread over.
const turnStripes = 64

// MaxInFlight is the most commands the proxy has at its upstream at once.
const MaxInFlight = 16

// collectionWrites are the write commands that touch only the collection they name
// first (their first value).
var collectionWrites = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true,
	"create": true, "drop": true, "createIndexes": true, "dropIndexes": true, "collMod": true,
}

// turns are the proxy's locks: a token in a channel means the lock is held. Channels
// rather than mutexes, so a waiter gives up when the proxy closes.
type turns struct {
	stripes  [turnStripes]chan struct{}
	inflight chan struct{}
	done     <-chan struct{}
}

func newTurns(done <-chan struct{}) *turns {
	t := &turns{inflight: make(chan struct{}, MaxInFlight), done: done}
	for i := range t.stripes {
		t.stripes[i] = make(chan struct{}, 1)
	}
	return t
}

// scope is what a command waits for: no stripe (a read), one (a write to one
// collection) or all of them.
type scope struct {
	all    bool
	stripe int // -1: none
}

// scopeOf is the scope of a request in mode.
func scopeOf(mode Mode, msg []byte, m opMessage, isMsg bool) scope {
	if mode == All {
		return scope{all: true}
	}
	if isRead(msg, m, isMsg) {
		return scope{stripe: -1}
	}
	if mode == Writes || !isMsg || !collectionWrites[m.name()] {
		return scope{all: true}
	}
	coll, ok := m.body.Index(0).Value().StringValueOK()
	db, _ := m.body.Lookup("$db").StringValueOK()
	if !ok {
		return scope{all: true}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(db + "." + coll))
	return scope{stripe: int(h.Sum32() % turnStripes)}
}

// acquire waits for s's locks and an in-flight slot and returns what releases them;
// false when the proxy closed meanwhile (nothing is held then). Stripes are taken in
// ascending order and the in-flight slot last, so no two commands wait for each other in
// a cycle.
func (t *turns) acquire(s scope) (release func(), ok bool) {
	var held []chan struct{}
	releaseAll := func() {
		for i := len(held) - 1; i >= 0; i-- {
			<-held[i]
		}
	}
	take := func(c chan struct{}) bool {
		select {
		case c <- struct{}{}:
			held = append(held, c)
			return true
		case <-t.done:
			releaseAll()
			return false
		}
	}
	switch {
	case s.all:
		for _, c := range t.stripes {
			if !take(c) {
				return nil, false
			}
		}
	case s.stripe >= 0:
		if !take(t.stripes[s.stripe]) {
			return nil, false
		}
	}
	if !take(t.inflight) {
		return nil, false
	}
	return releaseAll, true
}

// aggregateWrites reports whether an aggregate's pipeline has a stage that writes
// ($out, $merge).
func aggregateWrites(body bsoncore.Document) bool {
	arr, ok := body.Lookup("pipeline").ArrayOK()
	if !ok {
		return true // malformed: let it take every turn, FerretDB answers it
	}
	stages, err := arr.Values()
	if err != nil {
		return true
	}
	for _, st := range stages {
		doc, ok := st.DocumentOK()
		if !ok {
			return true
		}
		e, err := doc.IndexErr(0)
		if err != nil {
			continue
		}
		if k := e.Key(); k == "$out" || k == "$merge" {
			return true
		}
	}
	return false
}
