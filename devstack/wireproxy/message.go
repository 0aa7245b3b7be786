package wireproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// prepareRequest reports whether the server will answer msg, and clears
// exhaustAllowed so the server never starts an open-ended reply stream that
// would hold the global lock (the driver then simply polls).
func prepareRequest(msg []byte) (expectReply bool) {
	switch opCode(msg) {
	case opMsg:
		flags := msgFlags(msg)
		if flags&flagExhaustAllowed != 0 && flags&flagChecksumPresent == 0 {
			// With a checksum the flag is covered by CRC-32C; leave it and
			// rely on roundTrip reading the whole stream.
			binary.LittleEndian.PutUint32(msg[headerLen:], flags&^flagExhaustAllowed)
		}
		return flags&flagMoreToCome == 0
	case opUpdate, opInsert, opDelete, opKillCursors:
		// Legacy fire-and-forget opcodes never get a reply.
		return false
	default:
		// OP_QUERY (handshake), OP_GET_MORE, OP_COMPRESSED and anything else:
		// one reply. FerretDB advertises no compressors, so OP_COMPRESSED does
		// not occur in practice.
		return true
	}
}

// readCommands are the commands that never write. Anything else, including a command
// this list does not know, is serialised. aggregate is not here: it is a read unless its
// pipeline has $out or $merge (isRead).
var readCommands = map[string]bool{
	"find": true, "getMore": true, "count": true, "distinct": true,
	"listCollections": true, "listIndexes": true, "listDatabases": true,
	"hello": true, "isMaster": true, "ismaster": true, "ping": true,
	"buildInfo": true, "buildinfo": true, "getParameter": true, "serverStatus": true,
	"dbStats": true, "collStats": true, "connectionStatus": true, "hostInfo": true,
	"whatsmyuri": true, "getCmdLineOpts": true, "getLog": true, "explain": true,
	"killCursors": true, "endSessions": true,
}

// isRead reports whether msg (m, when isMsg) is a command that never writes: an OP_MSG
// whose body names a command of readCommands first, or a legacy OP_QUERY (drivers send
// only the handshake that way).
func isRead(msg []byte, m opMessage, isMsg bool) bool {
	switch opCode(msg) {
	case opQuery:
		return true
	case opMsg:
		if isMsg && m.name() == "aggregate" {
			return !aggregateWrites(m.body)
		}
		return isMsg && readCommands[m.name()]
	}
	return false
}

// commandName is the name of the command of an OP_MSG, the first key of its body.
func commandName(msg []byte) (string, bool) {
	m, ok := parseOpMsg(msg)
	if !ok || m.name() == "" {
		return "", false
	}
	return m.name(), true
}

func opCode(msg []byte) int32 { return int32(binary.LittleEndian.Uint32(msg[12:16])) }

func msgFlags(msg []byte) uint32 {
	if len(msg) < headerLen+4 {
		return 0
	}
	return binary.LittleEndian.Uint32(msg[headerLen : headerLen+4])
}

// ReadMessage reads one whole wire-protocol message (header included) framed
// by its 4-byte little-endian messageLength.
func ReadMessage(r io.Reader) ([]byte, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.LittleEndian.Uint32(hdr[:4])))
	switch {
	case n < headerLen:
		return nil, fmt.Errorf("%w: %d", ErrBadHeader, n)
	case n > MaxMessageSize:
		return nil, fmt.Errorf("%w: %d bytes", ErrMessageTooLarge, n)
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[headerLen:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return msg, nil
}
