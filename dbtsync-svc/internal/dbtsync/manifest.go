package dbtsync

import (
	"errors"
	"io"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// DecodeManifest reads a dbt manifest for a job within convert's default limits. A
// manifest that is not JSON (a duplicate member name or invalid UTF-8 included), has no
// nodes, is no manifest, has an unsupported schema version or a member the conversion
// reads of another shape fails the job at once (PermanentError) with invalid_manifest,
// naming the field; one over a limit fails it with work_limit, naming the limit. Reading
// it again cannot help.
func DecodeManifest(r io.Reader) (*convert.Project, error) {
	return DecodeManifestWith(r, convert.ManifestLimits{})
}

// DecodeManifestWith is DecodeManifest within limits.
func DecodeManifestWith(r io.Reader, limits convert.ManifestLimits) (*convert.Project, error) {
	p, err := convert.DecodeManifestWith(r, limits, nil)
	if err != nil {
		var limit *convert.ManifestLimitError
		switch {
		case errors.As(err, &limit):
			return nil, Permanent(Failure(CodeWorkLimit, "%s", err))
		case errors.Is(err, convert.ErrNotJSON) || errors.Is(err, convert.ErrNoNodes) || errors.Is(err, convert.ErrNotManifest) ||
			errors.Is(err, convert.ErrUnsupportedVersion) || errors.Is(err, convert.ErrMemberShape):
			return nil, Permanent(Failure(CodeInvalidManifest, "%s", err))
		}
		return nil, err
	}
	return p, nil
}
