// Command mongo runs the embedded MongoDB of the local stack alone: FerretDB on its
// PostgreSQL child process, behind the serialising wire-protocol proxy, in the
// foreground. Tests start it as a child process (devstack.MongoProcessForTest) when the
// FerretDB they talk to must not run inside a test binary built with the race detector,
// which makes its work an order of magnitude slower.
//
// It prints "ready <uri>" on standard output once the proxy accepts connections, and
// stops on SIGINT, SIGTERM or when its standard input closes (its parent is gone).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/analyticsco/platform/devstack"
)

func main() {
	dir := flag.String("dir", "", "data directory (required)")
	addr := flag.String("addr", "127.0.0.1:0", "proxy listen address")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "mongo: -dir is required")
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	m, err := devstack.StartMongoAt(ctx, *dir, *addr, logger)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mongo:", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", m.URI)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	gone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(gone) }()
	select {
	case <-stop:
	case <-gone:
	}
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "mongo:", err)
		os.Exit(1)
	}
}
