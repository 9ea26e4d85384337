# vk-sandbox build, test and lint entry points. CI runs .ci/run, which runs
# `make test`, `make mutants`, `make test-observability`, `make lint`,
# `make demo` and `make release-snapshot` (checked by
# scripts/check-release.sh), every step even after one fails.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOARCH  ?= $(shell $(GO) env GOARCH)

# Binaries built from ./cmd/<name> into bin/<name>.
CMDS := vk-sandbox sandboxd-sim

# Packages with concurrency worth running under the race detector.
# Under -race, e2e also builds the vk-sandbox binary with -race and
# fails a test whose binary reported a data race.
RACE_PKGS ?= ./pool/... ./pipeline/... ./kube/... ./telemetry/... ./cmd/... ./internal/... ./e2e/

# Generous for 2 shared CI cores; the whole CI job has 90 minutes.
TEST_TIMEOUT ?= 30m
TEST_FLAGS   ?=

COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.stampedCommit=$(COMMIT)

.PHONY: build build-linux tools demo-tools lint-tools obs-tools test test-reliability test-observability observability-screenshot fuzz lint bench bench-compare bench-baseline bench-burst bench-fleet bench-interactive plots clean demo demo-observability mutants release-tools release-snapshot

build:
	$(GO) build ./...
	@mkdir -p $(BIN)
	for c in $(CMDS); do $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/$$c ./cmd/$$c; done

# Static Linux binaries for deployment, in bin/linux-<arch>/.
build-linux:
	@mkdir -p $(BIN)/linux-$(GOARCH)
	for c in $(CMDS); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) $(GO) build -trimpath \
			-ldflags "-s -w $(LDFLAGS)" -o $(BIN)/linux-$(GOARCH)/$$c ./cmd/$$c; \
	done

# etcd, kube-apiserver, kube-scheduler, the agent-sandbox controller and
# vk-chartcheck (Helm and Prometheus, for the chart tests) for the tests,
# cached outside the clone and linked into bin/.
tools:
	bash scripts/build-tools.sh

# What the demo runs, and nothing the tests alone need.
demo-tools:
	bash scripts/build-tools.sh etcd kube-apiserver

test: tools
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(RACE_PKGS)

# Jaeger v2 and the headless-Chromium checker, cached like the control
# plane but built only for the targets below.
obs-tools:
	bash scripts/build-tools.sh jaeger vk-jaegerui

# The real-backend test of docs/observability.md: the binary, a real
# apiserver and the emulator exporting to a real Jaeger; Prometheus and
# Chromium too when installed (.ci/run installs them). Behind the
# observability build tag, so `make test` does not run it. CI runs it.
test-observability: tools obs-tools
	$(GO) test -tags observability -count=1 -v -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./e2e/observability/

# Regenerates docs/img/jaeger-trace.png from a fresh claim opened in the
# Jaeger UI by headless Chromium. It fails, writing nothing, when the Jaeger
# UI is missing (the module build has only a placeholder): point
# VK_JAEGER_UI_ASSETS at a built Jaeger UI to use one.
observability-screenshot: tools obs-tools
	VK_SCREENSHOT=$(CURDIR)/docs/img/jaeger-trace.png $(GO) test -tags observability -count=1 -v -timeout $(TEST_TIMEOUT) -run TestClaimTracesInJaeger ./e2e/observability/

# The reliability suites of docs/reliability.md at full size. Every test is
# named TestR<n>...; `make test` runs the same tests at CI size, and
# VK_RELIABILITY=full makes them run at the size the document reports
# (50 SIGKILLs over 2,000 Pods, 10,000 soak cycles, ...). Not run by CI.
RELIABILITY_TIMEOUT ?= 150m
test-reliability: tools
	VK_RELIABILITY=full $(GO) test -count=1 -v -timeout $(RELIABILITY_TIMEOUT) -run '^TestR[0-9]' ./...

# Every fuzz target for FUZZTIME each (default 10m), one after another. CI
# runs only the seed corpora in testdata/fuzz, as ordinary tests.
FUZZTIME ?= 10m
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

# staticcheck, pinned in tools/staticcheck and cached like the control
# plane; built only for make lint.
lint-tools:
	bash scripts/build-tools.sh staticcheck

