# Slipway. `make test` is what CI runs (.ci/run); `make demo` is the main job on a local control plane.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
LDFLAGS := -s -w -X github.com/slipway-dev/slipway/internal/version.Version=$(VERSION)
export CGO_ENABLED ?= 0
# Every binary here is built -trimpath (make build, the images, the node image, the test helpers that
# build update-operator), so vet and go test are too: then one compile of a package serves them all,
# where a cold `make test` used to compile the product's ~850 dependencies once more for vet. Test
# binaries link without DWARF (-w): stack traces keep their file:line, the links are faster.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath -ldflags=-w)

.PHONY: build test unit lint release docs generate deps controlplane demo demo-promotion bench bench-fleet chaos render image clean e2e e2e-deps cluster cluster-down butane flatcar-image terraform-deps

## build: the binaries into bin/ (update-agent, update-operator, kubectl-slipway), version-stamped
build:
	go build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./agent/cmd/update-agent ./operator/cmd/update-operator ./operator/cmd/kubectl-slipway

## deps: apt packages the tests need (dbus-daemon)
deps:
	@hack/install-deps.sh

## controlplane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl from the
##               Go proxy (cached outside the repo by version)
controlplane: deps
	@hack/build-controlplane.sh >/dev/null

## lint: gofmt and go vet
lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed: $$bad"; exit 1; fi
	go vet ./...
	cd e2e && go vet ./...
	cd hack/ociimage && go vet ./...
	cd butane && go vet ./...
	cd deploy/helmtest && go vet ./...
	cd hack/release && go vet ./...

## terraform-deps: libvirt, dnsmasq and QEMU (apt), terraform (built from the Go proxy if not on PATH)
terraform-deps:
	@hack/install-terraform-deps.sh

## unit: the fast tier: every pure test of every module (go test -short -count=1, no -race), nothing
##       real started (no control plane, dbus-daemon, Prometheus, QEMU, terraform, helm/kubectl, go build:
##       internal/testsupport/testenv refuses them under -short and hack/unit.sh shadows them); under 60 s warm
unit:
	@hack/unit.sh

## test: everything: unit + integration (real apiserver, etcd, kube-controller-manager, dbus-daemon,
##       systemd in VMs, terraform + libvirtd), then the e2e suites on local QEMU VMs that really reboot.
##       Modules: the product (.), the test machinery (e2e/: chaos, fleet bench, terraform, VM harness),
##       hack/ociimage, butane/, deploy/helmtest/ (Helm 4 and Helm 3), hack/release (a whole release, checked, and every command of the README and docs/ run against it: deploy/docsguard). Says how long each stage took, and sums up at the end.
##       -race for the product's tests only: the e2e/ module runs the operator and agents as separate
##       processes (chaos, fleet bench, VMs), so -race there would race-compile its whole dependency tree
##       (e2e-framework, controller-runtime, terraform-exec) again for the harness code alone; without it
##       its test build reuses what `make lint` compiled
STAGES := $(CURDIR)/bin/test-stages.txt
STAGE = SLIPWAY_STAGES=$(STAGES) $(CURDIR)/hack/stage.sh
test:
	@mkdir -p bin && : >$(STAGES)
	@$(STAGE) "control plane build" $(MAKE) --no-print-directory controlplane
	@$(STAGE) "deps+lint+build" $(MAKE) --no-print-directory terraform-deps lint build
	@$(STAGE) "unit+integration ." hack/test-race.sh
	@cd e2e && $(STAGE) "unit+integration e2e/" go test -count=1 ./...
	@cd hack/ociimage && $(STAGE) "unit+integration hack/ociimage" go test -count=1 ./...
	@cd butane && $(STAGE) "unit+integration butane/" go test -count=1 ./...
	@cd deploy/helmtest && $(STAGE) "unit+integration deploy/helmtest" go test -count=1 ./...
	@cd hack/release && $(STAGE) "release bundle hack/release" go test -count=1 -timeout 45m ./...
	@$(STAGE) "e2e" $(MAKE) --no-print-directory e2e
	@echo "make test: every stage passed:"; cat $(STAGES)

## generate: the code and manifests generated from api/v1alpha1 by controller-gen (deepcopy, the
##           RebootPolicy CRD for kustomize and Helm); TestGenerated fails when they are stale
generate:
	@hack/generate.sh

## docs: regenerate the generated reference pages (docs/reference/*.md) from the code; the tests fail
##       when one is stale
docs:
	SLIPWAY_UPDATE_DOCS=1 go test ./operator/cmd/update-operator/ ./agent/cmd/update-agent/ ./internal/protocol/ ./deploy/ ./operator/ ./api/v1alpha1/ -run '^(TestFlagReference|TestMetricsReference|TestKeyReference|TestHelmValuesReference|TestGateTable|TestCRDReference)$$' -count=1

## demo: a local control plane, simulated nodes with real agents on real D-Bus, the real update-operator
##       binary installed paused, then resumed: a rolling reboot, its history and a timeline SVG.
##       make demo DEMO_FLAGS=-stay keeps it running until Ctrl-C and prints the KUBECONFIG to look around with
demo: deps
	@echo "make demo: installs dbus-daemon with apt if missing (needs root or sudo), builds etcd, kube-apiserver and"
	@echo "  kube-controller-manager from the Go module proxy into ~/.cache/slipway (cold: ~9-13 min on 2 cores, then"
	@echo "  cached) and update-operator from this tree, then runs the demo (~1 min)."
	@SLIPWAY_CONTROLPLANE_DIR=$$(hack/build-controlplane.sh etcd kube-apiserver kube-controller-manager | tail -1) && \
		cd e2e && SLIPWAY_CONTROLPLANE_DIR=$$SLIPWAY_CONTROLPLANE_DIR go run ./cmd/demo $(DEMO_FLAGS)

