# Stagecoach. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# The machines ship Go 1.26.8; the go command fetches this toolchain from the module proxy.
export GOTOOLCHAIN := go1.27.3

CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/stagecoach
TOOLS_DIR := $(CACHE_DIR)/tools
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)
GO_TEST_FLAGS ?= -race -count=1
# Each phase of `make test` is timed (wall and CPU) into this file; `make test` prints it at the end.
export STAGECOACH_PHASES ?= $(CACHE_DIR)/last-phases.tsv
PHASE := hack/phases.sh run
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

# The first thing `make demo` and `make test` do: every tool they need and room for the cache, or a
# stop in the first seconds naming the command to run (.ci/run uses the same script with --install).
.PHONY: prereqs
prereqs: ## Check Go, git, make, a C compiler, redis-server, Node.js, Chromium and free disk; as root, install what is missing from Debian (STAGECOACH_INSTALL_PREREQS=0 refuses).
	@$(PHASE) "prereqs (Go toolchain)" hack/prereqs.sh --for test

.PHONY: build
build: ## Build bin/stagecoach.
	go build -trimpath -ldflags "-X github.com/stagecoach-dev/stagecoach/internal/version.Version=$(VERSION)" -o bin/stagecoach ./cmd/stagecoach

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Write deepcopy code, CRDs and RBAC from the API types and markers.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=manifests/crds
	$(CONTROLLER_GEN) rbac:roleName=stagecoach-controller paths=./controller/... output:rbac:artifacts:config=manifests/rbac
	@# The Helm chart's copies (test/install checks them).
	cp manifests/crds/*.yaml charts/stagecoach/crds/
	cp manifests/rbac/role.yaml charts/stagecoach/files/clusterrole.yaml
	cp manifests/policies/application-guard.yaml manifests/policies/approval-guard.yaml manifests/policies/stage-status-guard.yaml manifests/policies/flux-guard.yaml manifests/policies/optional/stage-author-stamp.yaml charts/stagecoach/files/policies/
	cp manifests/monitoring/servicemonitor.yaml manifests/monitoring/prometheusrule.yaml manifests/monitoring/grafana-dashboard.json charts/stagecoach/files/monitoring/

GENERATED := api/v1alpha1/zz_generated.deepcopy.go manifests/crds manifests/rbac charts/stagecoach/crds charts/stagecoach/files

.PHONY: verify
verify: ## Fail when generated files, go.mod/go.sum or formatting are stale, or git tracks a compiled binary.
	@snapshot=$$(mktemp -d); trap 'rm -rf "$$snapshot"' EXIT; \
	for f in $(GENERATED); do mkdir -p "$$snapshot/$$(dirname $$f)"; cp -r "$$f" "$$snapshot/$$f"; done; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	for f in $(GENERATED); do diff -r "$$snapshot/$$f" "$$f" >/dev/null || { \
		diff -ru "$$snapshot/$$f" "$$f" | head -40; \
		echo "generated file $$f was stale: 'make generate' has rewritten it; review and commit the result"; exit 1; }; done
	@go mod tidy -diff >/dev/null || { go mod tidy -diff | head -40; echo "go.mod/go.sum are stale: run 'go mod tidy'"; exit 1; }
	@cd test/e2e && { go mod tidy -diff >/dev/null || { go mod tidy -diff | head -40; echo "test/e2e/go.mod/go.sum are stale: run 'go mod tidy' in test/e2e"; exit 1; }; }
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$unformatted" ]; then echo "$$unformatted"; echo "these files need 'gofmt -w'"; exit 1; fi
	@# Compiled programs belong in bin/ or the cache, never in git (.gitignore keeps them out).
	@large=$$(git ls-files -z 2>/dev/null | xargs -0 -r sh -c 'find "$$@" -maxdepth 0 -type f -size +1M 2>/dev/null' _); \
	for f in $$large; do grep -qI . "$$f" || { echo "$$f is a binary over 1 MB tracked by git (a build output?): 'git rm --cached $$f' and ignore it in .gitignore"; exit 1; }; done
	@echo "verify: generated code, go.mod, formatting and tracked files are up to date"

# -race: vet compiles every dependency to type-check, and with -race it compiles them as the
# suites' `go test -race` does, which then reuses them (a cold run compiled them once more for vet).
.PHONY: vet
vet: ## Run go vet (also on the end-to-end and browser modules).
	$(PHASE) "vet (compiles -race deps)" bash -ec 'go vet -race ./...; cd test/e2e && go vet -race ./...; cd ../ui && go vet -race ./...'

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, etcd and kubectl from the Go module proxy (cached outside the checkout).
	@$(PHASE) envtest-assets test/envbin/build.sh >/dev/null

.PHONY: test
test: phases-reset prereqs verify vet ui-release envtest-assets static-build ## The test command: verify generated code, vet, the UI extension's build, unit tests and release tarball, unit, envtest, cmp-server, browser and end-to-end suites (-race: see CMPSERVER_TEST); ends with the time of each phase.
	@mkdir -p $(CACHE_DIR)
	@# Two lanes side by side, because each mostly waits (API servers, engines, sleeps) where the
	@# other can work: the envtest lane (unit and envtest suites, then the browser suite) streams
	@# into the summary; the stack lane builds the end-to-end stack (niced: on a cold run it
	@# compiles in the envtest lane's waits), then runs the cmp-server and end-to-end suites into a
	@# file the summary reads when both lanes are done. Every suite runs even when one fails; one
	@# testsum prints one summary, and any failure fails the target (the lanes' status and pipefail).
	@# Each suite's phase includes its compile (go test -json says only how long the tests ran).
	{ rc=0; stack_json=$(CACHE_DIR)/last-stack-lane.json; stack_log=$(CACHE_DIR)/last-stack-build.log; \
	  ( lrc=0; \
	    if ! $(STACK_LANE) "stack build (Gitea: beside e2e)" nice -n 10 bash -c 'cd test/e2e && go run -race ./localstack/cmd build --without-gitea' >"$$stack_log" 2>&1; then \
	      tail -n 40 "$$stack_log" >&2; echo "the stack's build failed (its log: $$stack_log); cmp-server and end-to-end suites not run" >&2; exit 1; fi; \
	    grep '^stack: built' "$$stack_log" >&2 || true; \
	    $(STACK_LANE) "cmp-server suite" bash -c '$(CMPSERVER_TEST)' || lrc=1; \
	    $(STACK_LANE) "end-to-end suite" bash -c '$(E2E_TEST)' || lrc=1; \
	    exit $$lrc ) >"$$stack_json" & stack_lane=$$!; \
	  KUBEBUILDER_ASSETS="$$(test/envbin/build.sh)" $(ENVTEST_LANE) "unit + envtest suites" go test $(GO_TEST_FLAGS) -p 3 -timeout 30m -json $$($(ENVTEST_LANE_PACKAGES)) || rc=1; \
	  $(ENVTEST_LANE) "browser suite" bash -c '$(UI_TEST)' || rc=1; \
	  wait $$stack_lane || rc=1; cat "$$stack_json"; \
	  exit $$rc; } | tee $(CACHE_DIR)/last-test.json | go run ./test/testsum || status=$$?; \
	hack/phases.sh report; exit $${status:-0}

ENVTEST_LANE := STAGECOACH_PHASES_LANE="envtest lane" $(PHASE)
# The envtest lane's packages, the longest first: go test starts packages in the order it is given
# them, and these four alone take about 22 of the lane's 30 package-minutes (promotion 11,
# records 7); three at a time (-p 3, their API servers mostly wait), none is left to run alone at
# the end.
LONG_TEST_PACKAGES := ./test/integration/promotion ./test/integration/records ./hack/image ./test/install
ENVTEST_LANE_PACKAGES = long=$$(go list $(LONG_TEST_PACKAGES)) && echo "$$long" && go list ./... | grep -vxF "$$long"
STACK_LANE := STAGECOACH_PHASES_LANE="stack lane" $(PHASE)

# Stagecoach as the release image builds it (static, -trimpath): compiled once before the suites,
# so that the packaging tests (hack/image) and the stack's binary reuse it instead of compiling it
# at the same time in two lanes.
.PHONY: static-build
static-build:
	@$(PHASE) "stagecoach (static, as the image)" env CGO_ENABLED=0 go build -trimpath -o /dev/null ./cmd/stagecoach

# .ci/run times its own first steps (the install of prerequisites) and keeps them.
.PHONY: phases-reset
phases-reset:
	@[ -n "$$STAGECOACH_PHASES_KEEP" ] || hack/phases.sh reset

# The unit tests: every package whose tests start no API server (they do not import envtest), so a
# package joins or leaves by what it imports, not by a list here. The envtest suites, the cmp-server
# test and the end-to-end module are `make test`'s, and so are the packaging tests (hack/image and
# hack/release build the static binary and an image: a minute of their own, not a unit).
UNIT_PACKAGES = go list -test -f '{{if not .ForTest}}{{.ImportPath}} {{join .Deps " "}}{{end}}' ./... \
	| grep '\.test ' | grep -v ' sigs.k8s.io/controller-runtime/pkg/envtest' | cut -d' ' -f1 | sed 's/\.test$$//' \
	| grep -v '/hack/image$$\|/hack/release$$'

.PHONY: unit
unit: ## The fast loop: unit tests only (-race; no API server, no engines), well under a minute warm.
	@mkdir -p $(CACHE_DIR)
	pkgs=$$($(UNIT_PACKAGES)); test -n "$$pkgs"; \
	go test $(GO_TEST_FLAGS) -json $$pkgs | tee $(CACHE_DIR)/last-unit.json | go run ./test/testsum

# The cmp-server test lives in the module that builds the stack's Argo CD binary (Argo CD and its
# replace block stay out of go.mod), so `go test ./...` above does not reach it. It runs without
# -race and with the Argo CD build's flags (-trimpath, no DWARF) on purpose: this process holds only
# Argo CD's cmp-server and the test's driver, so it reuses the packages the Argo CD binary build compiled (a race build of
# Argo CD took 8 more minutes on a fresh machine), while the Stagecoach code under test runs in a
# plugin binary the test builds with -race.
CMPSERVER_TEST = (cd test/e2e/localstack/build/engines && go test -trimpath -gcflags=all=-dwarf=false -count=1 -json ./cmpserver/...)

# The browser test of the UI extension (headless Chromium, the bundle `make ui` built, the real
# API against envtest) is its own module (test/ui: chromedp stays out of go.mod).
UI_TEST = (assets="$$(test/envbin/build.sh)" && cd test/ui && KUBEBUILDER_ASSETS="$$assets" go test $(GO_TEST_FLAGS) -timeout 10m -json ./...)

# The end-to-end suite is its own module (test/e2e); its `go test -json` joins the same summary.
# Its TestPromotionTabInArgoCD installs the UI extension into argocd-server from the tarball
# `make ui-release` writes, as Argo CD's extension installer would; TestPromotionTabInArgoCDWebUI
# drives the tab in Argo CD's own web UI when `make argocd-ui` has built it, and skips saying so when not.
E2E_TEST = (cd test/e2e && go test $(GO_TEST_FLAGS) -timeout 30m -json ./...)

# The whole stack, Gitea included (`make test` builds it in its stack lane instead, Gitea beside the
# first scenarios). `go run -race`: the builder reuses the packages `make vet` compiled.
.PHONY: e2e-build
e2e-build: ## Build kube-apiserver, Argo CD, helm, Gitea and the Flux controllers from the Go module proxy (cached; ~35 min the first time).
	$(PHASE) "e2e-build (the stack)" bash -c 'cd test/e2e && go run -race ./localstack/cmd build'

.PHONY: e2e
e2e: e2e-build ui-release ## End-to-end scenarios on a local kube-apiserver with real Argo CD, Flux and the stagecoach controller.
	@mkdir -p $(CACHE_DIR)
	$(E2E_TEST) | tee $(CACHE_DIR)/last-e2e.json | go run ./test/testsum

# Argo CD v3.6.1's own web UI, for the end-to-end suite: its ui/ needs argo-ui at a GitHub commit
# that npm does not serve, so ARGO_UI_SRC names an argo-ui checkout or bare git directory, whose
# HEAD is built (about 2 minutes, 2.5 GB) into the cache outside the checkout, the commit recorded
# beside it. Once built, the stack's argocd-server serves it (--staticassets).
.PHONY: argocd-ui
argocd-ui: ## Build Argo CD's own web UI into the cache from an argo-ui checkout (ARGO_UI_SRC=<path>); the e2e suite then tests the Promotion tab in it.
	test/e2e/localstack/build/argocd-ui/build.sh $(ARGO_UI_SRC)

# ARGOCD_UI=1 also starts argocd-server with the UI extension (from `make ui-release`) and prints
# the URL and login of the Promotion tab; off by default, it adds the UI build and a release to wait for.
.PHONY: demo
demo: demo-prereqs $(if $(ARGOCD_UI),ui-release) ## Build (once), start a local Kubernetes with Argo CD and Flux, and walk releases through a three-stage pipeline (ARGOCD_UI=1: and the Promotion tab in argocd-server).
	cd test/e2e && go run ./cmd/demo $(if $(ARGOCD_UI),-argocd-ui)

# The demo needs neither Chromium nor (without ARGOCD_UI) Node.js.
.PHONY: demo-prereqs
demo-prereqs: ## What make demo needs from the machine (as prereqs, without the browser tests' tools).
	@hack/prereqs.sh --for demo$(if $(ARGOCD_UI),-ui)

.PHONY: localstack
localstack: e2e-build ## Start the local stack (kube-apiserver, Argo CD, Flux, registry, git, controller) until Ctrl-C.
	cd test/e2e && go run ./localstack/cmd up

.PHONY: test-cmpserver
test-cmpserver: ## Run the config management plugin through Argo CD's real cmp-server.
	$(CMPSERVER_TEST) | go run ./test/testsum

# The Argo CD UI extension (ui-extension/): TypeScript + React built by esbuild against Argo CD's
# React 19 globals. node_modules stays in ui-extension/ between runs: `npm ci` runs again only when
# package-lock.json changed since the last install (the stamp holds its checksum).
UI_DIR := ui-extension
UI_STAMP := $(UI_DIR)/node_modules/.stagecoach-lock.sha256

.PHONY: ui
ui: ## Build the Argo CD UI extension (npm ci, esbuild) and run its type check and unit tests (vitest).
	@cd $(UI_DIR) && if ! sha256sum --status -c $(CURDIR)/$(UI_STAMP) 2>/dev/null; then \
		$(CURDIR)/$(PHASE) "ui: npm ci" npm ci --no-audit --no-fund && sha256sum package-lock.json > $(CURDIR)/$(UI_STAMP); fi
	cd $(UI_DIR) && $(CURDIR)/$(PHASE) "ui: build and tests" bash -ec 'node build.mjs && npx tsc --noEmit && npx vitest run'

# The archive argocd-extension-installer expects: a top-level resources/ that it copies to
# /tmp/extensions/resources/, where argocd-server serves every extension*.js; the .sha256 file is
# what EXTENSION_CHECKSUM_URL points at. Same commit, same bytes (sorted, fixed owner and time).
UI_TARBALL = $(DIST)/ui/stagecoach-ui-extension.tar.gz

.PHONY: ui-release
ui-release: ui ## The UI extension release: dist/ui/stagecoach-ui-extension.tar.gz and its .sha256.
	@mkdir -p $(dir $(UI_TARBALL))
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH) \
		-C $(UI_DIR)/dist -cf - resources | gzip -9n > $(UI_TARBALL)
	@tar -tzf $(UI_TARBALL) | grep -qx 'resources/extension-stagecoach.js/extension-stagecoach.js' || { \
		echo "$(UI_TARBALL) lacks resources/extension-stagecoach.js/extension-stagecoach.js"; exit 1; }
	cd $(dir $(UI_TARBALL)) && sha256sum $(notdir $(UI_TARBALL)) > $(notdir $(UI_TARBALL)).sha256
	@cat $(UI_TARBALL).sha256

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS_DIR)
	@echo "installing controller-gen $(CONTROLLER_GEN_VERSION) from the Go module proxy"
	GOBIN=$(TOOLS_DIR)/gobin go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS_DIR)/gobin/controller-gen $@

# Every fuzz target of the module for FUZZTIME each, from its seeds and testdata/fuzz corpus.
FUZZ ?=
.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (10s) from its checked-in seed corpus (FUZZ=pattern picks targets; hack/fuzz.sh).
	hack/fuzz.sh $(FUZZ)

.PHONY: bench
bench: envtest-assets e2e-build ## Reaction latencies on a real API server (p50/p99); registry listing, signature verification, Git clone vs incremental fetch, a promotion's commit with the clone kept vs cloned each time, checks, the wave scheduler for 1,000 targets and Stage reconciles per target of a 200-Application rollout, signed records and the follower lag across two API servers; /metrics with 5,000 Stages; the plugin's render against kustomize build; 30 Applications in waves against Argo CD's RollingSync.
	KUBEBUILDER_ASSETS="$$(test/envbin/build.sh)" go run ./test/bench/reaction -promotions=100
	KUBEBUILDER_ASSETS="$$(test/envbin/build.sh)" go run ./test/bench/hooks -events=100
	go test -run '^$$' -bench 'List1000Tags|VerifyCold|VerifyCached' -benchmem ./internal/source/registry ./internal/verify
	go test -run '^$$' -bench GitFetch -benchmem ./internal/source/git
	go test -run '^$$' -bench Write -benchmem ./internal/gitwrite
	go test -run '^$$' -bench . -benchmem ./internal/check
	go test -run '^$$' -bench Schedule -benchmem ./internal/waves
	KUBEBUILDER_ASSETS="$$(test/envbin/build.sh)" STAGECOACH_FLEET_BENCH=1 go test -v -count=1 -run '^TestWavesReconcilesPerTarget$$' ./test/integration/promotion | grep -E 'reconcile|^(ok|FAIL|---)'
	go test -run '^$$' -bench 'Write|Audit10k|Follow10k' -benchmem ./internal/records
	KUBEBUILDER_ASSETS="$$(test/envbin/build.sh)" go test -v -count=1 -run '^TestFollowerLag$$' ./test/integration/records -args -records.lag-versions=5 -records.lag-interval=5s
	go test -run '^$$' -bench BenchmarkScrape -benchtime 3x -benchmem ./internal/metrics
	go run ./test/bench/cmp
	@# The latency a dependsOn level adds on the local stack, beside Flux's own dependsOn; 30
	@# Applications in 3 waves, Stagecoach's waves beside Argo CD's RollingSync (issue 17).
	@# A commit on main to prod Verified through dev (Flux), staging (Argo CD, a Job run) and prod,
	@# each step beside the engine's own applied->landed time in the same run (issue 39).
	@# Promotion by commit and by pull request (issue 40): gates passed -> Verified, beside the
	@# engine's own pushed-commit -> synced time in the same run.
	cd test/e2e && STAGECOACH_E2E_BENCH=1 go test -count=1 -timeout 30m -run 'TestDependencyLatencyPerLevel|TestFleetWavesVsRollingSync|TestConfigRepositoryDelivery|TestPromotionByCommitToAnEnvironmentBranch|TestPromotionByPullRequest' -v ./... | grep 'REPORT'

# The scale benchmark (issue 21) takes minutes, so it is not part of `make bench`: N Applications and
# N Stages, the built controller as its own process; BENCH_ARGS passes it extra flags, BENCH_ENV
# extra environment (BENCH_ENV=GOMEMLIMIT=180MiB: what the controller sets itself under a 200 MiB
# container limit).
N ?= 500
BENCH_ARGS ?=
BENCH_ENV ?=
.PHONY: bench-scale
bench-scale: envtest-assets ## make bench-scale N=5000: first sync, idle CPU/RSS, resync and 100 promotions at once, against the scale goals.
	@mkdir -p $(CACHE_DIR)/bench-scale
	go build -o $(CACHE_DIR)/bench-scale/stagecoach ./cmd/stagecoach
	KUBEBUILDER_ASSETS="$$(test/envbin/build.sh)" go run ./test/bench/scale -n $(N) -controller $(CACHE_DIR)/bench-scale/stagecoach -logs $(CACHE_DIR)/bench-scale -args "$(BENCH_ARGS)" -env "$(BENCH_ENV)"

# Container image and release files, without Docker (hack/image, hack/release). Every timestamp in
# the image is the commit's time, so the same commit gives the same digest.
DIST ?= dist
IMAGE ?= ghcr.io/stagecoach-dev/stagecoach
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

.PHONY: image
image: ## OCI image of the static binary (non-root, CA certificates) in dist/image and dist/stagecoach-image.tar; prints its digest.
	go run ./hack/image build -version $(VERSION) -revision $(REVISION) -created $(SOURCE_DATE_EPOCH) -out $(DIST)

.PHONY: image-push
image-push: image ## Push the image: make image-push REGISTRY=registry.example/team (as REGISTRY/stagecoach:VERSION).
	@test -n "$(REGISTRY)" || { echo "set REGISTRY, e.g. make image-push REGISTRY=ghcr.io/you"; exit 1; }
	go run ./hack/image push -layout $(DIST)/image -signature $(DIST)/image-signature -to $(REGISTRY)/stagecoach:$(VERSION)

# Keyless (issue 31): with an OIDC token in SIGSTORE_ID_TOKEN (or COSIGN_IDENTITY_TOKEN), make release
# signs the image keyless instead of with COSIGN_KEY: `cosign sign` (cosign v3 on PATH) gets a
# short-lived Fulcio certificate naming the token's identity (in GitHub Actions, the workflow at its
# ref), logs the signature in Rekor and attaches a Sigstore bundle to the image as an OCI referrer.
# A keyless signature lives in the registry, so the image is pushed first (REGISTRY is required;
# as make image-push) and signed by digest. Stages then trust the identity, not a key:
# verify.matchOIDCIdentity [{issuer, subject}]. Without a token nothing changes. The token is read
# by the shell and handed to cosign in its environment (SIGSTORE_ID_TOKEN), never expanded by make
# nor put on a command line, so it is neither echoed nor visible in the process list.
.PHONY: release
release: image ui-release ## make release VERSION=v0.x.y [COSIGN_KEY=cosign.key COSIGN_PASSWORD=... | SIGSTORE_ID_TOKEN=<OIDC token> REGISTRY=...]: install.yaml (image by digest), crds.yaml, install-argocd/-flux.yaml, checksums, the image's cosign signature (keyless with a token) and the UI extension tarball in dist/.
	go run ./hack/release -version $(VERSION) -image $(if $(REGISTRY),$(REGISTRY)/stagecoach,$(IMAGE)) -dist $(DIST) -cosign-key "$(if $(or $(SIGSTORE_ID_TOKEN),$(COSIGN_IDENTITY_TOKEN)),,$(COSIGN_KEY))"
	@token="$${SIGSTORE_ID_TOKEN:-$$COSIGN_IDENTITY_TOKEN}"; [ -n "$$token" ] || exit 0; \
	test -n "$(REGISTRY)" || { echo "keyless signing pushes the image first: set REGISTRY (make release REGISTRY=ghcr.io/you ...)"; exit 1; }; \
	command -v cosign >/dev/null || { echo "keyless signing runs cosign v3: install it (https://docs.sigstore.dev/cosign/system_config/installation/)"; exit 1; }; \
	ref=$$(go run ./hack/image push -layout $(DIST)/image -signature $(DIST)/image-signature -to $(REGISTRY)/stagecoach:$(VERSION) | head -n 1) && \
	test -n "$$ref" && \
	SIGSTORE_ID_TOKEN="$$token" cosign sign --yes "$$ref" && \
	echo "$$ref signed keyless (a Sigstore bundle referrer; check: cosign verify $$ref --certificate-identity-regexp ... --certificate-oidc-issuer ...)"
