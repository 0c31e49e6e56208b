# liqo-auth: liqoctl, liqo-auth-manager and the controller library.
# Every target does its own set-up; a fresh machine needs only Go.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO           ?= go
BIN          ?= bin
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT       ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE         ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS      := -s -w -X github.com/liqo-auth/liqo-auth/internal/version.version=$(VERSION) \
                -X github.com/liqo-auth/liqo-auth/internal/version.commit=$(COMMIT) \
                -X github.com/liqo-auth/liqo-auth/internal/version.date=$(DATE)
TOOLS        := $(GO) tool -modfile=hack/tools/go.mod
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with "context
# deadline exceeded" and no crasher when a -fuzztime duration ends under load
# (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
FUZZTIME     ?= 1000x
# The integration suite takes about 30 minutes on the 2-core CI machine, three tests at a
# time and the 32 that must run alone one by one (1779 s under .ci/run; 48 minutes when
# every test ran alone, 52 on an evening when the same machine ran everything two and a
# half times slower): the go test deadline leaves room for a much slower machine, and make
# test (about 35 minutes) stays well inside CI's 90.
TEST_TIMEOUT ?= 75m
# How many integration tests run at once (test/integration/doc.go): at 3 the two CPUs are
# about three quarters busy, at 1 a quarter.
TEST_PARALLEL ?= 3
DEMO_DIR     ?= .devclusters/demo
UNIT_PKGS     = $(shell $(GO) list ./... | grep -v /test/integration)
# FUZZ_TARGETS are package:Target pairs: every parser of untrusted input, every
# encoding that joins what it will split again, and every printer of what a peer wrote.
FUZZ_TARGETS  = $(addprefix ./pkg/authn:,FuzzParsePublicKey FuzzValidateCSR FuzzVerifyNonceSignature FuzzCheckNonce FuzzReadKubeconfig FuzzVerifyCertificate FuzzAcceptanceMessage) \
                ./pkg/cluster:FuzzDecodeCreatorList ./pkg/controllers/shared/status:FuzzStoredText \
                ./internal/cli:FuzzOutputEscapes ./internal/cmd/info:FuzzInfoEscapes ./internal/cmd/verify:FuzzVerifyEscapes
# MANAGER_IMAGE is the image the committed release manifest names; a release writes its own
# with the release tag (.goreleaser.yaml).
MANAGER_IMAGE ?= ghcr.io/liqo-auth/liqo-auth-manager:latest
CONTROLPLANE  = export LIQO_AUTH_CONTROLPLANE_DIR="$$(scripts/controlplane.sh)"
# NODE: as root, what a local node needs (Debian packages, kubelet, kube-proxy,
# kube-scheduler, pause), installed and built once; elsewhere the tests that need a node skip.
NODE          = if [ "$$(id -u)" = 0 ]; then export LIQO_AUTH_NODE_DIR="$$(scripts/node.sh)"; fi

##@ General

help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

build: ## Build bin/liqoctl, bin/liqo-auth-manager and bin/devclusters (static, as released).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/liqoctl ./cmd/liqo-auth-manager ./cmd/devclusters

controlplane: ## Build (once, cached) etcd, kube-apiserver and kube-controller-manager.
	scripts/controlplane.sh

node: ## Install (once, as root) containerd, runc, the CNI plugins; build kubelet, kube-proxy, kube-scheduler and pause.
	scripts/node.sh

clean: ## Stop the demo clusters and remove build outputs.
	-[ -x $(BIN)/devclusters ] && $(BIN)/devclusters down --dir $(DEMO_DIR)
	-[ -x $(BIN)/devclusters ] && $(BIN)/devclusters down --dir $(DEMO_DIR)-in-cluster
	rm -rf $(BIN) dist .devclusters

##@ Test

test: test-unit fuzz-short test-integration ## The whole suite: unit, short fuzzing, integration on real control planes.

test-unit: ## Unit tests (no cluster needed), under the race detector.
	$(GO) test -race -count=1 $(UNIT_PKGS)

test-integration: ## Integration tests on real control planes, and a real node as root (builds them on first use).
	$(CONTROLPLANE); $(NODE); $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) ./test/integration/...

fuzz-short: ## Run every fuzz target briefly (FUZZTIME executions each).
	for pt in $(FUZZ_TARGETS); do $(GO) test -run '^$$' -fuzz "^$${pt#*:}$$" -fuzztime $(FUZZTIME) "$${pt%%:*}" || exit 1; done

fuzz: ## Fuzz longer: make fuzz FUZZTIME=5m (or a count, 2000000x).
	$(MAKE) fuzz-short FUZZTIME=$(if $(filter 1000x,$(FUZZTIME)),500000x,$(FUZZTIME))

bench: build ## Benchmarks on local control planes; writes docs/benchmarks.md.
	$(CONTROLPLANE); $(GO) run ./hack/bench --out docs/benchmarks.md

trace: build ## The request timeline of one authenticate on both API servers (TRACE_MODE=managers|in-process|peering-user).
	$(CONTROLPLANE); $(GO) run ./hack/trace --bin $(BIN) --mode $(or $(TRACE_MODE),managers)

image: ## Build the liqo-auth-manager image (linux/amd64, linux/arm64) without Docker: PUSH=registry/repo:tag pushes it, else an OCI layout in dist/image.
	$(GO) run ./hack/image --version $(VERSION) --commit $(COMMIT) --date $(DATE) $(if $(PUSH),--push $(PUSH),--oci-layout dist/image)

demo-in-cluster: build image ## As root: the release manifest on a local cluster with a real node, authenticate against it, fail over.
	$(CONTROLPLANE); $(NODE); scripts/demo-in-cluster.sh $(BIN) $(DEMO_DIR)-in-cluster dist/image

demo: build ## Two local clusters: install, authenticate, use, unauthenticate, peer with kubectl apply only, clean up.
	$(CONTROLPLANE); scripts/demo.sh $(BIN) $(DEMO_DIR)

##@ Generate and verify

generate: ## Generate deepcopy code.
	$(TOOLS) controller-gen object paths=./pkg/apis/...

manifests: ## Generate the CRDs (v1beta1 stored, v1alpha1 served) and the release manifest deploy/liqo-auth.yaml.
	tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(TOOLS) controller-gen crd:crdVersions=v1 paths=./pkg/apis/... output:crd:artifacts:config=$$tmp; \
	rm -f pkg/apis/crds/*.yaml; $(GO) run ./hack/crdversions $$tmp pkg/apis/crds
	mkdir -p deploy; $(GO) run ./cmd/liqoctl install -o yaml --with-manager --manager-image $(MANAGER_IMAGE) 2>/dev/null > deploy/liqo-auth.yaml

docs: ## Generate docs/reference from the command tree.
	$(GO) run ./hack/docgen docs docs/reference

completions: ## Generate the shell completion scripts.
	$(GO) run ./hack/docgen completions completions

lint: ## gofmt, go vet and golangci-lint (.golangci.yml).
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt would change:"; echo "$$out"; exit 1; }
	$(GO) vet ./...
	cd hack/tools && $(GO) mod verify >/dev/null
	$(TOOLS) golangci-lint run ./...

verify: lint generate manifests docs completions ## Regenerate everything and fail on any difference.
	@git add -N . >/dev/null 2>&1 || true
	@git diff --exit-code --stat -- pkg/apis docs/reference completions deploy || { echo "generated files are stale: run make generate manifests docs completions and commit"; exit 1; }

.PHONY: help build controlplane node clean test test-unit test-integration fuzz-short fuzz bench trace image demo demo-in-cluster generate manifests docs completions lint verify
