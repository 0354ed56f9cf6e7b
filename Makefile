# cmsync — make help lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

BIN ?= bin
IMG ?= ghcr.io/cmsync/cmsync:dev
# Pinned control-plane versions; the binaries are cached outside the clone, keyed by them.
export K8S_VERSION ?= v1.37.1
export ETCD_VERSION ?= v3.7.3
# The oldest Kubernetes cmsync supports (docs/support.md): make test-oldest runs the
# integration and end-to-end suites against it.
K8S_OLDEST_VERSION ?= v1.30.14

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the cmsync binary and the kubectl plugin (kubectl-cmsync) into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/cmsync .
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/kubectl-cmsync ./cmd/kubectl-cmsync

.PHONY: bench-tool
bench-tool: build ## Build the bench (hack/bench, in the workshop's own module) into bin/bench.
	go build -C hack -o $(abspath $(BIN))/bench ./bench

# The workshop (hack/: the bench, the image and cluster tools) is a Go module of its
# own, so that the product's go.mod lists only what the product and its tests import.
BENCH = $(BIN)/bench

# The release path: every step is a target, run by the release workflow against
# ghcr.io and by make test-release against a registry of its own on loopback.
KO = $(shell hack/tool.sh ko)
COSIGN = $(shell hack/tool.sh cosign)
REGISTRY ?= ghcr.io/cmsync
IMAGE_TAG ?= dev
BASE_IMAGE ?= $(REGISTRY)/base:nonroot
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
CHART_VERSION ?= 0.1.0

.PHONY: base-image
base-image: ## Build the non-root base image (both platforms, fixed timestamps) and push it to BASE_IMAGE.
	go run -C hack ./baseimage -ref $(BASE_IMAGE)

.PHONY: image
image: ## ko: build cmsync for IMAGE_PLATFORMS on BASE_IMAGE with an SPDX SBOM and push REGISTRY/cmsync:IMAGE_TAG; prints the digest reference.
	KO_DOCKER_REPO=$(REGISTRY)/cmsync KO_DEFAULTBASEIMAGE=$(BASE_IMAGE) $(KO) build --bare --platform=$(IMAGE_PLATFORMS) --sbom=spdx --tags=$(IMAGE_TAG) .

# make install: this checkout onto the cluster of the current kubeconfig, through a
# registry the user names (the cluster must be able to pull from it). REGISTRY has a
# default for the release targets above (ghcr.io/cmsync, which users cannot push to), so
# install takes it only from the command line or the environment.
INSTALL_NAMESPACE ?= cmsync-system
KUBECTL ?= kubectl
HELM_ARGS ?=
INSTALL_WAIT ?= --wait --timeout 5m
export INSTALL_NAMESPACE KUBECTL HELM_ARGS INSTALL_WAIT

.PHONY: install
install: ## From this checkout onto the current kubeconfig's cluster: make install REGISTRY=registry.example.com/team builds the image (ko), pushes it there, applies the CRDs and installs or upgrades the chart pinned to the image's digest (HELM_ARGS: more helm flags; values given before are kept).
	@REGISTRY_ORIGIN="$(origin REGISTRY)" CHART="$(CHART)" MAKE="$(MAKE)" hack/install.sh

.PHONY: chart-push
chart-push: ## helm package the chart as CHART_VERSION (appVersion IMAGE_TAG) and push it to oci://REGISTRY/charts.
	rm -rf $(BIN)/chart && mkdir -p $(BIN)/chart
	$(HELM) package $(CHART) --version $(CHART_VERSION) --app-version $(IMAGE_TAG) -d $(BIN)/chart
	$(HELM) push $(BIN)/chart/cmsync-$(CHART_VERSION).tgz oci://$(REGISTRY)/charts $(HELM_PUSH_ARGS)

