package devstack

import (
	"bytes"
	"sync"
)

// LogBuffer collects a child process's output for failure messages; its writers and
// readers may be different goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
