# The whole local stack and every test, from a fresh Debian machine with Go.
#   make run    build everything and run the local stack in the foreground
#               (OBS=1: and Prometheus on http://127.0.0.1:9090 with the platform's rules)
#   make test-unit  the fast loop: the tests whose binaries start no server (domains over
#               fakes, libs, api), in every module; prints its time
#   make test   every test of every module, with the race detector
#   make seed   (stack running) create the demo data and print credentials as JSON
#   make bench  benchmarks; prints one table of figures and ratios (and a 30 s soak)
#   make soak   the soak alone, DURATION long (default 10m): does any process leak?
#   make test-redis-ha  the Redis failover suite: the platform on a Sentinel group and on a
#               Redis Cluster, a primary killed under load (CI runs it after make test)
#   make test-nats-ha  the NATS failover suite: the platform on a three-node JetStream, the
#               jobs and audit streams' leaders killed under load (CI runs it after make test)
#   make lint   gofmt, go vet, staticcheck and go mod tidy -diff in every module (CI runs it first)
#   make redoc  refresh the API reference's embedded Redoc from npm (after changing its version)

SHELL := /bin/bash
MODULES := api libs devstack systemtest gateway workspace-svc embed-svc dbtsync-svc
BIN := bin
GO ?= go

.PHONY: run build test test-unit test-redis-ha test-nats-ha seed bench soak fuzz fuzz-ci e2e attack lint redoc ensure-redis ensure-postgres ensure-prometheus ensure-cli ensure-chromium ensure-nginx clean
FUZZTIME ?= 30s

build:
	@mkdir -p $(BIN)
	@$(GO) build -o $(BIN)/gateway ./gateway/cmd/gateway
	@$(GO) build -o $(BIN)/platformctl ./gateway/cmd/platformctl
	@$(GO) build -o $(BIN)/workspace-svc ./workspace-svc/cmd/workspace-svc
	@$(GO) build -o $(BIN)/embed-svc ./embed-svc/cmd/embed-svc
	@$(GO) build -o $(BIN)/dbtsync-svc ./dbtsync-svc/cmd/dbtsync-svc
	@$(GO) build -o $(BIN)/devstack ./devstack/cmd/devstack

# OBS=1 also runs Debian's prometheus, scraping every process, with deploy/prometheus/rules.
OBS ?=
run: ensure-redis ensure-postgres $(if $(filter 1 true,$(OBS)),ensure-prometheus) build
	@$(if $(OBS),DEVSTACK_OBS=$(OBS) )$(BIN)/devstack

# The e2e suite runs last, on its own (make e2e), so that its verdict is printed.
test: ensure-redis ensure-postgres ensure-prometheus ensure-cli ensure-chromium ensure-nginx
	@set -e; for m in $(MODULES); do \
		echo "== go test $$m"; \
		(cd $$m && $(GO) test -race -shuffle=on -count=1 -timeout 20m $$($(GO) list ./... | grep -v -e '/systemtest/e2e$$' -e '/systemtest/redisha$$' -e '/systemtest/natsha$$')); \
	done
	@$(MAKE) --no-print-directory e2e

# The loop while editing: every package whose test binary links no server starter
# (tools/unit-packages picks them from the import graph: the domains over their fakes,
# libs, api, the token and credential packages). No -race and no -count=1, so a package
# whose code did not change answers from the test cache.
test-unit:
	@start=$$(date +%s%N); set -e; for m in $(MODULES); do \
		pkgs=$$(cd $$m && ../tools/unit-packages); \
		if [ -n "$$pkgs" ]; then (cd $$m && $(GO) test $$pkgs); fi; \
	done; \
	echo "test-unit: $$(( ($$(date +%s%N) - start) / 1000000 )) ms"

seed:
	@$(GO) build -o $(BIN)/platformctl ./gateway/cmd/platformctl
	@$(BIN)/platformctl seed --json

bench: ensure-redis ensure-postgres build
	@$(GO) run ./devstack/cmd/bench

# The soak alone: DURATION of mixed traffic from a fixed connection pool, then a verdict
# per process (README "The soak and its verdict").
DURATION ?= 10m
soak: ensure-redis ensure-postgres build
	@$(GO) run ./devstack/cmd/bench -only soak -soak $(DURATION)

# The end-to-end suite: the real stack as processes, every rule of the spec through the
# gateway, every exchange judged against api/openapi.yaml by kin-openapi and by Prism.
# `make test` runs it too. It runs verbose: on success only its verdict (the line with the
# number of response violations, which must be 0) and the result are printed, on failure
# everything.
e2e: ensure-redis ensure-postgres
	@echo "== go test systemtest/e2e"
	@log=$$(mktemp); \
	if (cd systemtest && $(GO) test -race -shuffle=on -count=1 -timeout 20m -v ./e2e/) >$$log 2>&1; then \
		grep -A2 'contract validation (Prism' $$log | sed 's/^ *//'; grep -E '^(ok|PASS)' $$log | tail -1; rm -f $$log; \
	else cat $$log; rm -f $$log; exit 1; fi