## demo-promotion: staging and production as two real control planes, each with its operator and simulated
##                 nodes, and a real Prometheus scraping staging: production reboots into a version only after
##                 staging proved it and it soaked (~1.5 min once the control plane is built)
demo-promotion: deps
	@SLIPWAY_CONTROLPLANE_DIR=$$(hack/build-controlplane.sh etcd kube-apiserver | tail -1) && \
		cd e2e && SLIPWAY_CONTROLPLANE_DIR=$$SLIPWAY_CONTROLPLANE_DIR go run ./cmd/demo-promotion

## bench: signal→reboot-ok latency and idle API writes on the real apiserver, then bench-fleet
bench: controlplane
	go test -run '^$$' -bench . -benchtime 1x -count 1 ./operator/
	$(MAKE) bench-fleet

## bench-fleet: rolling reboots over 1,000 and 5,000 simulated nodes with a real update-operator process
##              (one `rolling nodes=N ...` line per size; results and pprof profiles in bench-results/).
##              Smaller: make bench-fleet FLEET_FLAGS='-nodes 50 -need 10 -k 3' (cd e2e && go run ./cmd/fleetbench -h)
FLEET_FLAGS ?=
bench-fleet: controlplane
	cd e2e && go run ./cmd/fleetbench $(FLEET_FLAGS)

## chaos: 24 simulated nodes, two real operators, >=200 reboot cycles while faults hit (leader SIGKILLed,
##        agents killed, API server and etcd restarted, a PDB blocking, a node that never returns and whose
##        Node is deleted); an independent invariant checker judges. Ends with `chaos: cycles=N violations=V`.
##        CYCLES=1000 for a longer run (DURATION caps it, default then 90m). Quick: cd e2e && go run ./cmd/chaos -short
chaos: controlplane
	cd e2e && go run ./cmd/chaos $(if $(CYCLES),-cycles $(CYCLES) -duration $(or $(DURATION),90m))

## render: the kustomize manifests
render: controlplane
	@"$$(hack/build-controlplane.sh kubectl 2>/dev/null)/kubectl" kustomize deploy/

## helm: lint the Helm chart (deploy/helm/slipway, --strict) and render it with its defaults, with the Helm
##       deploy/helmtest pins (`go tool helm`; pass more with HELM_ARGS='--set fleetlock.enabled=true')
.PHONY: helm
helm:
	@cd deploy/helmtest && go tool helm lint --strict --namespace slipway-system ../helm/slipway >&2
	@cd deploy/helmtest && go tool helm template slipway ../helm/slipway --namespace slipway-system $(HELM_ARGS)

## e2e-deps: QEMU, mmdebstrap and a guest kernel (apt)
e2e-deps:
	@hack/install-e2e-deps.sh

## e2e: local QEMU cluster (2 VMs, E2E_NODES=3 for more; real kubelets, real reboots), the e2e-framework suites, teardown,
##      per-node timeline. Artifacts (serial consoles, operator log, timeline) in e2e-artifacts/.
e2e: controlplane e2e-deps
	cd e2e && SLIPWAY_E2E=1 go test -count=1 -timeout 60m -v .

## flatcar-image: download Flatcar's QEMU image (needs internet), verified by SHA-512; prints its path.
##                `make e2e FLATCAR_IMAGE=$$(make -s flatcar-image)` boots it instead of the Debian image
flatcar-image:
	@hack/fetch-flatcar-image.sh

## cluster: the same local cluster, left running (make cluster-down stops it).
##          BACKEND=terraform: instead a Flatcar+kubeadm cluster on libvirt from terraform/examples/libvirt
##          (terraform-exec; needs FLATCAR_IMAGE), Slipway installed from deploy/
BACKEND ?= qemu
cluster: controlplane e2e-deps
	@if [ "$(BACKEND)" = terraform ]; then hack/install-terraform-deps.sh; fi
	cd e2e && go run ./cmd/cluster up -backend=$(BACKEND)

cluster-down:
	cd e2e && go run ./cmd/cluster down

## butane: regenerate the Ignition beside every snippet in butane/snippets (tests fail when stale)
butane:
	cd butane && go run ./cmd/gen

## release: one release into dist/: the image index (amd64+arm64) as an OCI archive, install.yaml and
##          install-fleetlock.yaml at that tag, the packaged chart, kubectl-slipway (linux/darwin x
##          amd64/arm64) and update-agent (linux) archives, a CycloneDX SBOM per binary, the krew
##          manifest, SHA256SUMS. make release VERSION=v0.4.0 [IMAGE=registry.example/slipway]: the
##          manifests and the chart pull IMAGE:VERSION@sha256:<the digest it built> (hack/release; its
##          test checks every file). Refused on a dirty tree: commit or stash first.
IMAGE ?= ghcr.io/slipway-dev/slipway
release:
	go run -C hack/release . -version $(VERSION) -image $(IMAGE) -repo $(CURDIR) -out $(CURDIR)/dist

## image: the image for linux/amd64 and linux/arm64 as one OCI image index in bin/image/slipway-$(VERSION).oci.tar
##        (docker buildx where a Docker engine answers, else hack/ociimage; see hack/build-image.sh)
image:
	@hack/build-image.sh $(VERSION)

clean:
	rm -rf bin/
