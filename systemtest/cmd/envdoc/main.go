// Command envdoc prints the configuration reference, the environment variables every
// process reads (`go run ./systemtest/cmd/envdoc`), or writes it to a file
// (`go run ./systemtest/cmd/envdoc -write docs/configuration.md`). A test checks that
// docs/configuration.md is what it writes, so the reference cannot go stale quietly.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/analyticsco/platform/systemtest/internal/envdoc"
)

func main() {
	write := flag.String("write", "", "write the reference to this file instead of printing it")
	flag.Parse()
	doc := envdoc.Document()
	if *write == "" {
		fmt.Print(doc)
		return
	}
	if err := os.WriteFile(*write, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "envdoc:", err)
		os.Exit(1)
	}
}
