// Command envdoc prints the environment variables every process reads, as the Markdown
// tables of the README's "Configuration" section (`go run ./systemtest/cmd/envdoc`).
// A test checks the README lists every variable, so the tables cannot go stale quietly.
package main

import (
	"fmt"
	"strings"

	"github.com/analyticsco/platform/systemtest/internal/envdoc"
)

func main() {
	for _, p := range envdoc.Processes() {
		fmt.Printf("#### %s\n\n| Variable | Default | Meaning |\n|---|---|---|\n", p.Name)
		for _, v := range p.Vars {
			def := v.Default
			switch {
			case v.Required:
				def = "required"
			case def == "":
				def = "unset"
			default:
				def = "`" + def + "`"
			}
			help := v.Help
			if v.Secret {
				help += " (secret: never logged)"
			}
			fmt.Printf("| `%s` | %s | %s |\n", v.Name, def, strings.ReplaceAll(help, "|", "\\|"))
		}
		fmt.Println()
	}
}
