# Skein build, test and code-generation entry points. See README.md.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO      ?= go
BUF     := bin/buf
# Every module of the workspace, by module path (go.work cannot build "./...").
MODULES := $(shell $(GO) work edit -json | sed -n 's/.*"DiskPath": "\.\/\(.*\)".*/\1/p')
PKGS    := $(foreach m,$(filter-out tools,$(MODULES)),skein/$(m)/...)
# Static binaries: every cmd/<name>/main.go under services/ and cmd/.
CMDS    := $(sort $(dir $(wildcard services/*/cmd/*/main.go) $(wildcard cmd/*/main.go)))
FUZZTIME ?= 20s

.PHONY: all build run test test-short test-integration fuzz proto check lint fmt vet gen-fresh breaking tools clean verify

all: build

## build: static binaries (CGO_ENABLED=0) into bin/
build:
	@mkdir -p bin
	@if [ -z "$(CMDS)" ]; then echo "no binaries yet"; exit 0; fi; \
	for d in $(CMDS); do \
	  echo "build $$d"; \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/ ./$$d; \
	done

## run: build, then a local cluster in .data/dev (3 controllers, 3 storage
## nodes, the gateway on 127.0.0.1:8080 REST / 9090 gRPC) until Ctrl-C
run: build
	bin/skein dev --data-dir .data/dev

## test: every test of every module with the race detector, the real-process
## cluster tests (kill -9, SIGSTOP, restarts) against fresh binaries, the
## docker-compose cluster test (images built here; Jaeger from the Go module
## proxy on first use), then a short fuzz run per target
test: test-short test-integration test-python compose-test fuzz

test-short:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## test-integration: the real-process tests, one package at a time (-p 1):
## each starts whole clusters on free loopback ports, and two starting at
## once on two cores can pick the same port before either binds it (and slow
## each other past the fault tests' time bounds).
test-integration: build console-browser
	$(GO) test -tags integration -count=1 -p 1 -timeout 30m skein/tests/... skein/services/controller/cmd/skein-controller/

## console-browser: Debian's chromium for the console's browser test
## (tests/console/install.sh: apt-get installs it when missing; without root
## or sudo the test skips itself)
.PHONY: console-browser test-console
console-browser:
	tests/console/install.sh

## test-console: only the console's browser test (part of test-integration):
## headless chromium against a `skein dev --console-demos` cluster
test-console: build console-browser
	$(GO) test -tags integration -count=1 -timeout 5m -run TestConsole skein/tests/console/...

## test-python: a Python client generated from proto/skein/v1 with Debian's
## protoc and gRPC plugin (apt-get installs them when missing) against a
## `skein dev` cluster (tests/python/run.sh)
.PHONY: test-python
test-python: build
	tests/python/run.sh
	SKEIN_SECURE=1 tests/python/run.sh

## fuzz: each `func FuzzX` in the tree for $(FUZZTIME) (seed corpus committed under testdata/fuzz).
## Go's fuzzing coordinator sometimes reports "context deadline exceeded" when
## -fuzztime runs out while a worker is busy, with no failing input: such a
## run is tried again, up to three runs in all; a run that found an input,
## or failed any other way, fails at once.
fuzz:
	@grep -rl --include='*_test.go' '^func Fuzz' $(filter-out tools,$(MODULES)) 2>/dev/null | while read -r f; do \
	  dir=$$(dirname "$$f"); \
	  for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
	    echo "fuzz $$dir $$fn ($(FUZZTIME))"; \
	    out=$$(mktemp); \
	    for try in 1 2 3; do \
	      rc=0; \
	      $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$dir 2>&1 | tee "$$out" || rc=$$?; \
	      [ "$$rc" = 0 ] && break; \
	      if grep -q 'Failing input written' "$$out" || ! grep -q 'context deadline exceeded' "$$out" || [ "$$try" = 3 ]; then rm -f "$$out"; exit 1; fi; \
	      echo "fuzz $$dir $$fn: the coordinator's deadline flake, no failing input; again"; \
	    done; \
	    rm -f "$$out"; \
	  done; \
	done

## tools: pinned buf (own module, outside go.work so its dependencies stay out of ours)
tools: $(BUF)
$(BUF): tools/buf/go.mod tools/buf/go.sum
	@mkdir -p bin
	GOWORK=off GOBIN=$(CURDIR)/bin $(GO) -C tools/buf install tool
	@touch $(BUF)

## proto: regenerate gen/ from proto/ with the pinned plugins
proto: $(BUF)
	rm -rf gen/skein gen/openapi/*.json
	$(BUF) generate
	$(BUF) generate --template buf.gen.gateway.yaml --path proto/skein/v1

## check: formatting, vet, buf lint and breaking, generated code fresh, and
## the pure cores free of gRPC
check: fmt vet lint breaking gen-fresh pure

# The pure cores: state machines, math and the error table, which the gRPC
# and disk shells wrap. None may depend on a gRPC package, even indirectly.
PURE := skein/libs/errs skein/libs/acl skein/libs/record skein/libs/topicconfig skein/libs/metadata \
	skein/services/controller/internal/fsm \
	skein/services/storage/internal/isr skein/services/storage/internal/producer \
	skein/services/groupcoord/internal/assign skein/services/groupcoord/internal/group \
	skein/services/groupcoord/internal/delivery \
	skein/services/txncoord/internal/txn

.PHONY: pure
pure:
	@for p in $(PURE); do \
	  if $(GO) list -deps $$p | grep -q '^google.golang.org/grpc'; then \
	    echo "$$p depends on gRPC:"; $(GO) list -deps $$p | grep '^google.golang.org/grpc' | head -5; exit 1; fi; \
	done; echo "pure cores import no gRPC"

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

lint: $(BUF)
	$(BUF) lint

# The public package is guarded against breaking changes; internal packages
# may change freely until 1.0.
breaking: $(BUF)
	@if git rev-parse --verify -q main >/dev/null && git cat-file -e main:proto/skein/v1 2>/dev/null; then \
	  $(BUF) breaking --against '.git#branch=main' --path proto/skein/v1; \
	else echo "breaking: main has no proto/skein/v1 yet"; fi

gen-fresh: $(BUF)
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(BUF) generate -o $$tmp; \
	$(BUF) generate --template buf.gen.gateway.yaml --path proto/skein/v1 -o $$tmp; \
	if ! diff -r -q $$tmp/gen/skein gen/skein || ! diff -q $$tmp/gen/openapi/skein.swagger.json gen/openapi/skein.swagger.json; then \
	  echo "gen/ is stale: run make proto and commit"; exit 1; fi; \
	echo "gen/ is fresh"

clean:
	rm -rf bin

## ---- containers, tracing and load ----
DOCKER        ?= docker
IMAGE_TAG     ?= dev
IMAGES        := controller storage groupcoord txncoord gateway
# The published Jaeger v2 image name; `make jaeger-image` builds a local image
# with this tag from tools/jaeger when it is not present (nothing is pulled).
JAEGER_IMAGE  := jaegertracing/jaeger:2.13.0
JAEGER_MODVER := v2.13.0
BENCH_ARGS    ?=

.PHONY: images jaeger-image compose-test bench

## images: one FROM scratch image per service, skein/<service>:$(IMAGE_TAG),
## each built from a context that holds only its binary (and an empty /data).
## The legacy builder (DOCKER_BUILDKIT=0) needs no buildx plugin.
images: build
	@for s in $(IMAGES); do \
	  ctx=$$(mktemp -d); \
	  cp bin/skein-$$s deploy/$$s.Dockerfile "$$ctx"/; mkdir "$$ctx/data"; \
	  echo "image skein/$$s:$(IMAGE_TAG)"; \
	  out=$$(DOCKER_BUILDKIT=0 $(DOCKER) build -q -f "$$ctx/$$s.Dockerfile" -t skein/$$s:$(IMAGE_TAG) "$$ctx" 2>&1) \
	    || { echo "$$out" >&2; rm -rf "$$ctx"; exit 1; }; \
	  rm -rf "$$ctx"; \
	done

## jaeger-image: $(JAEGER_IMAGE) built here (static binary from the Go module
## proxy, FROM scratch) unless an image with that tag is already present.
## Cold: ~2 min of downloads and ~4 min of compiling on 2 cores, 2.4 GB peak.
jaeger-image:
	@if $(DOCKER) image inspect $(JAEGER_IMAGE) >/dev/null 2>&1; then \
	  echo "$(JAEGER_IMAGE) is present"; exit 0; fi; \
	$(MAKE) --no-print-directory bin/jaeger; \
	ctx=$$(mktemp -d); trap 'rm -rf "$$ctx"' EXIT; \
	cp bin/jaeger "$$ctx/jaeger-linux"; cp deploy/jaeger.Dockerfile "$$ctx/Dockerfile"; \
	echo "image $(JAEGER_IMAGE)"; \
	out=$$(DOCKER_BUILDKIT=0 $(DOCKER) build -q -t $(JAEGER_IMAGE) "$$ctx" 2>&1) || { echo "$$out" >&2; exit 1; }

# Jaeger's own module, outside go.work (its dependencies stay out of ours).
bin/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	@mkdir -p bin
	GOWORK=off CGO_ENABLED=0 $(GO) -C tools/jaeger build -trimpath \
	  -ldflags='-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=$(JAEGER_MODVER)' \
	  -o $(CURDIR)/bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

## compose-test: the docker-compose.yml cluster end to end (failover, ISR
## shrink/expand on a network cut, a produce's trace in Jaeger); needs Docker
compose-test: images jaeger-image
	$(GO) test -tags compose -count=1 -v -timeout 15m skein/tests/compose/...

## bench: skein-bench against a running cluster (BENCH_ARGS); see docs/BENCHMARKS.md
bench:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./loadtest/cmd/skein-bench
	bin/skein-bench $(BENCH_ARGS)

## ---- Skein beside NATS JetStream on this machine ----
.PHONY: bench-compare profile

## bench-compare: a 3-server JetStream cluster, then a `skein dev` cluster, the
## same workloads on each, one table (loadtest/bench-compare.sh; docs/BENCHMARKS.md).
## BENCH_MSGS=N for a shorter run. Not part of `make test`.
bench-compare: build bin/nats-server bin/nats
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./loadtest/cmd/skein-bench
	loadtest/bench-compare.sh

## profile: CPU profiles of the gateway and every storage node during one
## gateway-stream produce run on a fresh `skein dev` (loadtest/profile.sh),
## with each process's share of a core and each profile's top functions.
## PROFILE_ARGS='--keyless' or '--throughput 30000' changes the workload.
profile: build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./loadtest/cmd/skein-bench
	loadtest/profile.sh

# nats-server and natscli, each in its own module outside go.work (versions
# pinned in tools/nats/*/go.mod), built from the Go module proxy on first
# use: ~2.5 min cold on 2 cores.
bin/nats-server: tools/nats/server/go.mod tools/nats/server/go.sum
	@mkdir -p bin
	GOWORK=off CGO_ENABLED=0 $(GO) -C tools/nats/server build -trimpath -ldflags='-s -w' \
	  -o $(CURDIR)/bin/nats-server github.com/nats-io/nats-server/v2

bin/nats: tools/nats/cli/go.mod tools/nats/cli/go.sum
	@mkdir -p bin
	GOWORK=off CGO_ENABLED=0 $(GO) -C tools/nats/cli build -trimpath -ldflags='-s -w' \
	  -o $(CURDIR)/bin/nats github.com/nats-io/natscli/nats

## ---- fault schedule ----

## verify: the seeded fault-schedule runner (tests/verify): a `skein dev`
## cluster of its own, acks=all producers and a consumer group through the
## gateway, SIGKILL/restart and SIGSTOP faults one after another for 5 minutes,
## then the history audit and a table per fault kind; exits non-zero on any
## anomaly. VERIFY_ARGS='--seed N' replays a schedule, '--duration 2m' shortens it.
## `make test-integration` runs a short version (each kind once, seed 1).
VERIFY_ARGS ?=
verify: build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./tests/verify/cmd/skein-verify
	bin/skein-verify --duration 5m $(VERIFY_ARGS)

## ---- lab demos ----
LAB_DEMOS := demo-acks1-loss demo-acks-all demo-min-isr demo-group demo-unclean
.PHONY: $(LAB_DEMOS)

## demo-*: one lab demo (tests/lab): a `skein dev` cluster of its own on free
## loopback ports, one fault with real processes, an audit of what the clients
## were told, a report in plain words; the cluster is always stopped.
## LAB_ARGS='-v' prints the history checker's whole table. Each under a minute.
LAB_ARGS ?=
$(LAB_DEMOS): build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./tests/lab/cmd/skein-lab
	bin/skein-lab $(LAB_ARGS) $(@:demo-%=%)
