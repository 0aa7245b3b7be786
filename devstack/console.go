package devstack

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Console serialises whole lines from a stack's runner and its children onto one
// writer, each prefixed with "[<name>] ", so outputs never interleave mid-line (the
// local stack's terminal, a test stack's log).
type Console struct {
	mu sync.Mutex
	w  io.Writer
}

// NewConsole writes to w.
func NewConsole(w io.Writer) *Console { return &Console{w: w} }

func (c *Console) line(name string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := make([]byte, 0, len(name)+3+len(b)+1)
	buf = append(buf, '[')
	buf = append(buf, name...)
	buf = append(buf, "] "...)
	buf = append(buf, b...)
	buf = append(buf, '\n')
	_, _ = c.w.Write(buf)
}

// Printf writes one prefixed line.
func (c *Console) Printf(name, format string, args ...any) {
	c.line(name, []byte(fmt.Sprintf(format, args...)))
}

// Writer returns a writer that re-prints each line it receives with name's prefix.
func (c *Console) Writer(name string) *LineWriter { return &LineWriter{c: c, name: name} }

// LineWriter is one source of a Console.
type LineWriter struct {
	c    *Console
	name string

	mu      sync.Mutex
	partial []byte
}

func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.c.line(w.name, bytes.TrimRight(w.partial[:i], "\r"))
		w.partial = w.partial[i+1:]
	}
	// A child printing a huge line without newline must not grow us forever.
	if len(w.partial) > 64<<10 {
		w.c.line(w.name, w.partial)
		w.partial = nil
	}
	return len(p), nil
}

// Flush prints a trailing line that had no newline.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.c.line(w.name, w.partial)
		w.partial = nil
	}
}
