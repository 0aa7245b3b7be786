package mongox

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Every client writes with w: majority, j: true. A URI may name majority or a mode of
// its own (a tag set the replica set defines) and keep it; a URI that would let an
// acknowledged write roll back (w=0, w=<n>, journal=false) is refused at connect, with
// an error naming the setting. Reads stay on the primary.
func TestWriteConcernOverridableOnlyUpward(t *testing.T) {
	const host = "mongodb://db.example.net:27017/"
	for _, c := range []struct {
		query string
		w     any    // the write concern's w when accepted
		err   string // else a part of the refusal
	}{
		{"", "majority", ""},
		{"?replicaSet=rs0", "majority", ""},
		{"?w=majority", "majority", ""},
		{"?w=majority&journal=true", "majority", ""},
		{"?journal=true", "majority", ""},
		{"?w=multiDC", "multiDC", ""},
		{"?w=0", nil, "w=0 in the URI"},
		{"?w=1", nil, "w=1 in the URI"},
		{"?w=2", nil, "w=2 in the URI"},
		{"?w=3&journal=true", nil, "w=3 in the URI"},
		{"?journal=false", nil, "journal=false in the URI"},
		{"?w=majority&journal=false", nil, "journal=false in the URI"},
		{"?readPreference=secondaryPreferred", nil, "readPreference=secondaryPreferred"},
		{"?readPreference=nearest", nil, "readPreference=nearest"},
	} {
		opts, err := clientOptions(host + c.query)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want one naming %q", c.query, err, c.err)
			}
			if _, cerr := ConnectWith(context.Background(), host+c.query, ConnectOptions{}); cerr == nil {
				t.Errorf("%q: ConnectWith accepted it", c.query)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		wc := opts.WriteConcern
		if wc == nil || wc.W != c.w || wc.Journal == nil || !*wc.Journal {
			t.Errorf("%q: write concern %+v, want w %v with j true", c.query, wc, c.w)
		}
		if opts.ReadPreference == nil || opts.ReadPreference.Mode() != readpref.PrimaryMode {
			t.Errorf("%q: read preference %v, want primary", c.query, opts.ReadPreference)
		}
	}
	// The refusals say why.
	_, err := clientOptions(host + "?w=1")
	if err == nil || !strings.Contains(err.Error(), "survive a failover") || !strings.Contains(err.Error(), "ids twice") {
		t.Errorf("w=1 refused with %v, want the reason", err)
	}
}

// Server selection outlasts an election on a replica set: 15 s by default, the URI's
// value when it is at least 10 s, refused below. A single server named alone has no
// election: 5 s by default, or the URI's. The connect timeout is 10 s unless the URI says.
func TestTimeoutsFitAnElection(t *testing.T) {
	const host = "mongodb://db.example.net:27017"
	for _, c := range []struct {
		query           string
		selection, dial time.Duration
		refused         bool
	}{
		{"/?replicaSet=rs0", 15 * time.Second, 10 * time.Second, false},
		{"/?replicaSet=rs0&serverSelectionTimeoutMS=30000", 30 * time.Second, 10 * time.Second, false},
		{"/?replicaSet=rs0&serverSelectionTimeoutMS=10000", 10 * time.Second, 10 * time.Second, false},
		{"/?replicaSet=rs0&connectTimeoutMS=3000", 15 * time.Second, 3 * time.Second, false},
		{"/?replicaSet=rs0&serverSelectionTimeoutMS=9999", 0, 0, true},
		{"/?replicaSet=rs0&serverSelectionTimeoutMS=500", 0, 0, true},
		{",db2.example.net:27017/?serverSelectionTimeoutMS=500", 0, 0, true},
		{"/", 5 * time.Second, 10 * time.Second, false},
		{"/?serverSelectionTimeoutMS=500", 500 * time.Millisecond, 10 * time.Second, false},
	} {
		opts, err := clientOptions(host + c.query)
		if c.refused {
			if err == nil || !strings.Contains(err.Error(), "serverSelectionTimeoutMS") || !strings.Contains(err.Error(), "election") {
				t.Errorf("%q: err %v, want a refusal naming serverSelectionTimeoutMS and the election", c.query, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		if *opts.ServerSelectionTimeout != c.selection || *opts.ConnectTimeout != c.dial {
			t.Errorf("%q: server selection %v, connect %v; want %v, %v", c.query, *opts.ServerSelectionTimeout, *opts.ConnectTimeout, c.selection, c.dial)
		}
	}
	if _, err := clientOptions("mongodb://a:1/?w=majority&wrongOption=%zz"); err == nil {
		t.Error("a malformed URI was accepted")
	}
}