# The platform on a three-node JetStream cluster (nats-server child processes), two
# replicas of every process, under dbt syncs, audited requests and identity lookups; the
# leader of the job stream, then of the audit stream, is killed and restarted. It prints
# each election's downtime and the load's outcome. CI runs it after make test.
test-nats-ha: ensure-redis ensure-postgres
	@echo "== go test systemtest/natsha"
	@log=$$(mktemp); \
	if (cd systemtest && $(GO) test -race -count=1 -timeout 15m -v ./natsha/) >$$log 2>&1; then \
		grep -E 'leader .* killed|requests answered' $$log | sed 's/^ *//'; grep -E '^(ok|PASS)' $$log | tail -1; rm -f $$log; \
	else cat $$log; rm -f $$log; exit 1; fi

# The attack suite: every finding of the security review as a named attack on the real
# stack through the gateway. `make test` runs it too.
attack: ensure-redis ensure-postgres
	@cd systemtest && $(GO) test -race -count=1 -timeout 20m ./attack/

# The Redis high-availability suite: the platform (two gateways, two of every
# service) on a Sentinel group (a primary, two replicas, three sentinels) and on a Redis
# Cluster (three primaries, three replicas), redis-server and redis-sentinel as children; a
# primary killed under mints, exchanges, revocations and embed requests, the failover
# awaited, the old primary started again. It prints each failover's downtime and 503s.
# On success only those lines are printed, on failure everything. `make test` leaves it
# out; .ci/run runs it after `make test` (about 2 minutes).
test-redis-ha: ensure-redis ensure-postgres
	@echo "== go test systemtest/redisha"
	@log=$$(mktemp); \
	if (cd systemtest && $(GO) test -race -count=1 -timeout 15m -v ./redisha/) >$$log 2>&1; then \
		grep -E 'redis-ha |^--- |^ok' $$log | sed 's/^ *//'; rm -f $$log; \
	else cat $$log; rm -f $$log; exit 1; fi

# Every go test -fuzz target of the repository for FUZZTIME each (corpora in testdata/fuzz).
fuzz:
	@$(GO) run ./devstack/cmd/fuzzall -fuzztime $(FUZZTIME)

# CI's brief pass over every fuzz target: a count, not a duration (see devstack/cmd/fuzzall).
fuzz-ci:
	@$(GO) run ./devstack/cmd/fuzzall -fuzztime 5000x

# The lint gate (.ci/run runs it before the tests): gofmt, go vet, staticcheck (every
# check, staticcheck.conf) and go mod tidy -diff, in every module. The tools are pinned in
# tools/go.mod and built from the Go module proxy into bin/tools.
TOOLS := $(CURDIR)/$(BIN)/tools
LINT_MODULES := $(MODULES) tools

$(TOOLS)/staticcheck: tools/go.mod tools/go.sum
	@mkdir -p $(TOOLS)
	@cd tools && GOWORK=off $(GO) build -o $(TOOLS)/staticcheck honnef.co/go/tools/cmd/staticcheck

lint: $(TOOLS)/staticcheck
	@echo "== gofmt"; unformatted="$$(gofmt -l $(LINT_MODULES))"; \
		if [ -n "$$unformatted" ]; then echo "not gofmt-ed (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	@set -e; for m in $(MODULES); do \
		echo "== $$m: go vet, staticcheck, go mod tidy -diff"; \
		(cd $$m && $(GO) vet ./... && $(TOOLS)/staticcheck ./... && $(GO) mod tidy -diff); \
	done
	@echo "== tools: go mod tidy -diff"; cd tools && GOWORK=off $(GO) mod tidy -diff

# The API reference's Redoc bundle (gateway/internal/apidocs) is the npm release of
# apidocs.RedocVersion, byte for byte (a test checks it); this copies it after a change of
# that version.
redoc:
	@cd gateway && $(GO) test -count=1 -run TestEmbeddedRedocIsTheNpmRelease ./internal/apidocs/ -update

# What the stack and the tests run as child processes, from Debian's packages, installed
# when missing by tools/install-deps.sh (as root; otherwise it names the packages and fails).
# .ci/run calls the same script.
ensure-redis:
	@./tools/install-deps.sh redis

ensure-postgres:
	@./tools/install-deps.sh postgres

ensure-prometheus:
	@./tools/install-deps.sh prometheus

ensure-nginx:
	@./tools/install-deps.sh nginx

ensure-cli:
	@./tools/install-deps.sh cli

ensure-chromium:
	@./tools/install-deps.sh chromium

clean:
	rm -rf $(BIN)
