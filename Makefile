# digestpin build, test and tooling. `make test` is what CI runs.

SHELL := /bin/bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c

VERSION := $(shell sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' plugin.yaml)
BIN := bin/digestpin
# The full build, which digestpin runs for template, install, upgrade and
# argocd refresh (docs/install.md): they need Helm's engine and
# Kubernetes' client, which BIN (the module's root main) leaves out to start
# faster and in less memory on every render.
HELM_BIN := bin/digestpin-helm
# The tools the tests and lint run are built once per version into a
# folder outside the clone (TOOLS), so that a fresh clone on the same
# machine (CI) reuses them instead of building Helm twice, kustomize,
# argocd-cmp-server and golangci-lint again (minutes each run).
TOOLS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/digestpin-test
HELM3_VERSION := v3.22.0
HELM4_VERSION := v4.3.1
HELM3 := $(TOOLS)/helm-$(HELM3_VERSION)/helm
HELM4 := $(TOOLS)/helm-$(HELM4_VERSION)/helm
KUSTOMIZE_VERSION := v5.8.1
KUSTOMIZE := $(TOOLS)/kustomize-$(KUSTOMIZE_VERSION)/kustomize
GOLANGCI_VERSION := v2.15.0
GOLANGCI := $(TOOLS)/golangci-lint-$(GOLANGCI_VERSION)/golangci-lint
LDFLAGS := -X main.version=$(VERSION)
# Argo CD's argocd-cmp-server, for the plugin's tests in e2e/cmpserver; the
# version is the one that module requires.
ARGOCD_VERSION := $(shell sed -n 's|^[[:space:]]*github.com/argoproj/argo-cd/v3 \(v[^ ]*\)$$|\1|p' e2e/cmpserver/go.mod)
# Its folder is named by that version and a hash of what else decides the
# build (the module's go.mod and go.sum, the command's source), which a
# change in the clone may change without a new Argo CD version.
ARGOCD_CMP_SERVER_KEY := $(shell cat e2e/cmpserver/go.mod e2e/cmpserver/go.sum e2e/cmpserver/cmd/argocd-cmp-server/*.go | sha256sum | cut -c1-12)
ARGOCD_CMP_SERVER := $(TOOLS)/argocd-cmp-server-$(ARGOCD_VERSION)-$(ARGOCD_CMP_SERVER_KEY)/argocd-cmp-server
# The Kubernetes control plane of the rollout tests (e2e/kube), built from
# e2e/kube/tools at the version its go.mod pins (minutes on a cold Go
# cache), into a folder outside the clone named by that version, so that a
# fresh clone on the same machine (CI) reuses it.
KUBE_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*$$|\1|p' e2e/kube/tools/go.mod)
KUBE_TOOLS := $(TOOLS)/kube-$(KUBE_VERSION)
# Argo CD itself, for the tests under a running Argo CD (e2e/argocd): the
# multi-call binary of the argo-cd module e2e/argocd/tools requires (the
# version e2e/cmpserver pins; a test checks they agree), built once (minutes on a
# cold Go cache) into a folder outside the clone named by that version,
# and linked under the names of the commands the tests run.
ARGOCD_TOOLS := $(TOOLS)/argocd-$(ARGOCD_VERSION)
# Flux's source-controller, kustomize-controller and helm-controller, for
# the tests of the Flux routes (e2e/flux): built from e2e/flux/tools at the
# versions its go.mod pins (about 3 minutes of wall time on two cores with
# a warm module cache, a minute to link the three on a warm build cache),
# into a folder outside the clone named by a hash of that go.mod and
# go.sum (which carry the versions and the replace directives that decide
# the build), so that a fresh clone on the same machine (CI) reuses it.
FLUX_KEY := $(shell cat e2e/flux/tools/go.mod e2e/flux/tools/go.sum | sha256sum | cut -c1-12)
FLUX_TOOLS := $(TOOLS)/flux-$(FLUX_KEY)
# A private Sigstore for the keyless signing test of e2e/flux: Fulcio,
# Rekor, Trillian's log server and signer, and TesseraCT, built from
# e2e/flux/sigstore at the versions its go.mod pins, into a folder named
# by a hash of that go.mod and go.sum, as the controllers are.
SIGSTORE_KEY := $(shell cat e2e/flux/sigstore/go.mod e2e/flux/sigstore/go.sum | sha256sum | cut -c1-12)
SIGSTORE_TOOLS := $(TOOLS)/sigstore-$(SIGSTORE_KEY)
# The cosign CLI, a real client whose signatures the verification tests
# read (e2e/verify_cosign_test.go): a released version, built once (minutes
# on a cold Go cache) into a folder outside the clone named by that version.
COSIGN_VERSION := v3.1.3
COSIGN := $(TOOLS)/cosign-$(COSIGN_VERSION)/cosign

# Tests that drive the real binary and Helm CLIs find them here.
export DIGESTPIN_TEST_BIN := $(CURDIR)/$(BIN)
export DIGESTPIN_TEST_HELM3 := $(HELM3)
export DIGESTPIN_TEST_HELM4 := $(HELM4)
export DIGESTPIN_TEST_KUSTOMIZE := $(KUSTOMIZE)
export DIGESTPIN_TEST_ARGOCD_CMP_SERVER := $(ARGOCD_CMP_SERVER)
export DIGESTPIN_TEST_KUBE := $(KUBE_TOOLS)
export DIGESTPIN_TEST_ARGOCD := $(ARGOCD_TOOLS)
export DIGESTPIN_TEST_COSIGN := $(COSIGN)
export DIGESTPIN_TEST_FLUX := $(FLUX_TOOLS)
export DIGESTPIN_TEST_SIGSTORE := $(SIGSTORE_TOOLS)

.PHONY: all build build-slim tools test test-quick soak test-kube test-argocd test-flux run-helmsdk run-cmpserver run-kube run-argocd run-flux argocd-tools kube-tools flux-tools sigstore-tools cosign demo helm argocd-cmp-server lint lint-mod bench fuzz clean install release dist

all: build

# Built as scripts/release.sh builds a release (CGO_ENABLED=0, -trimpath,
# -s -w), so that the tests and make bench run the binaries users get:
# BIN without Helm's engine, HELM_BIN, the full build, beside it.
# build-slim builds BIN alone, all that make demo runs: minutes less on a
# cold Go cache than Helm's engine too. GOFLAGS_BUILD is the one set of
# flags every build of the binaries uses (the Helm 4 plugin's checkout
# build too, scripts/install-binary.sh), so that they share Go's cache.
GOFLAGS_BUILD := -trimpath -ldflags "-s -w $(LDFLAGS)"
build: build-slim
	CGO_ENABLED=0 go build $(GOFLAGS_BUILD) -o $(HELM_BIN) ./cmd/digestpin-helm

build-slim:
	CGO_ENABLED=0 go build $(GOFLAGS_BUILD) -o $(BIN) .

# The main module's packages, the e2e package first: go test runs the
# packages two at a time in the order given, and e2e takes the longest
# (most of its time the processes it runs), so it starts before the rest
# rather than after the first two.
TEST_PACKAGES := ./e2e ./...

# The Helm SDK example is its own module; without -race it reuses most of
# the Helm CLI builds, where -race would compile Helm and Kubernetes again
# (minutes). Our own code in it is race-tested in ./postrender.
# e2e/cmpserver (the Argo CD plugin under argocd-cmp-server) is one too, and
# runs without -race for the same reason: it holds test code only. Both
# get go vet here, where their builds are cached (golangci-lint on them
# would add minutes to CI; make lint covers the main module).
# e2e/kube (the rollouts on a real control plane) is a third; test-kube
# runs it alone. e2e/argocd (the plugin under a running Argo CD) is a
# fourth; test-argocd runs it alone. e2e/flux (the Flux routes under
# Flux's controllers) is a fifth; test-flux runs it alone. make test runs
# the five at once (run-helmsdk, run-cmpserver, run-kube, run-argocd,
# run-flux), after the main module: e2e/kube, e2e/argocd and e2e/flux
# each start a control plane of their own on ports picked free and picked
# again when another process takes one first, and all five mostly wait on
# the processes they run, so together
# they take about 3 minutes, not 6 one after the other. --output-sync
# prints each suite's output whole, as it ends; a failure of any fails the
# target once all have ended.
# CI=true make test took 7 min 41 s on the project's shared 2-core CI
# machine (GOFLAGS=-count=1, warm build cache, load 2-4): the main module
# 4 min 26 s (e2e 224-240 s, its longest TestRelease 59 s,
# TestGoInstallVersion 50 s, TestPluginInstallFromURL 50 s, which waits for
# the same release; renderer 60-65 s and detgen 43-46 s under -race), then
# the four at once 3 min 24 s (e2e/argocd 196 s, e2e/kube 139 s,
# e2e/cmpserver 31 s); the two control planes take about 420 MiB each, 1.7
# GiB in use a minute into both.
# The tools it runs are built two at a time (each is mostly a link on a
# warm Go cache, which uses one core), and not at all when they are there.
TEST_TOOLS := helm $(KUSTOMIZE) argocd-cmp-server kube-tools argocd-tools flux-tools sigstore-tools cosign
test: build
	$(MAKE) --no-print-directory -j2 $(TEST_TOOLS)
	scripts/test-deps.sh
	go test -race -cover -timeout 30m $(TEST_PACKAGES)
	$(MAKE) --no-print-directory -j5 --output-sync=target run-helmsdk run-cmpserver run-kube run-argocd run-flux

# The inner loop: the unit tests and the fast end-to-end cases of the main
# module, with -race, in a few minutes. -short leaves out the tests marked
# testfiles.Slow (those that build a release or go install the module, the
# Helm CLI and plugin installs, the CI templates, the renderer's largest
# inputs, the minute of TestSoak); the nested modules (argocd-cmp-server,
# a control plane, Argo CD, the Helm SDK example) are make test's. make test and CI run
# everything, without -short.
# On the shared 2-core CI machine (GOFLAGS=-count=1, warm build cache, load
# 1-4) it took 2 min 1 s and 2 min 7 s (202 and 220 CPU-seconds). By
# package (two at a time): e2e 83-84 s, main 33-35 s, detgen 30-31 s,
# renderer and resolve 10-11 s, internal/redisstore 4.7-5.8 s, verify
# 2.5-2.7 s. Bound by CPU: e2e takes 63-90 s for 100-117 CPU-seconds,
# nearly all in the binaries, Helm, git and cosign it runs (its own process
# 18). Serial still: main's t.Setenv tests, among them digestpin
# install/upgrade on Helm's SDK in-process (about 20 s: each render derives
# two RSA keys and a bcrypt hash, which -race slows twelvefold, 0.74 s a
# hash), and each package's race-detector second at exit.
test-quick: build
	$(MAKE) --no-print-directory -j2 helm $(KUSTOMIZE) cosign
	scripts/test-deps.sh
	go test -race -short -timeout 10m $(TEST_PACKAGES)

# The soak of issue 38 (TestSoak, e2e/soak_test.go): 8 digestpin
# processes render in a loop, sharing one Redis, while the loopback
# registry flaps every few seconds (503, 429, refused, hung, and now and
# then an outage past --stale-if-error) and tags move; it checks that no
# render fails for an image resolved within the stale bound, none serves
# an answer older than it, and every move is picked up within the TTL of
# the registry coming back, and logs the counts. make test runs it for a
# minute (about 25 CPU-seconds); make soak for SOAKTIME. One 10-minute run
# (2-core machine, load 2-6; TTL 2s, --stale-if-error 6s): 9044 renders,
# 498 failed, each for an image older than the bound (8 outages of 12 s),
# none within it; 2886 stale answers in 767 renders, the oldest 8s; 44 of
# 56 moves checkable, all picked up, the last old pin 2.4 s after a hang
# ended; 2461 registry requests, 0.27 a render.
SOAKTIME ?= 10m
soak: build-slim
	scripts/test-deps.sh
	DIGESTPIN_SOAK_TIME=$(SOAKTIME) go test -count=1 -timeout 0 -run '^TestSoak$$' -v ./e2e

# The rollout tests in local directory mode (never cached; the figures
# they print show), with -race: the module holds test code and the
# control plane harness (controlplane, which has no tests of its own and
# is vetted with the rest), and small dependencies.
TEST_KUBE = cd e2e/kube && go vet ./... && go test -race -count=1 -timeout 20m
test-kube: build helm $(KUSTOMIZE) kube-tools
	$(TEST_KUBE)

# The nested modules' suites alone, without their tools' targets: for
# make test, which has made those already and runs the four at once.
run-helmsdk:
	cd examples/helmsdk && go vet ./... && go test ./...

run-cmpserver:
	cd e2e/cmpserver && go vet ./... && go test ./...

run-kube:
	$(TEST_KUBE)

run-argocd:
	$(TEST_ARGOCD)

run-flux:
	$(TEST_FLUX)

# The scenarios under a running Argo CD, never cached (the figures they
# print show), with -race: the module's own packages are test code and
# the harness, which import none of Argo CD.
TEST_ARGOCD = cd e2e/argocd && go vet ./... && go test -race -count=1 -timeout 30m
test-argocd: build helm kube-tools argocd-tools
	$(TEST_ARGOCD)

# The Flux routes under Flux's controllers, never cached, with -race: as
# e2e/argocd, the module's packages are test code and the harness, which
# import none of Flux.
TEST_FLUX = cd e2e/flux && go vet ./... && go test -race -count=1 -timeout 20m
test-flux: build helm $(KUSTOMIZE) kube-tools flux-tools sigstore-tools cosign
	scripts/test-deps.sh
	$(TEST_FLUX)

demo: build-slim
	go run ./internal/cmd/demo -- $(BIN) testdata/example.yaml

helm: $(HELM3) $(HELM4)

# tools builds every tool the tests, lint and bench run, into TOOLS.
tools: $(TEST_TOOLS) $(GOLANGCI)

# go-install builds the Go command $(1) (package@version) into a folder of
# its own beside the target and moves the binary into place, so that an
# interrupted build leaves no target behind and two clones building at
# once never run a half-written one. It makes the tools folder first: on a
# machine that never built a tool, nothing else has.
define go-install
	mkdir -p $(dir $(@D))
	tmp=$$(mktemp -d $(@D).tmp.XXXXXX) && GOBIN=$$tmp go install $(1) && mkdir -p $(@D) && mv $$tmp/$(@F) $@ && rmdir $$tmp
endef

$(HELM3):
	$(call go-install,helm.sh/helm/v3/cmd/helm@$(HELM3_VERSION))

$(HELM4):
	$(call go-install,helm.sh/helm/v4/cmd/helm@$(HELM4_VERSION))

argocd-cmp-server: $(ARGOCD_CMP_SERVER)

$(ARGOCD_CMP_SERVER):
	mkdir -p $(@D)
	cd e2e/cmpserver && go build -o $@.tmp ./cmd/argocd-cmp-server
	mv $@.tmp $@

argocd-tools: $(ARGOCD_TOOLS)/argocd-application-controller

# The link made last is the target, so that an interrupted build is
# finished by the next make.
$(ARGOCD_TOOLS)/argocd-application-controller:
	mkdir -p $(ARGOCD_TOOLS)
	cd e2e/argocd/tools && go build -ldflags "-X github.com/argoproj/argo-cd/v3/common.version=$(ARGOCD_VERSION:v%=%)" \
		-o $(ARGOCD_TOOLS)/argocd.tmp github.com/argoproj/argo-cd/v3/cmd
	mv $(ARGOCD_TOOLS)/argocd.tmp $(ARGOCD_TOOLS)/argocd
	ln -sf argocd $(ARGOCD_TOOLS)/argocd-repo-server
	ln -sf argocd $(ARGOCD_TOOLS)/argocd-cmp-server
	ln -sf argocd $@

kube-tools: $(KUBE_TOOLS)/kubectl

flux-tools: $(FLUX_TOOLS)/helm-controller

# Built into a folder beside FLUX_TOOLS and renamed into place, so that an
# interrupted build leaves no half-built folder; helm-controller, the
# target, is built with the other two.
$(FLUX_TOOLS)/helm-controller:
	mkdir -p $(TOOLS)
	tmp=$$(mktemp -d $(FLUX_TOOLS).tmp.XXXXXX) && \
	  (cd e2e/flux/tools && go build -trimpath -o $$tmp/ github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller github.com/fluxcd/helm-controller) && \
	  chmod 0755 $$tmp && rm -rf $(FLUX_TOOLS) && mv $$tmp $(FLUX_TOOLS)

sigstore-tools: $(SIGSTORE_TOOLS)/fulcio

# As flux-tools: built beside the target's folder and renamed into place;
# fulcio, the target, is built with the others.
$(SIGSTORE_TOOLS)/fulcio:
	mkdir -p $(TOOLS)
	tmp=$$(mktemp -d $(SIGSTORE_TOOLS).tmp.XXXXXX) && \
	  (cd e2e/flux/sigstore && go build -trimpath -o $$tmp/ github.com/sigstore/fulcio github.com/sigstore/rekor/cmd/rekor-server github.com/google/trillian/cmd/trillian_log_server github.com/google/trillian/cmd/trillian_log_signer github.com/transparency-dev/tesseract/cmd/tesseract/posix) && \
	  chmod 0755 $$tmp && rm -rf $(SIGSTORE_TOOLS) && mv $$tmp $(SIGSTORE_TOOLS)

cosign: $(COSIGN)

# Built into a folder beside the target and moved into place, so that an
# interrupted build leaves no target behind.
$(COSIGN):
	$(call go-install,github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION))

$(KUBE_TOOLS)/kubectl:
	scripts/kube-tools.sh $(KUBE_TOOLS)

# Benchmarks: the renderer and resolver in-process, then the whole binary
# on growing streams and against a loopback registry with 50 ms latency,
# each figure also as a ratio to the BASELINE binary's, measured in the
# same run: BASELINE=BIN names one; by default it is built from
# BASELINE_REF, the newest release tag (v*) before HEAD, or without one the
# commit where this branch left main. KBLD=BIN adds ratios to Carvel kbld
# (not installed here).
# benchredis: 1, 4 and 16 processes at once without a cache, a cache folder each, one Redis.
# benchtemplate: digestpin template against helm template | digestpin (Helm 4 CLI) on a large chart;
# and the key cache: 40 genPrivateKey "rsa" under helm template, digestpin template cold and warm.
BASELINE_REF ?= $(shell git describe --tags --abbrev=0 --match 'v*' HEAD 2>/dev/null || git merge-base HEAD main 2>/dev/null || git rev-parse HEAD)
BASELINE ?= bin/baseline-$(BASELINE_REF)/digestpin
KBLD ?=
bench: build $(HELM4) $(BASELINE)
	go test -run '^$$' -bench . -benchmem -benchtime 3x ./renderer/ ./resolve/
	go run ./internal/cmd/bench -baseline $(BASELINE) $(if $(KBLD),-kbld $(KBLD)) $(BIN)
	go run ./internal/cmd/benchredis $(BIN)
	go run ./internal/cmd/benchtemplate $(BIN) $(HELM4)

# The baseline binary of a commit, built from its tree as the post-renderer
# of a release is built (CGO_ENABLED=0, -trimpath, -s -w). -tags nohelm is
# for trees of 0.1.0, whose root built the slim digestpin only with it; a
# later tree's root is always the slim build, and a tree from before the
# split into digestpin and digestpin-helm builds its one binary.
bin/baseline-%/digestpin:
	rm -rf $(@D)/src && mkdir -p $(@D)/src
	git archive $* | tar -x -C $(@D)/src
	cd $(@D)/src && CGO_ENABLED=0 go build -trimpath -tags nohelm -ldflags "-s -w" -o $(CURDIR)/$@ .
	rm -rf $(@D)/src

# Every fuzz target briefly (FUZZTIME each, default 8s: 23 targets, about 4 minutes); CI runs this too.
fuzz:
	FUZZTIME=$${FUZZTIME:-8s} scripts/fuzz.sh

# kustomize renders kustomizations in the Argo CD plugin's tests.
$(KUSTOMIZE):
	$(call go-install,sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION))

# lint-mod checks that every module in the tree is tidy: each go.mod git
# tracks, so that a new module is checked without a change here. go mod
# tidy -diff prints what tidy would change and fails; every module is
# checked, and each that fails is named. It may download modules the
# builds never needed (test dependencies of dependencies): a minute or
# two on a cold module cache, 4 to 7 s for the seven modules on a warm
# one (a busy 2-core machine). e2e/flux/tools is checked with -e: tidy
# wants the modules of source-controller's own tests too, and the module
# proxy refuses one of them (github.com/fluxcd/pkg/helmtestserver v0.40.2,
# 403), which the build never needs; e2e/flux/sigstore likewise (Fulcio's
# tests want chainguard.dev/sdk v0.1.103, refused).
lint-mod:
	@failed=; for mod in $$(git ls-files go.mod '*/go.mod'); do \
	  dir=$$(dirname "$$mod"); flags=; \
	  case "$$dir" in e2e/flux/tools|e2e/flux/sigstore) flags=-e;; esac; \
	  (cd "$$dir" && go mod tidy $$flags -diff) || failed="$$failed $$mod"; \
	done; \
	if [ -n "$$failed" ]; then echo "lint: not tidy (run go mod tidy in its folder):$$failed" >&2; exit 1; fi

lint: $(GOLANGCI) lint-mod
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	go vet ./...
	$(GOLANGCI) run ./...
	@command -v shellcheck >/dev/null || scripts/test-deps.sh
	shellcheck .ci/run $$(git ls-files '*.sh')

$(GOLANGCI):
	$(call go-install,github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION))

# install copies the binaries and the Helm 3 plugin into Helm's plugin folder.
# HELM names the Helm CLI; for Helm 4, install the post-renderer plugin
# instead (see the README).
HELM ?= helm
install: build
	dir="$$($(HELM) env HELM_PLUGINS | cut -d: -f1)/digestpin"; \
	mkdir -p "$$dir/bin" "$$dir/scripts"; \
	cp $(BIN) $(HELM_BIN) "$$dir/bin/"; cp plugin.yaml "$$dir/"; cp scripts/install-binary.sh "$$dir/scripts/"; \
	echo "installed the digestpin plugin into $$dir"

# release writes the release files of the version in plugin.yaml into DIST
# (default dist/) for each OS/ARCH of PLATFORMS (default linux, darwin and
# windows on amd64 and arm64): the binary archives, the Helm 3 plugin
# archives, the Helm 4 post-renderer plugin package and SHA256SUMS; see
# scripts/release.sh and the README. To sign the Helm 4 package, pass e.g.
# HELM_SIGN='--key "Your Name" --keyring ~/.gnupg/secring.gpg'. dist is
# the same target under its old name.
DIST ?= dist
release: $(HELM4)
	HELM=$(HELM4) DIST=$(DIST) $(if $(PLATFORMS),PLATFORMS="$(PLATFORMS)") scripts/release.sh

dist: release

clean:
	rm -rf bin dist