.PHONY: crds-dist
crds-dist: ## Write the chart's CRDs as one file, $(BIN)/crds/cmsync-crds.yaml: the release asset that upgrades apply (Helm never upgrades CRDs).
	rm -rf $(BIN)/crds && mkdir -p $(BIN)/crds
	for crd in $(CHART)/crds/*.yaml; do echo '---'; grep -v -x -e '---' "$$crd"; done > $(BIN)/crds/cmsync-crds.yaml

.PHONY: sign
sign: ## cosign sign REF (an image or chart by digest): with COSIGN_KEY a key pair and no transparency log, else keyless.
	$(COSIGN) sign --yes $(if $(COSIGN_KEY),--key $(COSIGN_KEY) --use-signing-config=false --tlog-upload=false) $(REF)

.PHONY: verify-signature
verify-signature: ## cosign verify REF with COSIGN_PUB (no transparency log), or keyless with COSIGN_IDENTITY and COSIGN_ISSUER.
	$(COSIGN) verify $(if $(COSIGN_PUB),--key $(COSIGN_PUB) --insecure-ignore-tlog,--certificate-identity-regexp '$(COSIGN_IDENTITY)' --certificate-oidc-issuer '$(COSIGN_ISSUER)') $(REF) >/dev/null

ACTIONLINT = $(shell hack/tool.sh actionlint)

.PHONY: lint-workflows
lint-workflows: ## actionlint the GitHub workflows (the release workflow cannot run here), with a pinned actionlint built from the Go module proxy.
	$(ACTIONLINT) .github/workflows/*.yaml

.PHONY: test-release
test-release: ## The release path against a registry of its own on loopback (TLS, htpasswd): base image, ko image with SBOM, reproducibility, cosign signatures, a tampered image refused, the signed OCI chart, the CRDs' release asset; and make install from the checkout through that registry onto a real API server.
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" REGISTRY_BIN="$$(hack/tool.sh registry)" COSIGN_BIN="$(COSIGN)" HELM="$(HELM)" \
	  go test -tags release -count=1 -timeout 20m ./test/release/... -v

PLUGIN_PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
VERSION ?= v0.0.0-dev

.PHONY: plugin-dist
plugin-dist: ## Build kubectl-cmsync archives for every platform into bin/dist and render the krew manifest with their checksums (VERSION=vX.Y.Z).
	hack/plugin-dist.sh $(VERSION) $(BIN)/dist $(PLUGIN_PLATFORMS)

.PHONY: run
run: build ## Run cmsync against the current kubeconfig, or against a local control plane when no cluster is reachable.
	hack/run.sh $(BIN)/cmsync $(ARGS)

.PHONY: control-plane
control-plane: ## Build (once) and cache kube-apiserver, kube-controller-manager and etcd from the Go module proxy.
	@hack/control-plane-binaries.sh

CONTROLLER_GEN = $(shell hack/tool.sh controller-gen)

.PHONY: generate
generate: ## Generate the deepcopy code of api/v1alpha1 from its markers.
	$(CONTROLLER_GEN) object paths=./api/...

CHART = deploy/chart/cmsync

.PHONY: manifests
manifests: ## Generate the ConfigMapSync CRD (deploy/crds) and the ClusterRole (deploy/rbac) from the markers, and copy both into the chart.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=deploy/crds
	$(CONTROLLER_GEN) rbac:roleName=cmsync paths=./replicator/... output:rbac:dir=deploy/rbac
	mkdir -p $(CHART)/crds $(CHART)/files
	cp deploy/crds/*.yaml $(CHART)/crds/
	cp deploy/rbac/role.yaml $(CHART)/files/clusterrole.yaml

# What generate and manifests write; verify compares only these, so uncommitted edits of
# hand-written files do not fail it.
GENERATED = api/v1alpha1/zz_generated.deepcopy.go deploy/crds deploy/rbac $(CHART)/crds $(CHART)/files

.PHONY: verify
verify: generate manifests ## Fail when generated files drift from their markers.
	@git diff --exit-code -- $(GENERATED) || { echo "generated files are out of date: run make generate manifests and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- $(GENERATED))" || { git status --porcelain -- $(GENERATED); echo "untracked generated files"; exit 1; }

HELM = $(shell hack/tool.sh helm)

.PHONY: helm-lint
helm-lint: ## helm lint and helm template of the chart, with a pinned helm built from the Go module proxy.
	$(HELM) lint --strict $(CHART)
	$(HELM) template cmsync $(CHART) --namespace cmsync-system >/dev/null
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set metrics.serviceMonitor.enabled=true --set replicaCount=2 >/dev/null
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set metrics.prometheusRule.enabled=true | grep -q 'alert: CmsyncAbsent'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set metrics.dashboard.enabled=true | grep -q '"uid": "cmsync"'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set secrets.enabled=true >/dev/null
	# SecretSync: its verbs and flag with secrets.enabled alone.
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --show-only templates/rbac.yaml | { ! grep -q secretsyncs; }
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set secrets.enabled=true --show-only templates/rbac.yaml \
	  | grep -c -E -- '- secretsyncs(/status)?$$' | grep -q '^2$$'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set secrets.enabled=true --set controller.secretSync=disabled \
	  --show-only templates/deployment.yaml | grep -q -- '--secretsync=disabled'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set secrets.enabled=true \
	  --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy | grep -q 'name: cmsync-protect-replicas'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set 'reservedNames={istio-ca-root-cert}' --set tenancy.label=capsule.clastix.io/tenant \
	  --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy | grep -q 'request.name in \["kube-root-ca.crt","istio-ca-root-cert"\]'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set 'reservedNames={istio-ca-root-cert}' --set tenancy.label=capsule.clastix.io/tenant \
	  | grep -q -- '--tenant-label=capsule.clastix.io/tenant'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set admission.enabled=false \
	  --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy | { ! grep -q ValidatingAdmissionPolicy; }
	# Scoped mode: the flag, no ClusterRole rule on ConfigMaps, Secrets or Events, a Role in each namespace, bindings limited to them.
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set secrets.enabled=true --set 'scope.namespaces={team-b,team-a}' \
	  --show-only templates/deployment.yaml | grep -q -- '--namespaces=team-b,team-a'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set secrets.enabled=true --set 'scope.namespaces=team-a\,team-b' \
	  --show-only templates/rbac.yaml | awk '/^kind: ClusterRole$$/,/^---/' | { ! grep -q -E -- '- (configmaps|secrets|events)$$'; }
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set secrets.enabled=true --set 'scope.namespaces=team-a\,team-b' \
	  --show-only templates/rbac.yaml | grep -c -E '^  namespace: team-(a|b)$$' | grep -q '^4$$'
	$(HELM) template cmsync $(CHART) --namespace cmsync-system --set 'scope.namespaces={team-a}' \
	  --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy | grep -c 'values: \["team-a"\]' | grep -q '^2$$'

.PHONY: docker-build
docker-build: ## Build the container image IMG with Docker (needs a Docker engine).
	docker build -t $(IMG) .

GOLANGCI_LINT = $(shell hack/tool.sh golangci-lint)

.PHONY: lint
lint: ## golangci-lint with the repository's .golangci.yml (kubebuilder's linters), pinned and built from the Go module proxy.
	$(GOLANGCI_LINT) run ./...
	cd hack && $(GOLANGCI_LINT) run ./...

PROMTOOL = $(shell hack/tool.sh promtool)

.PHONY: test-alerts
test-alerts: ## promtool: check the alert rules and run their unit tests (test/alerts), with a pinned promtool built from the Go module proxy.
	$(PROMTOOL) check rules $(CHART)/files/alerts.yaml
	$(PROMTOOL) test rules test/alerts/alerts_test.yaml

# The order is for a fresh machine: the steps that need no tool but the control plane
# come first, so that the integration suite, which mostly waits on the API server, runs
# while tools-ahead builds the tools of the steps after it.
.PHONY: test
test: tools-ahead vet test-unit fuzz-short test-integration lint lint-workflows verify helm-lint test-alerts e2e bench-smoke test-release test-kind-e2e ## Run every test: vet, unit, a short fuzz, integration, lint, workflows, generated files, chart, alert rules, end-to-end, a bench smoke run, the release path, and the chart's Pods on a two-node kind cluster.

# The recipe's shell is make's child, so $$PPID is the make that the builder stops with.
.PHONY: tools-ahead
tools-ahead: ## Build the tools of make test's later steps in the background at the lowest CPU priority (its first step; at once on a warm machine).
	@hack/tools-ahead.sh $(BIN)/tools-ahead.log "$$PPID"

FUZZ_TARGETS = FuzzParseTargetAnnotations FuzzParseStripMetadata FuzzParseSyncTargets FuzzTemplate FuzzParseKeys FuzzParseTargetName FuzzTenantBoundary FuzzWriteBudget FuzzParseObjectKinds FuzzObjectTemplate
FUZZTIME ?= 2m

.PHONY: fuzz
fuzz: ## Fuzz every parser of user input for FUZZTIME each (default 2m).
	for target in $(FUZZ_TARGETS); do go test ./desired -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) || exit 1; done

# make test's short fuzz runs a count of inputs, not a duration: with a duration, Go's
# fuzz coordinator can report its own deadline as a failure (golang/go#75804, not fixed
# in go1.26), which a count never reaches.
.PHONY: fuzz-short
fuzz-short: ## Fuzz each parser with 50,000 inputs (part of make test).
	$(MAKE) fuzz FUZZTIME=50000x

.PHONY: vet
vet: ## go vet and a gofmt check.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	go vet -C hack ./...

.PHONY: test-unit
test-unit: ## Table tests of the pure functions, predicates, the plugin and migrate, the policy flags, the GC target, the lease fence, the metrics guard and the bench's reading of the audit log.
	go test -count=1 . ./desired/... ./internal/... ./replicator/... ./predicates/... ./api/...
	go test -C hack -count=1 ./bench/... ./runcwrap/...

.PHONY: test-integration
test-integration: ## The reconciler against a real kube-apiserver and etcd (envtest).
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" go test -count=1 -timeout 30m ./test/integration/... -v

.PHONY: test-e2e
test-e2e: e2e ## The end-to-end suite alone (make e2e).

.PHONY: test-oldest
test-oldest: ## The integration and end-to-end suites against the oldest supported Kubernetes (K8S_OLDEST_VERSION), its control plane built from the Go module proxy and cached like the newest; the CI workflow runs it beside make test.
	$(MAKE) test-integration e2e K8S_VERSION=$(K8S_OLDEST_VERSION)

.PHONY: e2e
e2e: build ## The cmsync binary as a process against kube-apiserver, etcd and kube-controller-manager, installed with helm, running as the chart's ServiceAccount.
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" CMSYNC_BIN="$(abspath $(BIN)/cmsync)" CMSYNC_PLUGIN="$(abspath $(BIN)/kubectl-cmsync)" \
	  PROMETHEUS="$$(hack/tool.sh prometheus)" HELM="$(HELM)" go test -tags e2e -count=1 -timeout 30m ./test/e2e/... ./test/scoped/... ./test/upgrade/... ./test/chaos/... -p 1 -v

.PHONY: kind-e2e
kind-e2e: ## The chart's Pods on a two-node kind cluster, installed from the registry as users install, and the in-cluster suites against them (with Docker; or as root with an engine and node image of the suite's own, see docs/development.md).
	hack/kind-e2e.sh test

# make test runs kind-e2e where it can: with a Docker engine, or as root (CI).
.PHONY: test-kind-e2e
test-kind-e2e:
	CMSYNC_KIND_E2E_OPTIONAL=1 hack/kind-e2e.sh test

.PHONY: local-kind
local-kind: ## The kind cluster of kind-e2e with cmsync installed from its registry; Ctrl-C deletes it and cleans up.
	hack/kind-e2e.sh up

BENCH_ARGS ?=
BENCH_CMD ?= point

.PHONY: bench
bench: bench-tool ## Benchmark cmsync against the API server's limit (N=1000 namespaces, U=20000 unrelated ConfigMaps, S=100 sources); BENCH_ARGS="-n 200 -u 2000 -s 10 -idle 10s -rounds 3" for a short run, BENCH_CMD=apf BENCH_ARGS="-n 1000 -s 10" for a 429 storm, BENCH_CMD=styles for the ways of writing (hack/bench: point, sweep, restarts, apf, styles, scoped, plot).
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) $(BENCH_CMD) -cmsync $(BIN)/cmsync $(BENCH_ARGS)

SWEEP_ARGS ?=

.PHONY: bench-sweep
bench-sweep: bench-tool ## The curve: fan-out, mass update, cleanup and restart against LIMIT at N=100/1,000/10,000 namespaces, S=1/10/100 sources and 1/100/900 KiB objects (3 rounds, each on a fresh control plane, and 3 restarts each; 9 rounds at points of fewer than 5,000 replicas, two at 900 KiB; 70–120 minutes); bench/results/sweep-*.json and the plots in bench/plots/.
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) sweep -cmsync $(BIN)/cmsync $(SWEEP_ARGS)

.PHONY: bench-restarts
bench-restarts: bench-tool ## Only the sweep's memory and restarts at S=100 × 1,000 namespaces (100,000 replicas fanned out by cmsync, then 5 restarts; about 7 minutes); bench/results/restarts-*.json.
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) restarts -cmsync $(BIN)/cmsync -sweep-s 100 -sweep-restarts 5 $(SWEEP_ARGS)

.PHONY: bench-scoped
bench-scoped: bench-tool ## Scoped mode (--namespaces) against the default at 10, 100 and 1,000 namespaces: watches of ConfigMaps at the API server, time to ready, memory, and the fan-out of one source against LIMIT's creates (3 rounds each, each point on a fresh control plane); bench/results/scoped-*.json.
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) scoped -cmsync $(BIN)/cmsync -rounds 3 $(BENCH_ARGS)

.PHONY: bench-smoke
bench-smoke: bench-tool ## A tiny sweep (20 namespaces, 2 sources, two rounds: LIMIT first, then cmsync first), one round of it with LIMIT watched and cmsync's warm-up, a tiny restarts run, a tiny styles run, a tiny scoped run and a tiny point with its ObjectSync rounds, so that the harness and its plots cannot rot; writes under $(BIN)/bench-smoke.
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) sweep -cmsync $(BIN)/cmsync \
	  -sweep-n 20 -sweep-s 2 -sweep-sizes 4Ki -sweep-base-n 20 -sweep-rounds 2 -sweep-short-rounds 2 -idle 3s -aftermath 200ms \
	  -out $(BIN)/bench-smoke -plot-dir $(BIN)/bench-smoke/plots
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) sweep -cmsync $(BIN)/cmsync -sweep-limit-watched -sweep-warm-up \
	  -sweep-n 20 -sweep-s 1 -sweep-sizes 1Ki -sweep-base-n 20 -sweep-rounds 1 -sweep-short-rounds 1 -sweep-restarts 1 -idle 3s -aftermath 200ms \
	  -out $(BIN)/bench-smoke -plot-dir $(BIN)/bench-smoke/plots-watched
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) restarts -cmsync $(BIN)/cmsync \
	  -sweep-s 2 -sweep-base-n 20 -sweep-restarts 1 -idle 3s -out $(BIN)/bench-smoke
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) styles -n 20 -rounds 2 -out $(BIN)/bench-smoke
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) scoped -cmsync $(BIN)/cmsync -scoped-n 5 -rounds 1 -aftermath 200ms -out $(BIN)/bench-smoke
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" $(BENCH) point -cmsync $(BIN)/cmsync \
	  -n 10 -u 0 -s 0 -rounds 1 -secret-rounds 0 -object-rounds 1 -object-limit-watched -idle 3s -aftermath 200ms -out $(BIN)/bench-smoke

CHAOS_KILLS ?= 100
CHAOS_LEADER_KILLS ?= 5
CHAOS_SEED ?= 1
CHAOS_HISTORIES ?= 200
CHAOS_THROTTLE ?= 1m
CHAOS_FAULTS ?=
# netns (as root, the default then): the partition drops the routes of a network namespace
# of the project's own. relay (the default otherwise): it cuts a relay on loopback.
CHAOS_PARTITION ?= $(if $(filter 0,$(shell id -u)),netns,relay)

.PHONY: chaos
chaos: build ## The model checker: CHAOS_HISTORIES random histories (default 200, seeded by CHAOS_SEED) against two leader-elected processes, each with one fault in turn (every fault type 22 or 23 times: SIGKILL, frozen leader, partition, CHAOS_THROTTLE of 429s, etcd and kube-apiserver restarts, watch expiry, new flags; CHAOS_FAULTS=a,b for some), checked against a model of docs/reference.md; then CHAOS_KILLS SIGKILLs and CHAOS_LEADER_KILLS leader kills. Figures in bench/results/chaos-*.json; about 80 minutes. make test runs 12 histories.
	KUBEBUILDER_ASSETS="$$(hack/control-plane-binaries.sh)" CMSYNC_BIN="$(abspath $(BIN)/cmsync)" HELM="$(HELM)" \
	  CHAOS_SEED=$(CHAOS_SEED) CHAOS_HISTORIES=$(CHAOS_HISTORIES) CHAOS_THROTTLE=$(CHAOS_THROTTLE) CHAOS_FAULTS=$(CHAOS_FAULTS) CHAOS_PARTITION=$(CHAOS_PARTITION) CHAOS_OUT=$(abspath bench/results) \
	  CMSYNC_CHAOS_KILLS=$(CHAOS_KILLS) CMSYNC_CHAOS_LEADER_KILLS=$(CHAOS_LEADER_KILLS) CMSYNC_CHAOS_SEED=$(CHAOS_SEED) CMSYNC_CHAOS_OUT=$(abspath bench/results) \
	  go test -tags e2e -count=1 -timeout 180m -run 'TestModelChecker$$|TestChaos$$' ./test/chaos/... -v

.PHONY: clean
clean: ## Remove build output (the cached control-plane binaries stay).
	rm -rf $(BIN) .cache