# go vet, go mod tidy, gofmt, staticcheck (with the tests; its checks are
# chosen in staticcheck.conf) and the import rule of docs/architecture.md.
lint: lint-tools
	$(GO) vet ./...
	$(BIN)/staticcheck -tests ./...
	$(GO) test -count=1 -run '^TestImportRule$$' ./internal/importrule/
	@$(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change go.mod or go.sum (run go mod tidy):"; $(GO) mod tidy -diff; exit 1; }
	@files="$$(find . -type f -name '*.go' -not -path './.*' -not -path './$(BIN)/*')"; \
	bad="$$(gofmt -l $$files)"; \
	if [[ -n "$$bad" ]]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$bad"; exit 1; fi

# Micro-benchmarks: the store (commit cost vs table size, fsync on/off, the
# full-rewrite baseline, restart), the pipeline (claim at concurrency 1..1024,
# fsync on/off, in-process sandboxd) and tracing overhead, 6 runs each so
# that benchstat can tell noise from change. Results go to
# bench/results/bench-latest.txt (not committed). `make bench-compare`
# compares them with the committed baseline, bench/results/baseline.txt;
# `make bench-baseline` makes the latest results the new baseline. The
# end-to-end burst is `make bench-burst`.
BENCH_FLAGS ?= -count=6
BENCHSTAT   := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
bench:
	@mkdir -p bench/results
	$(GO) test -run '^$$' -bench . -benchmem $(BENCH_FLAGS) -timeout $(TEST_TIMEOUT) ./pool/store/ ./pipeline/ ./telemetry/ | tee bench/results/bench-latest.txt

bench-compare:
	@[[ -f bench/results/bench-latest.txt ]] || { echo "bench-compare: no bench/results/bench-latest.txt: run make bench first"; exit 1; }
	$(GO) run $(BENCHSTAT) bench/results/baseline.txt bench/results/bench-latest.txt

bench-baseline:
	@[[ -f bench/results/bench-latest.txt ]] || { echo "bench-baseline: no bench/results/bench-latest.txt: run make bench first"; exit 1; }
	cp bench/results/bench-latest.txt bench/results/baseline.txt

bench-burst: tools
	$(GO) run ./bench/burst $(BURST_FLAGS)

# A fleet of virtual nodes on one apiserver (bench/fleet): N vk-sandbox
# processes, P Pods each at once, against the bare apiserver, with each
# node's requests, watches, CPU and RSS. Default 20 x 500 (6-7 minutes on
# 2 loaded cores); smaller: FLEET_FLAGS='-nodes 3 -pods 50 -idle 20s'. Writes
# bench/results/fleet-<time>.json, its CSVs and two SVG plots.
FLEET_FLAGS ?=
bench-fleet: tools
	$(GO) run ./bench/fleet $(FLEET_FLAGS)

# kubectl exec into a sandbox Pod beside kubectl port-forward to the same
# Pod, in one run (bench/interactive): round trips (p50/p99) of a new and
# of an open session, and the throughput of a 64 MiB stream, through a
# real apiserver, the node's kubelet API and the emulator's silkd, and the
# new sessions with the kubectl binary (bin/kubectl). Writes
# bench/results/interactive-<time>.json; about three minutes.
INTERACTIVE_FLAGS ?=
bench-interactive: tools
	$(GO) run ./bench/interactive $(INTERACTIVE_FLAGS)

# SVG plots of the latest results, in bench/results/: from bench-latest.txt
# (make bench) claims-vs-concurrency.svg and commit-cost-vs-size.svg; from
# the newest burst-*.csv (make bench-burst) its latency CDF, <csv>-cdf.svg.
# A missing input is skipped with a note.
plots:
	@if [[ -f bench/results/bench-latest.txt ]]; then \
		$(GO) run ./bench/plot -bench bench/results/bench-latest.txt; \
	else echo "plots: no bench/results/bench-latest.txt (make bench): skipped"; fi
	@csv="$$(ls bench/results/burst-*.csv 2>/dev/null | tail -n 1 || true)"; \
	if [[ -n "$$csv" ]]; then \
		$(GO) run ./bench/plot -cdf -logx -value client_latency_s -series mode,n \
			-in "$$csv" -out "$${csv%.csv}-cdf.svg" \
			-title "Burst: client create → Running seen by watch, per Pod ($$(basename "$$csv"))" \
			-xlabel "latency (s, log scale)" -ylabel "fraction of Pods Running"; \
	else echo "plots: no bench/results/burst-*.csv (make bench-burst): skipped"; fi

# Removes bin/ only; the tools cache outside the clone is kept on purpose.
clean:
	rm -rf $(BIN)

# The local demo: etcd + kube-apiserver, the sandboxd emulator and
# vk-sandbox, then claim → preserve → adopt → release. It stays up for
# kubectl when run from a terminal (-hold), and exits when it is not.
demo: demo-tools
	$(GO) run ./cmd/vk-sandbox-demo $(DEMO_FLAGS)

# The demo with its traces in a real Jaeger (and its metrics in a real
# Prometheus when one is installed); it prints the URLs to open.
demo-observability: demo-tools obs-tools
	$(GO) run ./cmd/vk-sandbox-demo -observability $(DEMO_FLAGS)

# The mutation check of docs/reliability.md ("Mutation check"): each
# mutation of scripts/mutants.txt, one at a time, applied to a temporary
# copy of the working tree, with the tests that must catch it. It fails if
# one survives or no longer applies. MUTANTS_FLAGS, e.g. -only 'fsync|crc'
# or -rev HEAD; see scripts/mutants/main.go. CI runs it (.ci/run).
MUTANTS_FLAGS ?=
mutants:
	$(GO) run ./scripts/mutants $(MUTANTS_FLAGS)

# goreleaser and cyclonedx-gomod (tools/release), cached like the control
# plane; not part of make tools, so make test does not build them.
release-tools:
	bash scripts/build-tools.sh release

# The release of .goreleaser.yaml, built locally into dist/ and never
# published: linux amd64/arm64 archives, .deb and .rpm packages,
# checksums.txt and a CycloneDX SBOM per archive. The binaries carry the
# same -X main.version and main.stampedCommit as LDFLAGS above.
# scripts/check-release.sh checks the result (CI runs both).
release-snapshot: release-tools
	VK_COMMIT=$(COMMIT) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/goreleaser release --snapshot --clean --skip=publish
