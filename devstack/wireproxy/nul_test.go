package wireproxy

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// opMsgOf builds an OP_MSG of a kind-1 section (identifier "documents", docs) followed by
// the body, the order a driver may use.
func opMsgOf(t *testing.T, body any, docs ...any) []byte {
	t.Helper()
	m := make([]byte, headerLen+4)
	binary.LittleEndian.PutUint32(m[12:], opMsg)
	if len(docs) > 0 {
		sec := []byte("documents\x00")
		for _, d := range docs {
			raw, err := bson.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			sec = append(sec, raw...)
		}
		m = append(m, 1)
		m = binary.LittleEndian.AppendUint32(m, uint32(len(sec)+4))
		m = append(m, sec...)
	}
	raw, err := bson.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	m = append(append(m, 0), raw...)
	binary.LittleEndian.PutUint32(m, uint32(len(m)))
	return m
}

func TestCommandNameReadsTheBodyWhereverItIs(t *testing.T) {
	m := opMsgOf(t, bson.D{{Key: "find", Value: "items"}, {Key: "$db", Value: "x"}}, bson.D{{Key: "_id", Value: 1}})
	if name, ok := commandName(m); !ok || name != "find" {
		t.Errorf("commandName = %q, %v; want find", name, ok)
	}
	isReadMsg := func(msg []byte) bool {
		pm, ok := parseOpMsg(msg)
		return isRead(msg, pm, ok)
	}
	if !isReadMsg(m) {
		t.Error("a find is not a read")
	}
	if isReadMsg(opMsgOf(t, bson.D{{Key: "insert", Value: "items"}}, bson.D{{Key: "_id", Value: 1}})) {
		t.Error("an insert is a read")
	}
	if isReadMsg(m[:len(m)-3]) {
		t.Error("a truncated message is a read")
	}
}

func TestEscapingNULRoundTrips(t *testing.T) {
	odd := []string{"a\x00b", "\x00", "a\uE000b", "a\uE000\uE001b", "\uE000\x00\uE000\uE000", "plain", ""}
	for _, s := range odd {
		body := bson.D{{Key: "insert", Value: s}, {Key: "nested", Value: bson.D{{Key: "list", Value: bson.A{s, int64(7), bson.Binary{Data: []byte{0, 1}}}}}},
			{Key: "re", Value: bson.Regex{Pattern: "^a", Options: "i"}}, {Key: "n", Value: 1.5}}
		doc := bson.D{{Key: "_id", Value: s}, {Key: "v", Value: s + s}}
		in := opMsgOf(t, body, doc, doc)
		esc := rewriteMsg(in, escapeString)
		if int(binary.LittleEndian.Uint32(esc)) != len(esc) {
			t.Fatalf("%q: escaped message length field %d, message %d bytes", s, binary.LittleEndian.Uint32(esc), len(esc))
		}
		// Every string value of the escaped message (rewriteMsg visits each) is free of NUL.
		var seen []string
		rewriteMsg(esc, func(v string) (string, bool) {
			seen = append(seen, v)
			return v, false
		})
		if len(seen) != 6 {
			t.Errorf("%q: %d string values seen in the escaped message, want 6", s, len(seen))
		}
		for _, v := range seen {
			if strings.ContainsRune(v, 0) {
				t.Errorf("%q: escaped string %q holds NUL", s, v)
			}
		}
		back := rewriteMsg(esc, unescapeString)
		if !bytes.Equal(back, in) {
			t.Errorf("%q: escaped and back differs from the original", s)
		}
	}
	if a, b := nulEscaper.Replace("a\x00b"), nulEscaper.Replace("a\uE000\uE001b"); a == b {
		t.Errorf("two strings escape alike: %q", a)
	}
}
