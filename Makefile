# Nestlet. Every target delegates to a script in hack/; `make` lists them.
SHELL := /usr/bin/env bash

.DEFAULT_GOAL := help

## help: list the targets
.PHONY: help
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST) | column -t -s ':' | sed -e 's/^/  /'

## build: build every package, and the binaries of cmd/ into _output/bin
.PHONY: build
build:
	hack/build.sh

## binaries: build the pinned etcd, Kubernetes and kwok binaries into the cache (~/.cache/nestlet)
.PHONY: binaries
binaries:
	hack/install-binaries.sh

## node-runtime: build the pinned node runtime of real leaves (kubelet, containerd, runc, CNI plugins) and their images into the cache
.PHONY: node-runtime
node-runtime:
	hack/install-node-runtime.sh

## images: Nestlet's image as an OCI archive, without Docker (_output/images/nestlet.tar; reproducible, non-root)
.PHONY: images
images:
	hack/images.sh

## test: unit, integration and end-to-end tests against real local control planes
.PHONY: test
test: binaries
	hack/test.sh

## test-unit: unit tests only (no control planes)
.PHONY: test-unit
test-unit:
	hack/test.sh unit

## bench: every benchmark against real local control planes, one table of figures (BENCH="scale faults" runs only those packages)
.PHONY: bench
bench: binaries
	hack/bench.sh

## conformance: the Kubernetes conformance suite against the root of a local tree and one leaf directly, in one run; writes docs/conformance.md (the first run builds the suite, ~15 min)
.PHONY: conformance
conformance: binaries
	hack/conformance.sh

## demo: a local tree of real clusters (root; east, west; four leaves with a real node each), Deployments by region and a Service called across regions at the root, the tree
.PHONY: demo
demo:
	hack/demo.sh

## demo-down: stop everything make demo started and remove its directory
.PHONY: demo-down
demo-down:
	hack/demo.sh down

## lint: golangci-lint v2 (pinned, built from the Go module proxy)
.PHONY: lint
lint:
	hack/lint.sh

## verify: gofmt, go vet, go.mod tidiness, the pinned Kubernetes replace block, the layout (hack/layoutcheck)
.PHONY: verify
verify:
	hack/verify.sh
