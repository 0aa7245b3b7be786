// Package wiretest is a MongoDB server as far as the driver can tell, for tests of how
// code meets MongoDB's replies that the test databases never send: the error documents
// of a replica set in an election, of write concern failures, of a TTL index whose
// expiry changed, of a missing privilege. Tests only.
package wiretest

//lint:file-ignore SA1019 the driver's first handshake is a legacy OP_QUERY, which a server must read and answer

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// Server is a MongoDB server as far as the driver can tell: it speaks the wire
// protocol (the legacy OP_QUERY handshake and OP_MSG), answers the handshake as a
// standalone or as a replica set member, and answers every other command with what
// answer returns: the reply documents MongoDB sends, errors included, so the errors the
// tests classify are the driver's own, built from a server's reply.
type Server struct {
	// Addr is the server's host:port.
	Addr   string
	ln     net.Listener
	hello  bson.D
	answer Answer

	mu       sync.Mutex
	commands []bson.Raw // every command but the handshakes, in arrival order
	conns    []net.Conn
}

// OK is a plain success reply.
var OK = bson.D{{Key: "ok", Value: 1}}

// Answer is the reply to a command named cmd (its first key) with the command document
// body: the reply document, or drop to close the connection without one.
type Answer func(cmd string, body bson.Raw) (reply bson.D, drop bool)

// New starts a server that answers commands with answer; secondary makes it a secondary
// of replica set rs0 with no primary (an election under way), else it is a standalone.
// The test's cleanup stops it.
func New(t testing.TB, secondary bool, answer Answer) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), ln: ln, answer: answer}
	s.hello = bson.D{{Key: "helloOk", Value: true}, {Key: "ismaster", Value: !secondary}, {Key: "isWritablePrimary", Value: !secondary},
		{Key: "maxBsonObjectSize", Value: int32(16 << 20)}, {Key: "maxMessageSizeBytes", Value: int32(48000000)},
		{Key: "maxWriteBatchSize", Value: int32(100000)}, {Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		{Key: "minWireVersion", Value: int32(0)}, {Key: "maxWireVersion", Value: int32(21)}}
	if secondary {
		s.hello = append(s.hello, bson.E{Key: "secondary", Value: true}, bson.E{Key: "setName", Value: "rs0"},
			bson.E{Key: "hosts", Value: bson.A{s.Addr}}, bson.E{Key: "me", Value: s.Addr})
	}
	s.hello = append(s.hello, bson.E{Key: "ok", Value: 1})
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *Server) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}

func (s *Server) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		go s.conn(c)
	}
}

// Seen returns the commands received so far (handshakes and monitoring left out).
func (s *Server) Seen() []bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bson.Raw(nil), s.commands...)
}

func (s *Server) conn(c net.Conn) {
	defer func() { _ = c.Close() }()
	for {
		header := make([]byte, 16)
		if _, err := io.ReadFull(c, header); err != nil {
			return
		}
		length, reqID, _, op, _, _ := wiremessage.ReadHeader(header)
		rest := make([]byte, int(length)-16)
		if _, err := io.ReadFull(c, rest); err != nil {
			return
		}
		body, err := commandBody(op, rest)
		if err != nil {
			return
		}
		name := body.Index(0).Key()
		var reply bson.D
		switch name {
		case "hello", "isMaster", "ismaster":
			reply = s.hello
		case "endSessions", "ping", "buildInfo":
			reply = OK
		default:
			s.mu.Lock()
			s.commands = append(s.commands, body)
			s.mu.Unlock()
			var drop bool
			if reply, drop = s.answer(name, body); drop {
				return
			}
		}
		doc, err := bson.Marshal(reply)
		if err != nil {
			return
		}
		var out []byte
		if op == wiremessage.OpQuery {
			i, b := wiremessage.AppendHeaderStart(nil, wiremessage.NextRequestID(), reqID, wiremessage.OpReply)
			b = wiremessage.AppendReplyFlags(b, 0)
			b = wiremessage.AppendReplyCursorID(b, 0)
			b = wiremessage.AppendReplyStartingFrom(b, 0)
			b = wiremessage.AppendReplyNumberReturned(b, 1)
			out = finish(i, append(b, doc...))
		} else {
			i, b := wiremessage.AppendHeaderStart(nil, wiremessage.NextRequestID(), reqID, wiremessage.OpMsg)
			b = wiremessage.AppendMsgFlags(b, 0)
			b = wiremessage.AppendMsgSectionType(b, wiremessage.SingleDocument)
			out = finish(i, append(b, doc...))
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// finish writes the message's length at i.
func finish(i int32, b []byte) []byte {
	binary.LittleEndian.PutUint32(b[i:], uint32(len(b)))
	return b
}

// commandBody is the command document of an OP_QUERY or OP_MSG message (its document
// sequences, such as an insert's documents, left out).
func commandBody(op wiremessage.OpCode, rest []byte) (bson.Raw, error) {
	switch op {
	case wiremessage.OpQuery:
		_, rem, ok1 := wiremessage.ReadQueryFlags(rest)
		_, rem, ok2 := wiremessage.ReadQueryFullCollectionName(rem)
		_, rem, ok3 := wiremessage.ReadQueryNumberToSkip(rem)
		_, rem, ok4 := wiremessage.ReadQueryNumberToReturn(rem)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, errors.New("short OP_QUERY")
		}
		doc := bson.Raw(rem)
		return doc, doc.Validate()
	case wiremessage.OpMsg:
		_, rem, ok1 := wiremessage.ReadMsgFlags(rest)
		for ok1 && len(rem) > 0 {
			var st wiremessage.SectionType
			st, rem, ok1 = wiremessage.ReadMsgSectionType(rem)
			if !ok1 {
				break
			}
			if st == wiremessage.SingleDocument {
				doc, _, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
				if !ok {
					break
				}
				return bson.Raw(doc), nil
			}
			_, _, rem, ok1 = wiremessage.ReadMsgSectionDocumentSequence(rem)
		}
		return nil, errors.New("OP_MSG without a body")
	}
	return nil, errors.New("unexpected op code " + op.String())
}
