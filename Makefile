# digestpin build, test and tooling. `make test` is what CI runs.

SHELL := /bin/bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c

VERSION := $(shell sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' plugin.yaml)
BIN := bin/digestpin
CACHE := $(CURDIR)/.cache
HELM3_VERSION := v3.22.0
HELM4_VERSION := v4.3.1
HELM3 := $(CACHE)/helm-$(HELM3_VERSION)/helm
HELM4 := $(CACHE)/helm-$(HELM4_VERSION)/helm
LDFLAGS := -X main.version=$(VERSION)

# Tests that drive the real binary and Helm CLIs find them here.
export DIGESTPIN_TEST_BIN := $(CURDIR)/$(BIN)
export DIGESTPIN_TEST_HELM3 := $(HELM3)
export DIGESTPIN_TEST_HELM4 := $(HELM4)

.PHONY: all build test demo helm lint bench clean

all: build

build:
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) .

test: build helm
	go test -race -cover ./...

demo: build
	go run ./internal/cmd/demo -- $(BIN) testdata/example.yaml

helm: $(HELM3) $(HELM4)

$(HELM3):
	GOBIN=$(dir $@) go install helm.sh/helm/v3/cmd/helm@$(HELM3_VERSION)

$(HELM4):
	GOBIN=$(dir $@) go install helm.sh/helm/v4/cmd/helm@$(HELM4_VERSION)

# Benchmarks: the renderer and resolver in-process, then the whole binary
# on growing streams and against a loopback registry with 50 ms latency.
bench: build
	go test -run '^$$' -bench . -benchmem -benchtime 3x ./renderer/ ./resolve/
	go run ./internal/cmd/bench $(BIN)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	go vet ./...

clean:
	rm -rf bin dist
