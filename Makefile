# sigscope: `make help` lists the targets.
GO        ?= go
BIN       ?= bin/sigscope
CLANG     ?= clang-14
STRIP     ?= llvm-strip-14
ARGS      ?=
# How the binaries are built, here as in deploy/Dockerfile and deploy/krew/archive.sh
# (deploy/build_test.go checks all three): static (CGO_ENABLED=0: it runs FROM scratch and
# on any libc), without the builder's paths (-trimpath), and without the symbol table and
# DWARF (-s -w: a third of the file; panics still print symbolized stacks from pclntab).
BUILDFLAGS := -trimpath -ldflags="-s -w"
# The kubectl plugin's budget, stripped, in MB (10^6 bytes): it links no BPF loader, no
# clientset and no container runtime client (cmd/kubectl-sigscope/deps_test.go); `make build`
# fails above it.
PLUGIN_MAX_MB := 15
# Debian packages the BPF build needs (bookworm: clang 14 is what the committed object was built with).
BPF_DEPS  := clang-14 llvm-14 libbpf-dev

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/sigscope and the kubectl plugin bin/kubectl-sigscope, static and stripped (needs only Go: the BPF object is committed)
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -o $(BIN) ./cmd/sigscope
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -o bin/kubectl-sigscope ./cmd/kubectl-sigscope
	@n=$$(wc -c < bin/kubectl-sigscope); echo "bin/kubectl-sigscope: $$((n / 1000000)).$$((n % 1000000 / 100000)) MB stripped ($$n bytes; the budget is $(PLUGIN_MAX_MB) MB)"; \
		test $$n -le $$(($(PLUGIN_MAX_MB) * 1000000)) || { echo "bin/kubectl-sigscope is over $(PLUGIN_MAX_MB) MB: what does it link? go list -deps ./cmd/kubectl-sigscope"; exit 1; }

.PHONY: run
run: build ## Build and run `sigscope trace` (root); pass flags with ARGS="--signals TERM,KILL"
	./$(BIN) trace $(ARGS)

.PHONY: deps-bpf
deps-bpf: ## Install clang/llvm/libbpf headers from Debian when missing
	@command -v $(CLANG) >/dev/null && command -v $(STRIP) >/dev/null && test -f /usr/include/bpf/bpf_helpers.h || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BPF_DEPS); }

.PHONY: generate
generate: deps-bpf ## Regenerate the BPF objects and Go bindings with bpf2go (the tracer's, and the bench's floor programs)
	$(GO) generate ./tracer ./cmd/bench

.PHONY: check-generate
check-generate: generate ## Fail when regenerating changes the committed BPF output
	@git diff --exit-code --stat -- tracer/ cmd/bench/ || { echo "generated BPF output is stale: run 'make generate' and commit"; exit 1; }

.PHONY: manifests
manifests: ## Copy deploy/prometheus's alerting rules into the chart and render the chart into deploy/manifests (helm from the Go module proxy, pinned in deploy/render.sh)
	cp deploy/prometheus/sigscope-alerts.yaml deploy/chart/sigscope/files/sigscope-alerts.yaml
	GO=$(GO) sh deploy/render.sh deploy/manifests

.PHONY: check-manifests
check-manifests: manifests ## Fail when the committed manifests, or the chart's copy of the alerting rules, differ from a fresh render of deploy/chart
	@git diff --exit-code --stat -- deploy/manifests/ deploy/chart/sigscope/files/ && \
		test -z "$$(git ls-files --others --exclude-standard deploy/manifests/ deploy/chart/sigscope/files/)" || \
		{ echo "rendered manifests are stale: run 'make manifests' and commit"; exit 1; }

