#!/bin/sh
# build-bin compiles the main packages it is given into /out, static and stripped.
# Used by deploy/Dockerfile; GOOS, GOARCH and CGO_ENABLED=0 come from the stage's ENV.
set -eu
if go list -deps "$@" | grep -qE '^github.com/analyticsco/platform/(devstack|systemtest)'; then
  echo "build-bin: $* imports the dev and test harness (github.com/analyticsco/platform/devstack or systemtest); production binaries must not" >&2
  exit 1
fi
mkdir -p /out
go build -trimpath -ldflags='-s -w' -o /out/ "$@"
