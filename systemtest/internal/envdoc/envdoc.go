// Package envdoc lists the environment variables of every process of the platform.
package envdoc

import (
	dbtsync "github.com/analyticsco/platform/dbtsync-svc/config"
	embed "github.com/analyticsco/platform/embed-svc/config"
	gateway "github.com/analyticsco/platform/gateway/config"
	"github.com/analyticsco/platform/libs/config"
	workspace "github.com/analyticsco/platform/workspace-svc/config"
)

// Process is one binary and the variables it reads.
type Process struct {
	Name string
	Vars []config.Var
}

// Processes returns every process's variables, gateway first.
func Processes() []Process {
	return []Process{
		{"gateway", config.Describe(gateway.Config{})},
		{"workspace-svc", config.Describe(workspace.Config{})},
		{"embed-svc", config.Describe(embed.Config{})},
		{"dbtsync-svc (API and `worker`)", config.Describe(dbtsync.Config{})},
	}
}
