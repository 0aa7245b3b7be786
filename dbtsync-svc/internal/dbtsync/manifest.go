package dbtsync

import (
	"errors"
	"io"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// DecodeManifest reads a dbt manifest for a job. A manifest that is not JSON, has no
// nodes, is no manifest or has an unsupported schema version fails the job at once
// (PermanentError): reading it again cannot help.
func DecodeManifest(r io.Reader) (*convert.Project, error) {
	p, err := convert.DecodeManifest(r)
	if err != nil {
		if errors.Is(err, convert.ErrNotJSON) || errors.Is(err, convert.ErrNoNodes) || errors.Is(err, convert.ErrNotManifest) || errors.Is(err, convert.ErrUnsupportedVersion) {
			return nil, Permanent(Failure(CodeInvalidManifest, "%s", err))
		}
		return nil, err
	}
	return p, nil
}
