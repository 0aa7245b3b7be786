package mongox

import (
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// The timeouts of every client of a replica set are chosen to outlast its election: a
// primary is declared lost after electionTimeoutMillis (10 s by default) and a new one
// is voted in a moment later, so a server selection that gives up sooner fails writes
// that would have gone through the new primary. A single server named alone (no
// replicaSet, one host, not mongodb+srv: the dev and test databases) has no election to
// wait for, and keeps a short selection, so an outage answers 503 quickly.
const (
	// ServerSelectionTimeout is how long an operation on a replica set waits for a
	// suitable server (for a write, a primary) when the URI does not say
	// (serverSelectionTimeoutMS).
	ServerSelectionTimeout = 15 * time.Second
	// MinServerSelectionTimeout is the shortest serverSelectionTimeoutMS a replica set's
	// URI may set: the default election timeout. A shorter one turns every election
	// into failed writes.
	MinServerSelectionTimeout = 10 * time.Second
	// SingleServerSelectionTimeout is the server selection of a single server named
	// alone, when the URI does not say.
	SingleServerSelectionTimeout = 5 * time.Second
	// ConnectTimeout is how long opening one connection (TCP, TLS and the handshake) may
	// take when the URI does not say (connectTimeoutMS).
	ConnectTimeout = 10 * time.Second
)

// clientOptions are the options of a client of uri: the URI's own, with the durability
// every service relies on pinned and its timeouts checked.
//
// Write concern is majority, journaled: an acknowledged write survives the loss of the
// primary. The code depends on that: an id block (IDAllocator) rolled back by a
// failover would hand the same ids out twice, and a create answered from memory would
// name a document that is gone. A URI may only raise it: w=majority or a named mode
// (the replica set's own getLastErrorModes, such as one spanning data centres) is kept,
// and journal=true is the default; w=0, w=<number> and journal=false are refused.
// Reads go to the primary (the compare-and-set protocols read their own writes), so a
// URI's other readPreference is refused too.
//
// Server selection outlasts an election (ServerSelectionTimeout; a replica set's URI
// may set serverSelectionTimeoutMS, not below MinServerSelectionTimeout). The request's
// context deadline bounds every operation beside these timeouts: the driver stops at
// whichever comes first.
func clientOptions(uri string) (*options.ClientOptions, error) {
	opts := options.Client().ApplyURI(uri)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("mongo connect: %w", err)
	}
	wc, err := writeConcern(opts.WriteConcern)
	if err != nil {
		return nil, fmt.Errorf("mongo connect: %w", err)
	}
	opts.SetWriteConcern(wc)
	if rp := opts.ReadPreference; rp != nil && rp.Mode() != readpref.PrimaryMode {
		return nil, fmt.Errorf("mongo connect: readPreference=%s in the URI: reads must go to the primary, which has every acknowledged write (the compare-and-set updates read their own writes)", rp.Mode())
	}
	opts.SetReadPreference(readpref.Primary())
	replicaSet := opts.ReplicaSet != nil || len(opts.Hosts) > 1 || strings.HasPrefix(uri, "mongodb+srv://")
	switch t := opts.ServerSelectionTimeout; {
	case t == nil && replicaSet:
		opts.SetServerSelectionTimeout(ServerSelectionTimeout)
	case t == nil:
		opts.SetServerSelectionTimeout(SingleServerSelectionTimeout)
	case replicaSet && *t < MinServerSelectionTimeout:
		return nil, fmt.Errorf("mongo connect: serverSelectionTimeoutMS=%d in the URI is shorter than an election (%v): writes would fail while a new primary is elected; set at least %d or leave it out (default %v)",
			t.Milliseconds(), MinServerSelectionTimeout, MinServerSelectionTimeout.Milliseconds(), ServerSelectionTimeout)
	}
	if opts.ConnectTimeout == nil {
		opts.SetConnectTimeout(ConnectTimeout)
	}
	return opts, nil
}

// writeConcern is the write concern a client uses given the URI's (nil: none): majority
// and journaled unless the URI names a stronger mode, or an error naming the setting
// that would let an acknowledged write be rolled back.
func writeConcern(uri *writeconcern.WriteConcern) (*writeconcern.WriteConcern, error) {
	journal := true
	wc := &writeconcern.WriteConcern{W: writeconcern.WCMajority, Journal: &journal}
	if uri == nil {
		return wc, nil
	}
	if uri.Journal != nil && !*uri.Journal {
		return nil, fmt.Errorf("journal=false in the URI: acknowledged writes must be on disk to survive a crash of the primary; remove it")
	}
	switch w := uri.W.(type) {
	case nil:
	case string:
		// "majority", or a mode the replica set defines (getLastErrorModes), which the
		// operator chose to be at least as strong.
		if w != "" {
			wc.W = w
		}
	case int:
		return nil, fmt.Errorf("w=%d in the URI: acknowledged writes must survive a failover, which only w=majority (or a named mode stronger than it) guarantees; a rolled-back id block would hand out ids twice; remove it or set w=majority", w)
	default:
		return nil, fmt.Errorf("w=%v in the URI: not a write concern this client accepts; set w=majority", w)
	}
	return wc, nil
}