RULES      := $(filter-out %_test.yaml,$(wildcard deploy/prometheus/*.yaml))
RULE_TESTS := $(wildcard deploy/prometheus/*_test.yaml)

.PHONY: test-rules
test-rules: ## Check the Prometheus alerting rules in deploy/prometheus and run their unit tests (promtool, from Debian's prometheus package)
	@command -v promtool >/dev/null || { echo "promtool not found: apt-get install prometheus"; exit 1; }
	promtool check rules $(RULES)
	promtool test rules $(RULE_TESTS)

.PHONY: test
test: ## Run every test, one package at a time (system-wide counters); privileged ones need root (SIGSCOPE_REQUIRE_PRIVILEGED=1 makes skipping fail)
	$(GO) test -p 1 -count=1 -timeout 30m ./...

# The tests that run on each Docker engine (e2e's forEngine, container's forDaemon), and the
# cgroup2-only daemon's own: make test-cgroup2 runs them on its engines only.
# TESTFLAGS: more go test flags (CI: -v, for each test's and engine's time).
CGROUP2_TESTS := ^(TestCgroup2Daemon|TestStopTrafficSidecar|TestDockerStopShellForm|TestDockerStopGraceful|TestInitSharedPidNS|TestInitSharedPidNSLeftover|TestDockerCgroupParent|TestDockerCgroupParentHostProcess|TestDockerDaemonCgroupParent|TestRealDockerLookup|TestRealDockerRemovedBeforeLookup|TestRealDockerFiles)$$

.PHONY: test-cgroup2
test-cgroup2: ## Run the cgroup v2 suite (root, about 1.5 min): stops, shared pid namespaces, audit, cgroup-parent and v2 cgroup id resolution on a cgroup2-only Docker with runc 1.5 (make cluster's, built the first time); SIGSCOPE_ENGINES=host make test then runs the rest once
	SIGSCOPE_ENGINES=cgroup2 $(GO) test -p 1 -count=1 -timeout 15m $(TESTFLAGS) -run '$(CGROUP2_TESTS)' ./test/dockertest/ ./containers/container/ ./test/e2e/

.PHONY: test-unit
test-unit: ## Run the tests that need no root
	SIGSCOPE_SKIP_PRIVILEGED=1 $(GO) test -count=1 ./...

FUZZTIME  ?= 15s

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME each (default 15s: about 4 min in all, no root); a crash's input is written to PKG/testdata/fuzz
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash test/fuzz.sh

KERNELS   ?= 5.10 6.1 6.12

.PHONY: test-kernels
test-kernels: ## Run the privileged tests under each of KERNELS (Debian's, booted with qemu, cached in /var/cache/sigscope/kernels); default "5.10 6.1 6.12"
	bash test/kernels/run.sh $(KERNELS)

.PHONY: cluster
cluster: ## Start a single-node Kubernetes here (root), its parts built the first time into /var/cache/sigscope (SIGSCOPE_CACHE: the pinned builds' cache, shared by every clone); then `. .cluster/env` (docs/cluster.md). RUNTIME=crio: the kubelet on CRI-O (test/crio/build.sh) instead of containerd. FEATURE_GATES=Name=true,... for the API server, controller-manager, scheduler and kubelet (default ContainerStopSignals=true; FEATURE_GATES= for none)
	bash test/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop what `make cluster` started and remove its state (pods, mounts, cgroups, route, .cluster/); the builds' cache stays
	bash test/cluster/down.sh

.PHONY: cluster-build
cluster-build: ## Build the cluster's parts only (Kubernetes, etcd, containerd, runc, pause) at the versions in test/cluster/versions.sh, into /var/cache/sigscope/cluster (SIGSCOPE_CACHE)
	bash test/cluster/build.sh

VERSION   ?= v0.0.0-dev

.PHONY: krew
krew: ## Build kubectl-sigscope's krew archives (linux, darwin; amd64, arm64) into bin/krew and render deploy/krew/sigscope.yaml for them (VERSION=vX.Y.Z)
	GO=$(GO) sh deploy/krew/archive.sh $(VERSION) bin/krew

.PHONY: cluster-agent
cluster-agent: ## Install the agent DaemonSet from the chart, with the image of this tree, on the cluster of `make cluster`; wait until Ready
	bash test/cluster/agent.sh

.PHONY: cluster-images
cluster-images: ## Rebuild the cluster's images (sigscope.local/sigscope:dev from this tree, busybox, pause); import them into its runtime when it runs
	bash test/cluster/images.sh

.PHONY: bench
bench: build ## Benchmark (root; ~6 min, ARGS=-quick ~2): sigscope against the kernel floor and bpftrace, drops, the agent under the storm, idle agent, latencies (docs/benchmarks.md)
	$(GO) run ./cmd/bench -bin $(BIN) $(ARGS)

# The test collector (test/otelcol: its own Go module, so sigscope's go.mod does not grow).
OTELCOL   ?= bin/otelcol

.PHONY: otelcol
otelcol: ## Build the OpenTelemetry Collector the OTLP tests run (OTLP receiver, file and debug exporters; test/otelcol, ~2 min the first time) into bin/otelcol
	cd test/otelcol && CGO_ENABLED=0 $(GO) build -trimpath -o $(CURDIR)/$(OTELCOL) .

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

.PHONY: clean
clean: ## Remove build output
	rm -rf bin
