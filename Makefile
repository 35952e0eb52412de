# Slipway. `make test` is what CI runs (.ci/run); `make demo` is the main job on a local control plane.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
LDFLAGS := -s -w -X github.com/slipway-dev/slipway/internal/version.Version=$(VERSION)
export CGO_ENABLED ?= 0

.PHONY: build test lint deps controlplane demo bench render image clean

## build: the two binaries into bin/, version-stamped
build:
	go build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./agent/cmd/update-agent ./operator/cmd/update-operator

## deps: apt packages the tests need (dbus-daemon)
deps:
	@hack/install-deps.sh

## controlplane: etcd, kube-apiserver, kube-controller-manager, kubectl from the Go proxy (cached)
controlplane: deps
	@hack/build-controlplane.sh etcd kube-apiserver kube-controller-manager kubectl >/dev/null

## lint: gofmt and go vet
lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed: $$bad"; exit 1; fi
	go vet ./...

## test: everything (unit + integration on a real apiserver, etcd, kube-controller-manager, dbus-daemon)
test: controlplane lint build
	CGO_ENABLED=1 go test -race -count=1 ./...

## demo: a local control plane, simulated nodes with real agents on real D-Bus, a rolling reboot
demo: controlplane
	go run ./hack/demo

## bench: signal→reboot-ok latency and idle API writes on the real apiserver
bench: controlplane
	go test -run '^$$' -bench . -benchtime 1x -count 1 ./operator/

## render: the kustomize manifests
render: controlplane
	@"$$(hack/build-controlplane.sh kubectl 2>/dev/null)/kubectl" kustomize deploy/

## image: the container image (needs a Docker engine)
image:
	docker build --build-arg VERSION=$(VERSION) -t slipway:$(VERSION) .

clean:
	rm -rf bin/
