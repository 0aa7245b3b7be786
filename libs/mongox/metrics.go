package mongox

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

// Metrics are a process's MongoDB client counters, fed by the command monitor: the
// commands it sends and the documents and bytes the server returns, by command and
// collection.
// They are what a request costs the database on MongoDB too (FerretDB's timings are not).
type Metrics struct {
	commands   *prometheus.CounterVec
	documents  *prometheus.CounterVec
	replyBytes *prometheus.CounterVec
	failures   *prometheus.CounterVec
	heartbeats prometheus.Counter
}

// NewMetrics registers mongodb_client_commands_total,
// mongodb_client_documents_returned_total, mongodb_client_reply_bytes_total (what a
// request read, the measure of a query that reads more than it needs),
// mongodb_client_command_failures_total and
// mongodb_client_heartbeat_failures_total on reg. The last two are what the MongoDB
// error alerts read: a failed command (the server answered with an error or the
// connection broke mid-command), and a failed heartbeat (the server could not be
// reached at all, when no command even starts).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mongodb_client_commands_total",
			Help: "MongoDB commands sent by this process, by command and collection."}, []string{"command", "collection"}),
		documents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mongodb_client_documents_returned_total",
			Help: "Documents MongoDB returned to this process (cursor batches, findAndModify values), by command and collection."}, []string{"command", "collection"}),
		replyBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mongodb_client_reply_bytes_total",
			Help: "Bytes of the replies MongoDB sent this process for its successful commands, by command and collection."}, []string{"command", "collection"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mongodb_client_command_failures_total",
			Help: "MongoDB commands of this process that failed (an error reply or a broken connection), by command and collection."}, []string{"command", "collection"}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{Name: "mongodb_client_heartbeat_failures_total",
			Help: "Failed heartbeats of the driver's server monitor: the server could not be reached."}),
	}
	reg.MustRegister(m.commands, m.documents, m.replyBytes, m.failures, m.heartbeats)
	// A series that exists at zero makes rate() and the alerts meaningful before the
	// first failure.
	m.failures.WithLabelValues("other", "other")
	return m
}

// knownCommands bound the command label; anything else is "other".
var knownCommands = map[string]bool{"find": true, "getMore": true, "aggregate": true, "count": true, "distinct": true,
	"insert": true, "update": true, "delete": true, "findAndModify": true, "createIndexes": true, "listIndexes": true,
	"listCollections": true, "killCursors": true, "serverStatus": true, "drop": true, "dropIndexes": true}

// collectionName bounds the collection label: collections are named in code, but a name
// that does not look like one of ours is "other".
var collectionName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

func labels(command string, cmd bson.Raw) (string, string) {
	if !knownCommands[command] {
		return "other", "other"
	}
	coll := "other"
	field := command
	if command == "getMore" {
		field = "collection"
	}
	if v, err := cmd.LookupErr(field); err == nil {
		if s, ok := v.StringValueOK(); ok && collectionName.MatchString(s) {
			coll = s
		}
	}
	return command, coll
}

// returned counts the documents in a reply: a cursor's batch, or findAndModify's value.
func returned(command string, reply bson.Raw) int {
	switch command {
	case "find", "aggregate", "getMore", "listIndexes", "listCollections":
		cur, err := reply.LookupErr("cursor")
		if err != nil {
			return 0
		}
		doc, ok := cur.DocumentOK()
		if !ok {
			return 0
		}
		for _, key := range []string{"firstBatch", "nextBatch"} {
			if b, err := doc.LookupErr(key); err == nil {
				if arr, ok := b.ArrayOK(); ok {
					vals, _ := arr.Values()
					return len(vals)
				}
			}
		}
	case "findAndModify":
		if v, err := reply.LookupErr("value"); err == nil {
			if _, ok := v.DocumentOK(); ok {
				return 1
			}
		}
	}
	return 0
}

// started counts a command. Its first command makes every series of its (command,
// collection) at once, at zero where nothing happened yet: the set of series follows
// the commands the code sends, never what a reply held (an upsert that returned no
// document) or whether one failed.
func (m *Metrics) started(e *event.CommandStartedEvent) (string, string) {
	cmd, coll := labels(e.CommandName, e.Command)
	m.commands.WithLabelValues(cmd, coll).Inc()
	m.documents.WithLabelValues(cmd, coll)
	m.replyBytes.WithLabelValues(cmd, coll)
	m.failures.WithLabelValues(cmd, coll)
	return cmd, coll
}

func (m *Metrics) failed(cmd, coll string) { m.failures.WithLabelValues(cmd, coll).Inc() }

func (m *Metrics) succeeded(cmd, coll string, e *event.CommandSucceededEvent) {
	m.documents.WithLabelValues(cmd, coll).Add(float64(returned(e.CommandName, e.Reply)))
	m.replyBytes.WithLabelValues(cmd, coll).Add(float64(len(e.Reply)))
}
